"""Scaling where there are cores: Pong PPO and Ape-X env steps/s on 1 to 9 processes, one table.

    bash benchmarks/gpu/device_scaling.sh --out-dir scaling_results   # 16 cores and one GPU: at most 5 minutes
    bash benchmarks/gpu/device_scaling.sh --rows p1c,a7               # some rows only (ids below), in table order
    bash benchmarks/gpu/device_scaling.sh --dry-run                   # every row with tiny budgets on a CPU (CI)

Every row is one whole ``ding-dist train`` process (``python -m ding_dist.entry.cli train configs/pong_*.py
--max-env-steps N [--nproc N | --actors N] --set ...``), timed from outside as a user waits: interpreter
start, imports, torchrun and rendezvous, training, the final evaluation game, the checkpoint, the exit. Rows, most
informative first (the baseline, then each family's largest size, then the middle, then the smallest), so that
a run the budget cuts short still has the headline ratios:

| id | run | base |
|---|---|---|
| p1c, p1g | PPO (``configs/pong_ppo_config.py``), 1 process on the CPU; the same with ``policy.device=cuda`` | p1c |
| a7, a7i, a3, a3i, a1, a1i | PPO, 7 / 3 / 1 actors (CPU) + 1 learner on the GPU; ``i``: with the inference rank |
|  | (``actor_learner.inference=1``, ``actor_learner.actor_device=cuda``: one more process acts for every actor) | p1c |
| d8, d4, d2 | PPO data-parallel (``--nproc N``), CPU: the config's global sizes split over the ranks | p1c |
| x1, x8, x4, x2 | Ape-X DQN (``configs/pong_apex_dqn_config.py``), N actors (CPU) + 1 learner on the GPU | x1 |

Each row's figures: env steps/s of the whole process (env steps / wall) and of the training loop in its steady
state (between the run's first and last log record: start-up, the first chunks and the final evaluation left
out), learner updates/s (train iterations, the same records), the ratios of both rates to the row's base, the
1-process GPU row (``x_p1g``) for the GPU rows, and the learner's and actors' idle fractions (``idle/learner``,
``idle/actor`` of the run's log records, mean over the records after the first, whose interval holds the
start-up; data-parallel runs log none).

Budgets: ``--steps`` env steps per PPO row (default 4,096: 4 rollouts of 1,024, a log record every 1,024, so
the steady state spans the last 3,072), ``--apex-steps`` per Ape-X row (4,096, learning from step 1,024, replay
50k); a per-row limit (``--row-timeout``, 60 s: a stuck row is ended with its processes and reported ``timeout``
with the figures its log records hold) and one for all rows (``--budget``, 280 s: a row is not started with under
15 s left, and none runs past it), so that the command ends within 5 minutes with the wheel install. Rows needing
CUDA are ``skipped: no CUDA`` where torch sees none, unless ``--device cpu`` (their GPU parts on the CPU).
``--dry-run``: ``--device cpu``, every row (unless ``--rows``) with tiny budgets and configs (512 env steps a PPO
row, 384 an Ape-X row; PPO: 8 envs stepped in the process, 256-step rollouts; 100-step episodes), one thread a
process; it shows that every row's code runs and gives each row's start-up cost (``start_s``), nothing more.

Output: the table on stdout; ``DIR/device_scaling.md`` and ``DIR/device_scaling.json`` (``--out-dir DIR``; else
``--json PATH`` and the table beside it, else a temporary folder it names), each row's log in one archive beside
them, ``device_scaling_logs.tar.gz``.
Exit status: 0 every row ok or skipped, 1 a row failed or timed out, 2 bad arguments.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
CONFIGS = {"ppo": REPO / "configs" / "pong_ppo_config.py", "apex": REPO / "configs" / "pong_apex_dqn_config.py"}
DEVICE_COMMAND = "bash benchmarks/gpu/device_scaling.sh --out-dir scaling_results"
STEPS = 4096  # env steps of a PPO or Ape-X row
ROW_TIMEOUT_S = 60.0
BUDGET_S = 280.0
MIN_ROW_S = 15.0  # a row is not started with less left of the budget
KILL_GRACE_S = 5.0


@dataclass(frozen=True)
class Row:
    """One run of the table: its CLI arguments and what it needs."""

    id: str
    what: str
    algo: str  # "ppo" or "apex": the config, and the base row of the ratios
    args: tuple[str, ...] = ()
    procs: int = 1
    cuda: bool = False  # the learner (and an inference rank) on the GPU
    inference: bool = False


def _actors(n: int, inference: bool = False) -> Row:
    extra = " + inference rank (GPU)" if inference else ""
    return Row(f"a{n}{'i' * inference}", f"PPO, {n} actor{'s' * (n > 1)} + 1 learner (GPU){extra}", "ppo",
               ("--actors", str(n)), n + 1 + inference, True, inference)  # fmt: skip


def _dp(n: int) -> Row:
    return Row(f"d{n}", f"PPO, data-parallel, {n} processes (CPU)", "ppo", ("--nproc", str(n)), n)


def _apex(n: int) -> Row:
    return Row(f"x{n}", f"Ape-X DQN, {n} actor{'s' * (n > 1)} + 1 learner (GPU)", "apex", ("--actors", str(n)),
               n + 1, True)  # fmt: skip


ROWS: dict[str, Row] = {
    r.id: r
    for r in (
        Row("p1c", "PPO, 1 process (CPU)", "ppo"),
        Row("p1g", "PPO, 1 process (GPU)", "ppo", cuda=True),
        _actors(7),
        _actors(7, True),
        _dp(8),
        _apex(1),
        _apex(8),
        _actors(3),
        _actors(3, True),
        _dp(4),
        _apex(4),
        _actors(1),
        _actors(1, True),
        _dp(2),
        _apex(2),
    )
}
BASE = {"ppo": "p1c", "apex": "x1"}
GPU_BASE = "p1g"

# --set overrides: the evaluation only at the end, one game; log records often enough for a steady-state rate
COMMON = ["policy.eval.eval_freq=0", "env.n_evaluator_episode=1", "env.evaluator_env_num=1"]
FULL = {
    "ppo": ["policy.other.log_freq=1024"],
    "apex": [
        "policy.other.log_freq=1024",
        "policy.learn.learning_starts=1024",
        "policy.other.replay_buffer.replay_buffer_size=50000",
    ],
}
DRY = {  # tiny: 8 envs stepped in the process (8 splits over d8's ranks), 100-step episodes, a few small updates
    "ppo": ["policy.other.log_freq=128", "env.collector_env_num=8", "create_config.env_manager.type=sync",
            "env.max_episode_steps=100", "policy.collect.n_sample=256", "policy.learn.batch_size=64",
            "policy.learn.epoch_per_collect=2"],
    "apex": ["policy.other.log_freq=128", "env.collector_env_num=2", "env.max_episode_steps=100",
             "policy.learn.learning_starts=128", "policy.learn.batch_size=16",
             "policy.other.replay_buffer.replay_buffer_size=4096"],
}  # fmt: skip


def row_overrides(row: Row, device: str, dry: bool) -> list[str]:
    """The row's ``--set`` values: budgets of the mode, the learner (and an inference rank) on ``device``."""
    out = COMMON + (DRY if dry else FULL)[row.algo]
    out = out + [f"policy.device={device if row.cuda else 'cpu'}"]
    if row.inference:
        out += ["actor_learner.inference=1", f"actor_learner.actor_device={device}"]
    return out


