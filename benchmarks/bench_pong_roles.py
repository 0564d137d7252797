"""Pong with one process and with 1 actor + 1 learner, side by side with Sample Factory 2.1.1.

Every run is one whole process timed from outside (interpreter start, imports, launch, training, the final
evaluation and checkpoint): ``ding-dist train CONFIG --seed 0 --exp-dir TMP --max-env-steps N [...]``, or
Sample Factory's documented Atari example (APPO, ``sf_examples.atari.train_atari``) from its own virtual
environment (``--sf-python``, default ``.venvs/sample-factory/bin/python``; torch 2.13.0, sample-factory 2.1.1,
ale-py 0.9.1, opencv-python, gymnasium < 1.0), through a launcher that imports ``ale_py`` first (ale-py
registers its ids only when imported). Rows are interleaved (row 1, row 2, ..., then again) and the median
of ``--repeats`` is reported. Both sides do the same work per update: 8 envs x 128 steps, 4 epochs x 4
minibatches of 256, the Nature CNN (1.69M parameters); Sample Factory counts frames (frameskip 4) and
overshoots its target a little, so its agent steps are its last checkpoint's frames / 4.

Parts (``--parts``, comma-separated):

- ``pong``: agent steps/s (env steps / whole-process seconds) and the CPU busy % of the machine
  (``/proc/stat``) and of the run's processes (their CPU seconds / wall / cores) for: PPO 1 process,
  PPO 1 actor + 1 learner, IMPALA 1 process and 1 + 1 (configs/pong_{ppo,impala}_config.py), Sample Factory
  synchronous defaults and ``--async_rl`` (2 workers x 4 envs, 2 splits); ratios to PPO 1 process and to
  Sample Factory async; the learner's and the actor's idle fractions (``idle/learner``, ``idle/actor``, the
  mean of the run's log records).
- ``cartpole``: CartPole IMPALA (configs/cartpole_impala_config.py), 1 actor + 1 learner vs 1 process:
  whole-process seconds to a greedy evaluation of 475 (``--cartpole-seeds``; unsolved runs count with the
  time they took, the report says how many solved); the ratio of the medians.
- ``step_cost``: ``env.step_cost_ms=1`` (an env whose steps cost real compute), collection-heavy IMPALA on
  CartPole: 2 actors + 1 learner vs 3 data-parallel processes, env steps/s of training (result.json) and of
  the whole process, with the idle fractions.

- ``inference``: batched inference (``actor_learner.inference=1``, one more process that acts for every actor)
  against actors that act themselves: CartPole IMPALA with 2 actors + 1 learner (4 processes vs 3) and Pong
  IMPALA with 1 actor + 1 learner (3 vs 2); env steps/s of the whole process and the inference rank's rows per
  forward pass (from its log line's result, ``rows_per_batch``).

``--quick``: a few seconds of steps per row, one repeat (shows every row runs; not a measurement).

Run (a quiet machine; the full run takes about an hour on 2 cores):
    python benchmarks/bench_pong_roles.py [--parts pong,cartpole,step_cost,inference] [--repeats 3] [--json out.json]
    python benchmarks/bench_pong_roles.py --quick
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "configs"
SF_PYTHON = str(ROOT / ".venvs" / "sample-factory" / "bin" / "python")  # a venv holding Sample Factory
# ale-py registers its gymnasium ids only when imported; Sample Factory's workers are spawned and import this too.
SF_LAUNCHER = """import ale_py  # noqa: F401  (registers the ALE/ ids)
import sys

from sf_examples.atari.train_atari import main

if __name__ == "__main__":
    sys.exit(main())
