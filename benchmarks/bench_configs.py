"""Every shipped config, one ``ding-dist train`` process each: what it reaches and how long it takes here.

Classic control (CartPole, Acrobot, Pendulum) trains to the config's own ``env.stop_value`` (capped at
``--cap`` env steps); Atari and MuJoCo configs need hours to days on a CPU, so they run ``--short`` env steps
and report env steps/s (the learning curves of longer runs are in docs/results/learning_parity.md). Each figure
is the wall time of the whole ``ding-dist train`` process, as a user waits, the median over ``--seeds``.

Run:  python benchmarks/bench_configs.py [--seeds 0,1,2] [--only cartpole_ppo,acrobot_dqn] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_time_to_solve import cli  # noqa: E402

SHIPPED = sorted(p.name.removesuffix("_config.py") for p in (ROOT / "configs").glob("*_config.py"))
TO_THRESHOLD = ("cartpole_dqn", "cartpole_ppo", "cartpole_impala", "acrobot_dqn", "pendulum_sac")


def run_once(name: str, seed: int, steps: int | None, cap: int, folder: Path) -> dict:
    exp = folder / f"{name}_s{seed}"
    argv = [*cli(), "train", name, "--seed", str(seed), "--exp-dir", str(exp), "--max-env-steps", str(steps or cap)]
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{name} seed {seed} failed:\n{done.stderr[-2000:]}")
    result = json.loads((exp / "result.json").read_text())
    return {"wall_s": wall, "env_steps": result["env_steps"], "stopped_by": result["stopped_by"],
            "best": result["best_eval_return"], "steps_per_s": result["env_steps"] / wall}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--only", default=",".join(SHIPPED))
    parser.add_argument("--cap", type=int, default=200_000, help="most env steps of a run to a threshold")
    parser.add_argument("--short", type=int, default=4096, help="env steps of an Atari or MuJoCo run")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    rows = {}
    with tempfile.TemporaryDirectory(prefix="bench_configs_") as tmp:
        for name in args.only.split(","):
            steps = None if name in TO_THRESHOLD else args.short
            runs = [run_once(name, s, steps, args.cap, Path(tmp)) for s in seeds]
            solved = sum(r["stopped_by"] == "stop_value" for r in runs)
            rows[name] = {"runs": runs, "solved": solved, "wall_s": statistics.median(r["wall_s"] for r in runs),
                          "env_steps": statistics.median(r["env_steps"] for r in runs),
                          "steps_per_s": statistics.median(r["steps_per_s"] for r in runs)}  # fmt: skip
            r = rows[name]
            what = f"{solved}/{len(runs)} reached stop_value" if steps is None else f"{steps} env steps"
            print(f"{name:18s} {what:24s} median {r['env_steps']:>8.0f} env steps, {r['wall_s']:7.1f} s whole "
                  f"process, {r['steps_per_s']:7.0f} env steps/s", flush=True)  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