# ------------------------------------------------------------------------------------------- reading a run
def read_records(path: Path) -> list[dict[str, Any]]:
    """The training records of a run's ``metrics.jsonl`` (those with ``time/env_steps``; evaluations left out),
    skipping a line cut short by a kill."""
    records = []
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            if "time/env_steps" in rec and "wall_time" in rec:
                records.append(rec)
    return records


def steady_rates(records: list[dict[str, Any]]) -> dict[str, float | None]:
    """Env steps/s and train iterations/s between the first and the last record (None with fewer than two), and
    the mean ``idle/learner``, ``idle/actor`` over the records after the first (the first alone if it is the only
    one; None where the run logs none).

    Example::

        steady_rates([{"wall_time": 0.0, "time/env_steps": 0, "time/train_iters": 0},
                      {"wall_time": 2.0, "time/env_steps": 100, "time/train_iters": 10}])["loop_steps_per_s"]  # 50.0
    """
    out: dict[str, float | None] = {"loop_steps_per_s": None, "updates_per_s": None}
    if len(records) >= 2:
        first, last = records[0], records[-1]
        dt = last["wall_time"] - first["wall_time"]
        if dt > 0:
            out["loop_steps_per_s"] = (last["time/env_steps"] - first["time/env_steps"]) / dt
            out["updates_per_s"] = (last.get("time/train_iters", 0) - first.get("time/train_iters", 0)) / dt
    later = records[1:] or records
    for key, name in (("idle/learner", "idle_learner"), ("idle/actor", "idle_actor")):
        values = [r[key] for r in later if key in r]
        out[name] = statistics.mean(values) if values else None
    return out