"""
SF_SYNC = ["--num_workers=8", "--num_envs_per_worker=1"]
SF_ASYNC = ["--num_workers=2", "--num_envs_per_worker=4", "--worker_num_splits=2", "--async_rl=True"]
# collection-heavy: one IMPALA update per chunk, no evaluation before the end (benchmarks/bench_actor_learner.py)
HEAVY = [
    "policy.learn.epoch_per_collect=1",
    "env.collector_env_num=6",  # 3 data-parallel processes x 2 envs; each actor of one learner steps all 6
    "policy.collect.n_sample=384",
    "policy.learn.batch_size=384",
    "env.stop_value=None",
    "policy.eval.eval_freq=0",
    "policy.other.log_freq=3072",
    "env.n_evaluator_episode=1",
    "env.evaluator_env_num=1",
    "env.step_cost_ms=1",
]


def _cpu_times() -> tuple[float, float]:
    """(busy, total) jiffies of the whole machine since boot (``/proc/stat``; zeros where there is none)."""
    try:
        fields = [float(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    except OSError:
        return 0.0, 0.0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def _children_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(cmd: list[str], env: dict[str, str] | None = None, cwd: Path = ROOT, timeout: float = 3600) -> dict:
    """Run ``cmd`` to its end: wall seconds, the machine's CPU busy %, its processes' CPU busy %, its output."""
    busy0, total0 = _cpu_times()
    cpu0, start = _children_cpu_s(), time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - start
    busy1, total1 = _cpu_times()
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    cores = os.cpu_count() or 1
    return {
        "wall_s": wall,
        "machine_busy": (busy1 - busy0) / (total1 - total0) if total1 > total0 else float("nan"),
        "procs_busy": (_children_cpu_s() - cpu0) / (wall * cores),
        "stdout": done.stdout,
        "stderr": done.stderr,
    }


def _idle(exp: Path) -> dict:
    """Mean ``idle/learner``, ``idle/actor`` and the waits over a run's log records (absent for one process)."""
    path = exp / "tb" / "metrics.jsonl"
    keys = ("idle/learner", "idle/actor", "wait/data_s", "wait/learner_s")
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    return {k: statistics.mean(r[k] for r in records if k in r) for k in keys if any(k in r for r in records)}


def ding_run(config: Path, max_env_steps: int, args: list[str] = (), overrides: list[str] = (), seed: int = 0) -> dict:
    """One ``ding-dist train`` process (OMP_NUM_THREADS as the caller's environment has it)."""
    exp = Path(tempfile.mkdtemp(prefix="bench_pong_")) / "run"
    cmd = [sys.executable, "-m", "ding_dist.entry.cli", "train", str(config), "--seed", str(seed), "--exp-dir",
           str(exp), "--max-env-steps", str(max_env_steps), *args]  # fmt: skip
    if overrides:
        cmd += ["--set", *overrides]
    try:
        out = timed(cmd, env=dict(os.environ))
        result = json.loads((exp / "result.json").read_text())
        al = result.get("actor_learner") or {}
        served = json.loads((exp / "inference.json").read_text()) if (exp / "inference.json").exists() else {}
        return {
            "wall_s": out["wall_s"],
            "env_steps": result["env_steps"],
            "steps_per_s": result["env_steps"] / out["wall_s"],
            "train_steps_per_s": result["env_steps"] / result["wall_time_s"],
            "machine_busy": out["machine_busy"],
            "procs_busy": out["procs_busy"],
            "solved": result["stopped_by"] == "stop_value",
            "lag_max": al.get("lag_max"),
            "rows_per_batch": served.get("rows_per_batch"),
            **_idle(exp),
        }
    finally:
        shutil.rmtree(exp.parent, ignore_errors=True)


