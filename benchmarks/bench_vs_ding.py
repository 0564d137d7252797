"""Side by side with DI-engine on DI-engine's own config files: wall time to ``stop_value``, whole process.

For each config and seed it runs DI-engine's ``ding -m serial[_onpolicy] -c FILE -s SEED`` (from a separate
virtual environment holding DI-engine) and ``ding-dist train FILE --seed SEED`` (this environment) on the
same file, taken at run time from the installed ``dizoo`` package, and prints both wall times (process start
to exit, so start-up counts), whether each reached the file's ``stop_value``, and the ratio ours / DI-engine
with the median over the seeds, and both runs' env steps at the end (DI-engine's from the ``result.pkl`` its
serial pipeline writes, ours from ``result.json``). DI-engine's DDP file is run the way its ``__main__`` says
(``torch.distributed.run --nproc_per_node 2 FILE``) next to ``ding-dist train FILE --nproc 2``.

By default the DQN/PPO files run; ``--configs cartpole_a2c,cartpole_rainbow,pendulum_td3,pendulum_ddpg`` (or
``all``) adds DI-engine's A2C, Rainbow, TD3 and DDPG files. Runs go seed by seed (every config's seed 0 first)
and alternate the two systems (``--ours-first``: ours, theirs, ours, ...), so a change in a shared machine's load
falls on both; ``--json`` is rewritten after each pair, so a run cut short keeps what it measured.

Setup (DI-engine in its own venv, torch first so pip does not pull a CUDA build)::

    python -m venv .venvs/di-engine
    .venvs/di-engine/bin/pip install torch==2.13.0 && .venvs/di-engine/bin/pip install di-engine
    python benchmarks/bench_vs_ding.py --ding-venv .venvs/di-engine --seeds 0,1,2

When DI-engine is not installed there, the script says so and exits with code 2 without measuring.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

#: name -> (path inside dizoo, DI-engine's serial mode or "ddp", processes)
CONFIGS = {
    "cartpole_dqn": ("classic_control/cartpole/config/cartpole_dqn_config.py", "serial", 1),
    "cartpole_ppo": ("classic_control/cartpole/config/cartpole_ppo_config.py", "serial_onpolicy", 1),
    "cartpole_dqn_ddp": ("classic_control/cartpole/config/cartpole_dqn_ddp_config.py", "ddp", 2),
    "cartpole_a2c": ("classic_control/cartpole/config/cartpole_a2c_config.py", "serial_onpolicy", 1),
    "cartpole_rainbow": ("classic_control/cartpole/config/cartpole_rainbow_config.py", "serial", 1),
    "pendulum_td3": ("classic_control/pendulum/config/pendulum_td3_config.py", "serial", 1),
    "pendulum_ddpg": ("classic_control/pendulum/config/pendulum_ddpg_config.py", "serial", 1),
}
#: the configs run when --configs is not given
DEFAULT_CONFIGS = ("cartpole_dqn", "cartpole_ppo", "cartpole_dqn_ddp")


@dataclass
class Run:
    """One process run: wall seconds, whether it reached stop_value, env steps (None: unknown), a note."""

    seconds: float
    reached: bool
    note: str = ""
    env_steps: int | None = None


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR")}
    env["OMP_NUM_THREADS"] = env.get("OMP_NUM_THREADS", "1")
    env.pop("DING_DIST_DING_REPORTED", None)
    return env


def _first_error(text: str) -> str:
    """The root cause: the first ``SomeError: message`` line that is not a launcher's summary of it."""
    lines = [line.strip() for line in text.splitlines() if re.search(r"\w+(Error|Exception): ", line)]
    lines = [line for line in lines if "ChildFailedError" not in line] or lines
    return (lines[0] if lines else (text.strip().splitlines() or ["no output"])[-1])[:160]


