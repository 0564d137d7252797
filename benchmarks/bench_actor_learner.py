"""The actor-learner mode against the data-parallel one: time to solve CartPole, and env steps per second.

Every run is one ``ding-dist train CONFIG --seed S --exp-dir TMP [...]`` process, timed from outside.

- ttt: the whole process's wall time (interpreter start, imports, torchrun and rendezvous for 2 processes,
  training, evaluations, the final checkpoint) until the greedy evaluation reaches 475 on CartPole-v1, with
  1 actor + 1 learner (``--actors 1``) and with one data-parallel process; per policy the median over
  ``--seeds`` and its ratio. An unsolved run (``--max-env-steps``) still enters the median; the report says
  how many solved. The two variants run back to back, in an order that alternates with the seed.
- throughput: env steps per second of training (``result.json``'s env steps / its training wall time) of a
  collection-heavy IMPALA run (one update per 384-step chunk, no evaluation until the end): 2 actors + 1
  learner vs 3 data-parallel processes, median of ``--repeats``.
- step_cost: the same with ``env.step_cost_ms`` of busy work per env step (an env whose steps cost real
  compute): 1 actor vs 2 actors (+ 1 learner), median of ``--repeats``; the ratio is the scaling.
- apex_step_cost: the same for Ape-X (``configs/cartpole_apex_dqn_config.py``: prioritized replay, the epsilon
  ladder, the actors' priorities; no evaluation until the end), ``--apex-steps`` env steps per run (the target:
  2 actors >= 1.8x one).

Every actor-learner figure comes with the largest policy lag the learner saw.

Run:  python benchmarks/bench_actor_learner.py [--parts ttt,throughput,step_cost,apex_step_cost] [--seeds 0,1,2]
      [--policies dqn,ppo,impala] [--repeats 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = {algo: ROOT / "configs" / f"cartpole_{algo}_config.py" for algo in ("dqn", "ppo", "impala", "apex_dqn")}
APEX_FAST = [  # Ape-X as shipped, only the evaluation moved to the end
    "env.stop_value=None",
    "policy.eval.eval_freq=0",
    "policy.other.log_freq=16384",
    "env.n_evaluator_episode=1",
    "env.evaluator_env_num=1",
]
HEAVY = [  # collection-heavy: one IMPALA update per chunk, no evaluation before the end
    "policy.learn.epoch_per_collect=1",
    "policy.collect.n_sample=384",  # divides over 3 data-parallel processes x 8 envs
    "policy.learn.batch_size=384",
    "env.stop_value=None",
    "policy.eval.eval_freq=0",
    "policy.other.log_freq=16384",
    "env.n_evaluator_episode=1",
    "env.evaluator_env_num=1",
]


def run(config: Path, seed: int, args: list[str], max_env_steps: int, overrides: list[str] = ()) -> dict:
    """One ``ding-dist train`` process; its wall time and its result.json."""
    exp = Path(tempfile.mkdtemp(prefix="bench_al_")) / "run"
    cmd = [sys.executable, "-m", "ding_dist.entry.cli", "train", str(config), "--seed", str(seed), "--exp-dir",
           str(exp), "--max-env-steps", str(max_env_steps), *args]  # fmt: skip
    if overrides:
        cmd += ["--set", *overrides]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    result = json.loads((exp / "result.json").read_text())
    shutil.rmtree(exp.parent, ignore_errors=True)
    al = result.get("actor_learner") or {}
    return {
        "process_wall_s": wall,
        "train_wall_s": result["wall_time_s"],
        "env_steps": result["env_steps"],
        "solved": result["stopped_by"] == "stop_value",
        "fps": result["env_steps"] / result["wall_time_s"],
        "lag_max": al.get("lag_max"),
        "dropped": al.get("dropped_chunks"),
    }


def bench_ttt(policies: list[str], seeds: list[int], max_env_steps: int) -> dict:
    variants = {"dp_1process": [], "al_1actor_1learner": ["--actors", "1"]}
    out = {}
    for algo in policies:
        runs: dict[str, list[dict]] = {v: [] for v in variants}
        for i, seed in enumerate(seeds):
            order = list(variants) if i % 2 == 0 else list(reversed(variants))
            for name in order:
                runs[name].append(run(CONFIGS[algo], seed, variants[name], max_env_steps))
                r = runs[name][-1]
                print(f"ttt {algo} {name} seed {seed}: {r['process_wall_s']:.1f} s, {r['env_steps']} env steps, "
                      f"solved {r['solved']}, lag max {r['lag_max']}", flush=True)  # fmt: skip
        med = {v: statistics.median(r["process_wall_s"] for r in runs[v]) for v in variants}
        loop = {v: statistics.median(r["train_wall_s"] for r in runs[v]) for v in variants}
        out[algo] = {
            "median_process_wall_s": med,
            "ratio_al_over_dp": med["al_1actor_1learner"] / med["dp_1process"],
            "median_train_loop_s": loop,  # the training loop alone (result.json's wall_time_s), for reference
            "loop_ratio_al_over_dp": loop["al_1actor_1learner"] / loop["dp_1process"],
            "median_env_steps": {v: statistics.median(r["env_steps"] for r in runs[v]) for v in variants},
            "solved": {v: sum(r["solved"] for r in runs[v]) for v in variants},
            "lag_max": max(r["lag_max"] for r in runs["al_1actor_1learner"]),
            "runs": runs,
        }
    return out


def _fps_pair(
    a: tuple[str, list[str]],
    b: tuple[str, list[str]],
    repeats: int,
    steps: int,
    extra: list[str],
    config: str = "impala",
    base: list[str] = HEAVY,
):
    runs: dict[str, list[dict]] = {a[0]: [], b[0]: []}
    for i in range(repeats):
        for name, args in (a, b) if i % 2 == 0 else (b, a):
            runs[name].append(run(CONFIGS[config], i, args, steps, base + extra))
            r = runs[name][-1]
            print(f"{name} repeat {i}: {r['fps']:.0f} env steps/s, lag max {r['lag_max']}", flush=True)
    med = {n: statistics.median(r["fps"] for r in v) for n, v in runs.items()}
    lag = max((r["lag_max"] for v in runs.values() for r in v if r["lag_max"] is not None), default=None)
    return {"median_fps": med, "ratio": med[b[0]] / med[a[0]], "lag_max": lag, "runs": runs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", default="ttt,throughput,step_cost")
    parser.add_argument("--policies", default="dqn,ppo,impala")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-env-steps", type=int, default=100_000)
    parser.add_argument("--throughput-steps", type=int, default=200_000)
    parser.add_argument("--step-cost-ms", type=float, default=1.0)
    parser.add_argument("--step-cost-steps", type=int, default=24_576)
    parser.add_argument("--apex-steps", type=int, default=8192)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    parts = args.parts.split(",")
    report: dict = {"load_before": os.getloadavg()}
    if "ttt" in parts:
        seeds = [int(s) for s in args.seeds.split(",")]
        report["ttt"] = bench_ttt(args.policies.split(","), seeds, args.max_env_steps)
    if "throughput" in parts:
        dp, al = ("dp_3processes", ["--nproc", "3"]), ("al_2actors_1learner", ["--actors", "2"])
        report["throughput"] = _fps_pair(dp, al, args.repeats, args.throughput_steps, [])
    if "step_cost" in parts:
        one, two = ("al_1actor", ["--actors", "1"]), ("al_2actors", ["--actors", "2"])
        extra = [f"env.step_cost_ms={args.step_cost_ms}"]
        report["step_cost"] = _fps_pair(one, two, args.repeats, args.step_cost_steps, extra)
    if "apex_step_cost" in parts:
        one, two = ("apex_1actor", ["--actors", "1"]), ("apex_2actors", ["--actors", "2"])
        extra = [f"env.step_cost_ms={args.step_cost_ms}"]
        report["apex_step_cost"] = _fps_pair(one, two, args.repeats, args.apex_steps, extra, "apex_dqn", APEX_FAST)
    report["load_after"] = os.getloadavg()

    print(f"\nload average before {report['load_before']}, after {report['load_after']}")
    for algo, r in report.get("ttt", {}).items():
        m = r["median_process_wall_s"]
        print(f"time to 475, {algo}: 1 process {m['dp_1process']:.1f} s, 1 actor + 1 learner "
              f"{m['al_1actor_1learner']:.1f} s, ratio {r['ratio_al_over_dp']:.2f} (training loop alone "
              f"{r['loop_ratio_al_over_dp']:.2f}); solved {r['solved']}; "
              f"median env steps {r['median_env_steps']}; lag max {r['lag_max']}")  # fmt: skip
    for part in ("throughput", "step_cost", "apex_step_cost"):
        if part in report:
            r = report[part]
            figures = ", ".join(f"{k} {v:.0f}" for k, v in r["median_fps"].items())
            print(f"{part}: env steps/s {figures}, ratio {r['ratio']:.2f}, lag max {r['lag_max']}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