def sf_run(sf_python: str, agent_steps: int, extra: list[str], seed: int = 0) -> dict:
    """One Sample Factory APPO run on Pong (its Atari example's defaults plus ``extra``)."""
    work = Path(tempfile.mkdtemp(prefix="bench_sf_"))
    launcher = work / "sf_pong.py"
    launcher.write_text(SF_LAUNCHER)
    cmd = [sf_python, str(launcher), "--algo=APPO", "--env=atari_pong", "--device=cpu", f"--seed={seed}",
           f"--train_for_env_steps={4 * agent_steps}", "--with_wandb=False", f"--train_dir={work}",
           "--experiment=run", *extra]  # fmt: skip
    try:
        out = timed(cmd, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, cwd=work)
        frames = [int(m.group(1)) for p in work.glob("run/checkpoint_p0/checkpoint_*.pth")
                  if (m := re.search(r"checkpoint_\d+_(\d+)\.pth$", p.name))]  # fmt: skip
        if not frames:
            raise RuntimeError(f"Sample Factory saved no checkpoint:\n{out['stderr'][-3000:]}")
        steps = max(frames) // 4
        return {"wall_s": out["wall_s"], "env_steps": steps, "steps_per_s": steps / out["wall_s"],
                "machine_busy": out["machine_busy"], "procs_busy": out["procs_busy"]}  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _median(runs: list[dict], key: str) -> float | None:
    values = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(values) if values else None


def _fmt(x: float | None, spec: str = ".1f") -> str:
    return "-" if x is None else format(x, spec)


def interleaved(rows: dict, repeats: int) -> dict[str, list[dict]]:
    """Each row's runs, ``repeats`` rounds of every row in turn (a slow phase of the machine hits all)."""
    runs: dict[str, list[dict]] = {name: [] for name in rows}
    for i in range(repeats):
        for name, fn in rows.items():
            print(f"[{i + 1}/{repeats}] {name} ...", file=sys.stderr, flush=True)
            runs[name].append(fn())
            got = runs[name][-1]
            print(f"    {got['env_steps']} steps in {got['wall_s']:.1f} s: {got['steps_per_s']:.1f} steps/s, machine "
                  f"{100 * got['machine_busy']:.0f}% busy", file=sys.stderr, flush=True)  # fmt: skip
    return runs


def bench_pong(args: argparse.Namespace) -> dict:
    steps = args.pong_steps
    pong_set = ["policy.eval.eval_freq=0", "env.n_evaluator_episode=1", "env.evaluator_env_num=1",
                f"policy.other.log_freq={max(1024, steps // 8)}"]  # fmt: skip
    threads = [f"actor_learner.learner_threads={args.learner_threads}"] if args.learner_threads else []
    ppo, impala = CONFIGS / "pong_ppo_config.py", CONFIGS / "pong_impala_config.py"
    rows = {
        "ppo_1_process": lambda: ding_run(ppo, steps, overrides=pong_set),
        "ppo_1_actor_1_learner": lambda: ding_run(ppo, steps, ["--actors", "1"], pong_set + threads),
        "impala_1_process": lambda: ding_run(impala, steps, overrides=pong_set),
        "impala_1_actor_1_learner": lambda: ding_run(impala, steps, ["--actors", "1"], pong_set + threads),
    }
    if not args.no_sf:
        rows["sf_appo_sync"] = lambda: sf_run(args.sf_python, steps, SF_SYNC)
        rows["sf_appo_async"] = lambda: sf_run(args.sf_python, steps, SF_ASYNC)
    runs = interleaved(rows, args.repeats)
    keys = ("steps_per_s", "train_steps_per_s", "machine_busy", "procs_busy", "idle/learner", "idle/actor",
            "wait/data_s", "wait/learner_s", "env_steps", "lag_max")  # fmt: skip
    med = {name: {k: _median(r, k) for k in keys} for name, r in runs.items()}
    base = med["ppo_1_process"]["steps_per_s"]
    sf = med.get("sf_appo_async", {}).get("steps_per_s")
    print(f"\nPong, {steps} agent steps per run, whole process, median of {args.repeats} (interleaved)")
    print("(steps/s: env steps / whole-process seconds; train/s: / training seconds, without start-up and the final"
          " evaluation game that ding-dist plays and Sample Factory does not)")  # fmt: skip
    print(f"{'row':<26} {'steps/s':>8} {'train/s':>8} {'x 1-proc':>8} {'x SF async':>10} {'machine':>8} "
          f"{'procs':>6} {'idle L':>7} {'idle A':>7} {'lag max':>7}")  # fmt: skip
    for name, m in med.items():
        sps = m["steps_per_s"]
        print(f"{name:<26} {_fmt(sps):>8} {_fmt(m['train_steps_per_s']):>8} {_fmt(sps / base, '.2f'):>8} "
              f"{_fmt(sps / sf if sf else None, '.2f'):>10} {_fmt(100 * m['machine_busy'], '.0f'):>7}% "
              f"{_fmt(100 * m['procs_busy'], '.0f'):>5}% {_fmt(m['idle/learner'], '.2f'):>7} "
              f"{_fmt(m['idle/actor'], '.2f'):>7} {_fmt(m['lag_max'], '.0f'):>7}")  # fmt: skip
    return {"steps": steps, "repeats": args.repeats, "median": med, "runs": runs}