def _timed(cmd: list[str], cwd: Path, timeout: float) -> tuple[float, subprocess.CompletedProcess | None]:
    start = time.perf_counter()
    try:
        done = subprocess.run(cmd, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return time.perf_counter() - start, None
    return time.perf_counter() - start, done


def dizoo_dir(ding_python: Path) -> Path | None:
    """The installed ``dizoo`` package folder of DI-engine's interpreter, or None when DI-engine is missing."""
    code = "import ding, dizoo, os; print(os.path.dirname(dizoo.__file__))"
    try:
        done = subprocess.run([str(ding_python), "-c", code], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return Path(done.stdout.strip()) if done.returncode == 0 else None


def ding_env_steps(ding_python: Path, run_dir: Path) -> int | None:
    """The collector's env steps at the end of a DI-engine serial run, from the ``result.pkl`` its pipeline
    writes into ``<exp_name>/`` (None when there is none, e.g. the run was cut off)."""
    found = sorted(run_dir.glob("*/result.pkl"))
    if not found:
        return None
    code = "import pickle, sys; print(pickle.load(open(sys.argv[1], 'rb'))['env_step'])"
    done = subprocess.run([str(ding_python), "-c", code, str(found[0])], capture_output=True, text=True, timeout=120)
    return int(done.stdout.strip()) if done.returncode == 0 and done.stdout.strip().isdigit() else None


def run_ding(ding_venv: Path, config: Path, mode: str, seed: int, timeout: float) -> Run:
    """DI-engine on its file; the serial pipelines end only at stop_value (max steps default to 1e10)."""
    with tempfile.TemporaryDirectory(prefix="bench_ding_") as cwd:
        if mode == "ddp":
            cmd = [str(ding_venv / "bin" / "python"), "-m", "torch.distributed.run", "--standalone"]
            cmd += ["--nproc_per_node", "2", str(config)]
        else:
            cmd = [str(ding_venv / "bin" / "ding"), "-m", mode, "-c", str(config), "-s", str(seed)]
        seconds, done = _timed(cmd, Path(cwd), timeout)
        steps = ding_env_steps(ding_venv / "bin" / "python", Path(cwd)) if done is not None else None
    if done is None:
        return Run(seconds, False, f"timeout after {timeout:g} s")
    if done.returncode != 0:
        return Run(seconds, False, f"exit {done.returncode}: {_first_error(done.stdout + done.stderr)}", steps)
    # DI-engine's evaluator: "Current episode_return: X is greater than stop_value: Y, so your RL agent is converged"
    reached = "than stop_value" in done.stdout + done.stderr
    note = "" if steps is None else f"{steps} env steps"
    return Run(seconds, reached, note if reached else "ended without reaching stop_value", steps)


def run_ours(config: Path, nproc: int, seed: int, timeout: float) -> Run:
    """``ding-dist train FILE`` on the unchanged DI-engine file; reached = stopped by stop_value."""
    with tempfile.TemporaryDirectory(prefix="bench_ours_") as cwd:
        exp = Path(cwd) / "run"
        cmd = [sys.executable, "-m", "ding_dist.entry.cli", "train", str(config), "--seed", str(seed)]
        cmd += ["--exp-dir", str(exp), "--nproc", str(nproc)]
        seconds, done = _timed(cmd, Path(cwd), timeout)
        if done is None:
            return Run(seconds, False, f"timeout after {timeout:g} s")
        if done.returncode != 0:
            return Run(seconds, False, f"exit {done.returncode}: {_first_error(done.stderr)}")
        result = json.loads((exp / "result.json").read_text())
        note = f"{result['env_steps']} env steps, best {result['best_eval_return']:.1f}"
        return Run(seconds, result["stopped_by"] == "stop_value", note, int(result["env_steps"]))


def _median(runs: list[Run]) -> float | None:
    good = [r.seconds for r in runs if r.reached]
    return statistics.median(good) if len(good) == len(runs) and good else None


def _median_steps(runs: list[Run]) -> int | None:
    steps = [r.env_steps for r in runs if r.reached and r.env_steps is not None]
    return int(statistics.median(steps)) if len(steps) == len(runs) and steps else None


def _cell(r: Run) -> str:
    steps = "" if r.env_steps is None else f", {r.env_steps} st"
    return f"{r.seconds:.1f} s{steps}" + ("" if r.reached else " (no stop)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ding-venv", type=Path, default=Path(".venvs/di-engine"), help="venv holding di-engine")
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated seeds (median over them)")
    parser.add_argument("--configs", default=",".join(DEFAULT_CONFIGS), help=f"any of {','.join(CONFIGS)} (or 'all')")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per run (then: no stop)")
    parser.add_argument("--ours-first", action="store_true", help="run ding-dist before DI-engine in each pair")
    parser.add_argument("--json", type=Path, default=None, help="also write every run here (after each pair)")
    args = parser.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    names = list(CONFIGS) if args.configs == "all" else [n.strip() for n in args.configs.split(",") if n.strip()]
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        parser.error(f"unknown config(s) {unknown}; choose from {list(CONFIGS)}")

    zoo = dizoo_dir(args.ding_venv / "bin" / "python")
    if zoo is None:
        print(
            f"bench_vs_ding: DI-engine is not installed in {args.ding_venv} (import ding, dizoo failed): nothing "
            "measured. Install it with: python -m venv .venvs/di-engine && .venvs/di-engine/bin/pip install "
            "torch==2.13.0 && .venvs/di-engine/bin/pip install di-engine",
            file=sys.stderr,
        )
        return 2
    if shutil.which(str(args.ding_venv / "bin" / "ding")) is None:
        print(f"bench_vs_ding: {args.ding_venv}/bin/ding (DI-engine's CLI) is missing", file=sys.stderr)
        return 2

    files = {name: zoo / CONFIGS[name][0] for name in names}
    for name in [n for n in names if not files[n].is_file()]:
        print(f"{name:<18} DI-engine's file {files[name]} is not in the installed dizoo; skipped")
        names.remove(name)
    runs: dict[str, tuple[list[Run], list[Run]]] = {name: ([], []) for name in names}
    print(f"{'config':<18} {'seed':>4} {'DI-engine':>28} {'ding-dist':>28} {'ratio':>6}", flush=True)
    # Seed-major, so that every config has seed 0 before any has seed 1 (a cut-short run still covers them all);
    # the two systems alternate, so a change in the machine's load falls on both.
    for seed in seeds:
        for name in names:
            _, mode, nproc = CONFIGS[name]
            if args.ours_first:
                o = run_ours(files[name], nproc, seed, args.timeout)
                d = run_ding(args.ding_venv, files[name], mode, seed, args.timeout)
            else:
                d = run_ding(args.ding_venv, files[name], mode, seed, args.timeout)
                o = run_ours(files[name], nproc, seed, args.timeout)
            runs[name][0].append(d)
            runs[name][1].append(o)
            ratio = f"{o.seconds / d.seconds:.2f}" if d.reached and o.reached else "-"
            print(f"{name:<18} {seed:>4} {_cell(d):>28} {_cell(o):>28} {ratio:>6}", flush=True)
            for who, r in (("DI-engine", d), ("ding-dist", o)):
                if r.note:
                    print(f"{'':<24}{who}: {r.note}", flush=True)
            if args.json is not None:
                args.json.write_text(json.dumps(_report(runs, files, seeds), indent=2))
    for name in names:
        ding_runs, our_runs = runs[name]
        md, mo = _median(ding_runs), _median(our_runs)
        summary = f"median {md:.1f} s vs {mo:.1f} s: ratio {mo / md:.2f}" if md and mo else "no ratio"
        if md is None and mo is not None:
            summary = f"DI-engine did not reach stop_value on every seed; ding-dist median {mo:.1f} s"
        sd, so = _median_steps(ding_runs), _median_steps(our_runs)
        if sd and so:
            summary += f"; median env steps {sd} vs {so}"
        print(f"{name:<18} {summary} ({len(our_runs)} seed(s))")
    if args.json is not None:
        args.json.write_text(json.dumps(_report(runs, files, seeds), indent=2))
    return 0


def _report(runs: dict[str, tuple[list[Run], list[Run]]], files: dict[str, Path], seeds: list[int]) -> dict:
    return {
        name: {
            "file": str(files[name]),
            "seeds": seeds[: len(ding_runs)],
            "ding": [asdict(r) for r in ding_runs],
            "ours": [asdict(r) for r in our_runs],
            "median_ding_s": _median(ding_runs),
            "median_ours_s": _median(our_runs),
            "median_ding_env_steps": _median_steps(ding_runs),
            "median_ours_env_steps": _median_steps(our_runs),
        }
        for name, (ding_runs, our_runs) in runs.items()
    }


if __name__ == "__main__":
    sys.exit(main())