def ratio(value: float | None, base: float | None) -> float | None:
    """``value / base``, None when either is missing or the base is not positive."""
    if value is None or base is None or not base > 0:
        return None
    return value / base


def add_ratios(results: list[dict[str, Any]]) -> None:
    """Each row's ratios: ``x_base`` / ``x_base_whole`` (steady-state and whole-process env steps/s over the base
    row's: p1c for PPO, x1 for Ape-X) and, for a PPO row on the GPU, ``x_p1g`` (over the 1-process GPU row's)."""
    by_id = {r["id"]: r for r in results if r["status"] == "ok"}
    for r in results:
        base = by_id.get(r["base"], {})
        r["x_base"] = ratio(r.get("loop_steps_per_s"), base.get("loop_steps_per_s"))
        r["x_base_whole"] = ratio(r.get("steps_per_s"), base.get("steps_per_s"))
        gpu = by_id.get(GPU_BASE, {}) if ROWS[r["id"]].cuda and ROWS[r["id"]].algo == "ppo" else {}
        r["x_p1g"] = ratio(r.get("loop_steps_per_s"), gpu.get("loop_steps_per_s"))


def _last(pattern: str, text: str) -> str | None:
    found = re.findall(pattern, text)
    return found[-1] if found else None


def _error_line(log: str) -> str:
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    errors = [ln for ln in lines if re.search(r"(Error|error:|Exception)", ln)]
    return (errors or lines or ["(no output)"])[-1][:300]


# ------------------------------------------------------------------------------------------- running a row
def _run_group(cmd: list[str], env: dict[str, str], log: Path, timeout: float) -> tuple[int | None, float]:
    """Run ``cmd`` in its own process group, output to ``log``; past ``timeout`` end the whole group (torchrun's
    workers, env processes). Returns (exit code, None on a timeout; wall seconds)."""
    with open(log, "w") as f:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code = proc.wait(timeout=max(timeout, 1.0))
        except subprocess.TimeoutExpired:
            code = None
        wall = time.perf_counter() - start
        for sig in (signal.SIGTERM, signal.SIGKILL):  # also the group's leftovers after a normal exit
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(KILL_GRACE_S)
            except subprocess.TimeoutExpired:
                continue
    return code, wall


def run_row(row: Row, *, steps: int, device: str, dry: bool, timeout: float, log_dir: Path) -> dict[str, Any]:
    """One row: ``ding-dist train`` to its end (or its timeout), then its figures."""
    exp = Path(tempfile.mkdtemp(prefix=f"device_scaling_{row.id}_")) / "run"
    cmd = [sys.executable, "-m", "ding_dist.entry.cli", "train", str(CONFIGS[row.algo]), "--seed", "0",
           "--exp-dir", str(exp), "--max-env-steps", str(steps), "--timeout", str(int(timeout) + 30), *row.args,
           "--set", *row_overrides(row, device, dry)]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}  # the library's thread defaults
    if dry:  # one thread a process: a CNN's threads spin against other jobs on a small shared machine
        env["OMP_NUM_THREADS"] = "1"
    log = log_dir / f"{row.id}.log"
    code, wall = _run_group(cmd, env, log, timeout)
    text = log.read_text(errors="replace")
    out: dict[str, Any] = {"wall_s": wall, "command": " ".join(cmd[2:])}
    if code is None:
        out["status"] = f"timeout after {timeout:.0f} s"
    elif code != 0:
        out["status"] = "FAIL"
        out["error"] = f"exit {code}: {_error_line(text)}"
    else:
        out["status"] = "ok"
    result_path = exp / "result.json"
    result = json.loads(result_path.read_text()) if code == 0 and result_path.exists() else {}
    records = read_records(exp / "tb" / "metrics.jsonl")
    env_steps = result.get("env_steps", records[-1]["time/env_steps"] if records else None)
    out["env_steps"] = env_steps
    out["steps_per_s"] = env_steps / wall if code == 0 and env_steps else None
    out["train_wall_s"] = result.get("wall_time_s")
    out["start_s"] = wall - result["wall_time_s"] if "wall_time_s" in result else None  # launch, imports, exit
    out.update(steady_rates(records))
    al = result.get("actor_learner") or {}
    out["lag_max"] = al.get("lag_max")
    served = exp / "inference.json"
    out["rows_per_batch"] = json.loads(served.read_text()).get("rows_per_batch") if served.exists() else None
    out["backend"] = _last(r"backend (\S+), device", text)
    out["policy_device"] = _last(r"policy on (\S+?),? ", text)
    if code == 0 and out["loop_steps_per_s"] is None:
        out["note"] = "fewer than two log records: no steady-state rate (a longer --steps gives one)"
    shutil.rmtree(exp.parent, ignore_errors=True)
    return out