def bench_cartpole(args: argparse.Namespace) -> dict:
    config = CONFIGS / "cartpole_impala_config.py"
    variants = {"impala_1_process": [], "impala_1_actor_1_learner": ["--actors", "1"]}
    runs: dict[str, list[dict]] = {v: [] for v in variants}
    for i, seed in enumerate(args.cartpole_seeds):
        order = list(variants) if i % 2 == 0 else list(reversed(variants))
        for v in order:
            print(f"[seed {seed}] cartpole {v} ...", file=sys.stderr, flush=True)
            runs[v].append(ding_run(config, args.cartpole_max_steps, variants[v], seed=seed))
    med = {v: _median(r, "wall_s") for v, r in runs.items()}
    solved = {v: sum(x["solved"] for x in r) for v, r in runs.items()}
    ratio = med["impala_1_actor_1_learner"] / med["impala_1_process"]
    print(f"\nCartPole IMPALA to 475, whole process, median of seeds {args.cartpole_seeds}")
    for v in variants:
        print(f"{v:<26} {med[v]:7.1f} s  solved {solved[v]}/{len(runs[v])}  "
              f"lag max {max((x['lag_max'] or 0) for x in runs[v])}")  # fmt: skip
    print(f"1 + 1 / 1 process: {ratio:.2f}x the wall time")
    return {"median_wall_s": med, "solved": solved, "ratio": ratio, "runs": runs}


def bench_step_cost(args: argparse.Namespace) -> dict:
    config = CONFIGS / "cartpole_impala_config.py"
    steps = args.step_cost_steps
    rows = {
        "dp_3_processes": lambda: ding_run(config, steps, ["--nproc", "3"], HEAVY),
        "al_2_actors_1_learner": lambda: ding_run(config, steps, ["--actors", "2"], HEAVY),
    }
    runs = interleaved(rows, args.repeats)
    keys = ("train_steps_per_s", "steps_per_s", "idle/learner", "idle/actor", "machine_busy")
    med = {name: {k: _median(r, k) for k in keys} for name, r in runs.items()}
    dp, al = med["dp_3_processes"], med["al_2_actors_1_learner"]
    print(f"\nenv.step_cost_ms=1, collection-heavy IMPALA on CartPole, {steps} env steps, median of {args.repeats}")
    for name, m in med.items():
        print(f"{name:<26} train {_fmt(m['train_steps_per_s'], '.0f'):>6} env steps/s, whole process "
              f"{_fmt(m['steps_per_s'], '.0f'):>6}, idle L {_fmt(m['idle/learner'], '.2f')}, "
              f"idle A {_fmt(m['idle/actor'], '.2f')}, machine {_fmt(100 * m['machine_busy'], '.0f')}%")  # fmt: skip
    print(f"2 actors + 1 learner / 3 processes: {al['train_steps_per_s'] / dp['train_steps_per_s']:.2f}x (training), "
          f"{al['steps_per_s'] / dp['steps_per_s']:.2f}x (whole process)")  # fmt: skip
    return {"steps": steps, "median": med, "runs": runs}


def bench_inference(args: argparse.Namespace) -> dict:
    cartpole, pong = CONFIGS / "cartpole_impala_config.py", CONFIGS / "pong_impala_config.py"
    quiet = ["policy.eval.eval_freq=0", "env.n_evaluator_episode=1", "env.evaluator_env_num=1"]
    on = ["actor_learner.inference=1"]
    cp_steps, pong_steps = args.inference_cartpole_steps, args.inference_pong_steps
    rows = {
        "cartpole_2_actors": lambda: ding_run(cartpole, cp_steps, ["--actors", "2"], quiet),
        "cartpole_2_actors_inference": lambda: ding_run(cartpole, cp_steps, ["--actors", "2"], quiet + on),
        "pong_1_actor": lambda: ding_run(pong, pong_steps, ["--actors", "1"], quiet),
        "pong_1_actor_inference": lambda: ding_run(pong, pong_steps, ["--actors", "1"], quiet + on),
    }
    runs = interleaved(rows, args.repeats)
    keys = ("steps_per_s", "train_steps_per_s", "machine_busy", "idle/learner", "idle/actor", "rows_per_batch")
    med = {name: {k: _median(r, k) for k in keys} for name, r in runs.items()}
    print(f"\nBatched inference (actor_learner.inference=1), whole process, median of {args.repeats} (interleaved)")
    for name, m in med.items():
        base = med[name.removesuffix("_inference")]["steps_per_s"]
        print(f"{name:<30} {_fmt(m['steps_per_s']):>8} steps/s  train {_fmt(m['train_steps_per_s']):>8}/s  "
              f"x without {_fmt(m['steps_per_s'] / base, '.2f'):>5}  idle L {_fmt(m['idle/learner'], '.2f')}  "
              f"idle A {_fmt(m['idle/actor'], '.2f')}  machine {_fmt(100 * m['machine_busy'], '.0f')}%  "
              f"rows/forward {_fmt(m['rows_per_batch'])}")  # fmt: skip
    return {"cartpole_steps": cp_steps, "pong_steps": pong_steps, "median": med, "runs": runs}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--parts", default="pong,cartpole,step_cost")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--pong-steps", type=int, default=8192, help="agent steps of each Pong run")
    p.add_argument("--cartpole-seeds", default="0,1,2")
    p.add_argument("--cartpole-max-steps", type=int, default=60_000)
    p.add_argument("--step-cost-steps", type=int, default=24_576)
    p.add_argument("--inference-cartpole-steps", type=int, default=20_480)
    p.add_argument("--inference-pong-steps", type=int, default=4096)
    p.add_argument(
        "--learner-threads",
        type=int,
        default=None,
        help="actor_learner.learner_threads of the Pong 1 + 1 rows (default: the config's, auto)",
    )
    p.add_argument("--sf-python", default=SF_PYTHON, help="python of Sample Factory's virtual environment")
    p.add_argument("--no-sf", action="store_true", help="leave Sample Factory out")
    p.add_argument("--quick", action="store_true", help="a few seconds of steps per row, one repeat (a smoke run)")
    p.add_argument("--json", default=None, help="write every run's figures here")
    args = p.parse_args(argv)
    args.cartpole_seeds = [int(s) for s in str(args.cartpole_seeds).split(",")]
    if args.quick:
        args.repeats, args.pong_steps, args.step_cost_steps = 1, 2048, 1536
        args.inference_cartpole_steps, args.inference_pong_steps = 2048, 1024
        args.cartpole_seeds, args.cartpole_max_steps = [0], 2048
    out = {}
    parts = {"pong": bench_pong, "cartpole": bench_cartpole, "step_cost": bench_step_cost, "inference": bench_inference}
    for part in args.parts.split(","):
        out[part] = parts[part](args)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