# ------------------------------------------------------------------------------------------- the table
def _fmt(x: Any, spec: str = ".0f") -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def table(results: list[dict[str, Any]], header: str) -> str:
    """The markdown table of the rows, with a header line above it."""
    cols = ("id", "run", "learner", "procs", "env steps", "wall s", "steps/s whole", "steps/s loop", "x base",
            "x base whole", "x p1g", "updates/s", "idle learner", "idle actors", "status")  # fmt: skip
    lines = [header, "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in results:
        status = r["status"] + (f": {r['error']}" if r.get("error") else "")
        cells = (r["id"], ROWS[r["id"]].what, r.get("device", "-"), str(ROWS[r["id"]].procs), _fmt(r.get("env_steps")),
                 _fmt(r.get("wall_s"), ".1f"), _fmt(r.get("steps_per_s")), _fmt(r.get("loop_steps_per_s")),
                 _fmt(r.get("x_base"), ".2f"), _fmt(r.get("x_base_whole"), ".2f"), _fmt(r.get("x_p1g"), ".2f"),
                 _fmt(r.get("updates_per_s"), ".1f"), _fmt(r.get("idle_learner"), ".2f"),
                 _fmt(r.get("idle_actor"), ".2f"), status.replace("|", "\\|"))  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def _environment(args: argparse.Namespace, cuda: bool) -> dict[str, Any]:
    import torch

    return {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cpu_cores": os.cpu_count(),
        "gpu": torch.cuda.get_device_name(0) if cuda else None,
        "mode": "dry run" if args.dry_run else "full",
        "device": args.device,
        "steps": args.steps,
        "apex_steps": args.apex_steps,
        "row_timeout_s": args.row_timeout,
        "budget_s": args.budget,
    }


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", default=None, help="comma-separated ids, or 'all' (the default)")
    p.add_argument("--dry-run", action="store_true", help="tiny budgets on the CPU (CI): shows every row runs")
    p.add_argument("--device", choices=("cuda", "cpu"), default=None, help="where the GPU rows' learners go (cuda)")
    p.add_argument("--steps", type=int, default=None, help=f"env steps per PPO row ({STEPS}; dry run 512)")
    p.add_argument("--apex-steps", type=int, default=None, help=f"env steps per Ape-X row ({STEPS}; dry run 384)")
    p.add_argument("--row-timeout", type=float, default=None, help=f"seconds per row ({ROW_TIMEOUT_S:g}; dry run 240)")
    p.add_argument("--budget", type=float, default=None, help=f"seconds for all rows ({BUDGET_S:g}; dry run 1800)")
    p.add_argument("--out-dir", default=None, metavar="DIR", help="folder for the table, the JSON and the logs")
    p.add_argument("--json", default=None, help="the JSON file (default DIR/device_scaling.json)")
    args = p.parse_args(argv)
    dry = args.dry_run
    if args.device is None:
        args.device = "cpu" if dry else "cuda"
    if dry and args.device != "cpu":
        p.error("--dry-run runs on the CPU: leave out --device cuda")
    for name, full, small in (("steps", STEPS, 512), ("apex_steps", STEPS, 384), ("row_timeout", ROW_TIMEOUT_S, 240.0),
                              ("budget", BUDGET_S, 1800.0)):  # fmt: skip
        if getattr(args, name) is None:
            setattr(args, name, small if dry else full)
        if not getattr(args, name) > 0:
            p.error(f"--{name.replace('_', '-')} must be > 0, got {getattr(args, name)}")
    text = args.rows or "all"
    ids = list(ROWS) if text == "all" else [s.strip() for s in text.split(",") if s.strip()]
    unknown = [i for i in ids if i not in ROWS]
    if unknown or not ids:
        p.error(f"--rows {text!r}: unknown id(s) {', '.join(unknown) or '(none given)'}; expected 'all' or some of "
                f"{', '.join(ROWS)}")  # fmt: skip
    args.ids = [i for i in ROWS if i in ids]  # the table's order
    return args


def _skip_reason(row: Row, device: str, cuda: bool, left: float, budget: float) -> str | None:
    if row.cuda and device == "cuda" and not cuda:
        return "skipped: no CUDA (torch.cuda.is_available() is False; --device cpu runs it on the CPU)"
    if left < MIN_ROW_S:
        return f"skipped: budget ({left:.0f} s of {budget:g} s left)"
    return None


def rerun_command(results: list[dict[str, Any]]) -> str | None:
    """The device command for the rows that failed, timed out or were cut by the budget (None if none was).

    Example::

        rerun_command([{"id": "d2", "status": "skipped: budget (9 s of 280 s left)"}])  # '... --rows d2 --out-dir ...'
    """
    ids = [r["id"] for r in results if r["status"] != "ok" and not r["status"].startswith("skipped: no CUDA")]
    if not ids:
        return None
    return DEVICE_COMMAND.replace("device_scaling.sh ", f"device_scaling.sh --rows {','.join(ids)} ", 1)


def write_report(results: list[dict[str, Any]], env_info: dict[str, Any], header: str, total: float,
                 json_path: Path) -> str:  # fmt: skip
    """Add the ratios to ``results``, write the table (``.md`` beside ``json_path``) and the JSON, each by a
    temporary file and a rename; returns the table with its summary line."""
    add_ratios(results)
    failed = [r["id"] for r in results if not (r["status"] == "ok" or r["status"].startswith("skipped"))]
    summary = f"{len(results)} rows, {len(failed)} failed" + (f" ({','.join(failed)})" if failed else "")
    again = rerun_command(results)
    md = table(results, header) + f"\n{summary}, {total:.0f} s\n" + (f"\nrerun: {again}\n" if again else "")
    report = {"environment": env_info, "total_s": total, "failed": failed, "device_command": DEVICE_COMMAND,
              "rerun_command": again, "rows": results}  # fmt: skip
    json_path.parent.mkdir(parents=True, exist_ok=True)
    _atomic_write(json_path, json.dumps(report, indent=1) + "\n")
    _atomic_write(json_path.with_suffix(".md"), md)
    return md


def _pack_logs(log_dir: Path, logs: Path) -> None:
    tmp = logs.with_name(logs.name + ".tmp")
    with tarfile.open(tmp, "w:gz") as tar:
        tar.add(log_dir, arcname="device_scaling_logs")
    os.replace(tmp, logs)
    shutil.rmtree(log_dir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    import torch

    cuda = torch.cuda.is_available()
    if args.json:
        json_path = Path(args.json)
    else:
        out_dir = Path(args.out_dir) if args.out_dir else Path(tempfile.mkdtemp(prefix="device_scaling_"))
        json_path = out_dir / "device_scaling.json"
    log_dir = Path(tempfile.mkdtemp(prefix="device_scaling_logs_"))
    env_info = _environment(args, cuda)
    header = (f"Device scaling ({env_info['date_utc']} UTC, torch {env_info['torch']}, python {env_info['python']}, "
              f"{env_info['cpu_cores']} CPU cores, GPU {env_info['gpu'] or 'none'}, {env_info['mode']}, "
              f"{args.steps} env steps a PPO row, {args.apex_steps} an Ape-X row)")  # fmt: skip
    print(header, flush=True)
    results: list[dict[str, Any]] = []
    start = time.perf_counter()
    for rid in args.ids:
        row = ROWS[rid]
        device = args.device if row.cuda else "cpu"
        r: dict[str, Any] = {"id": rid, "run": row.what, "base": BASE[row.algo], "procs": row.procs, "device": device}
        left = args.budget - (time.perf_counter() - start)
        skip = _skip_reason(row, device, cuda, left, args.budget)
        if skip:
            r["status"] = skip
        else:
            steps = args.apex_steps if row.algo == "apex" else args.steps
            print(f"{rid}: {row.what}, {steps} env steps ...", flush=True)
            r.update(run_row(row, steps=steps, device=device, dry=args.dry_run,
                             timeout=min(args.row_timeout, left), log_dir=log_dir))  # fmt: skip
            error = f": {r['error']}" if r.get("error") else ""
            print(f"{rid}: {r['status']}{error}, {_fmt(r['wall_s'], '.1f')} s, {_fmt(r['steps_per_s'])} env steps/s "
                  f"whole, {_fmt(r['loop_steps_per_s'])} loop", flush=True)  # fmt: skip
        results.append(r)
    md = write_report(results, env_info, header, time.perf_counter() - start, json_path)
    print("\n" + md, flush=True)
    logs = json_path.with_name("device_scaling_logs.tar.gz")
    _pack_logs(log_dir, logs)
    print(f"device_scaling: wrote {json_path}, {json_path.with_suffix('.md')} and {logs}", flush=True)
    return 1 if any(not (r["status"] == "ok" or r["status"].startswith("skipped")) for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
