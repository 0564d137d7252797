"""Double-buffered sampling: the collector's env steps per second with ``env.sample_groups`` 1 vs 2 (or more).

The collector alone (no learner, no evaluation): a config's training envs (its env manager; ``--manager`` overrides)
and its policy, freshly initialised, collecting ``--steps`` vector steps per rollout. Per group count, ``--rollouts``
timed rollouts after one untimed one; the variants alternate over ``--repeats`` rounds, and the figure is the median
env steps per second of the rounds. Prints one line per variant and the ratio of each to the first.

Run:  python benchmarks/bench_sampling.py [--config configs/pong_ppo_config.py] [--groups 1,2] [--envs 8]
      [--manager async] [--steps 64] [--rollouts 3] [--repeats 2] [--threads 1] [--set KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ding_dist.config import load_config  # noqa: E402
from ding_dist.entry.factories import build_policy, env_manager  # noqa: E402
from ding_dist.envs import env_seeds, make_vec_env  # noqa: E402
from ding_dist.worker import Collector  # noqa: E402


def steps_per_second(args: argparse.Namespace, groups: int) -> float:
    """Env steps per second of ``args.rollouts`` rollouts of one collector with ``groups`` sample groups."""
    cfg = load_config(
        args.config, seed=0, overrides=[f"env.sample_groups={groups}", f"env.collector_env_num={args.envs}", *args.set]
    )
    manager = args.manager or env_manager(cfg)
    venv = make_vec_env(cfg.env, args.envs, manager, training=True)
    policy = build_policy(cfg, venv.single_observation_space, venv.single_action_space, device="cpu")
    collector = Collector(venv, policy, env_seeds(0, 0, "collector", args.envs))
    try:
        assert collector.groups == groups, f"asked for {groups} groups, the collector uses {collector.groups}"
        collector.collect(args.steps, env_step=0)  # warm-up: worker processes, first forward passes
        start = time.perf_counter()
        for i in range(args.rollouts):
            collector.collect(args.steps, env_step=(i + 1) * args.steps * args.envs)
        return args.rollouts * args.steps * args.envs / (time.perf_counter() - start)
    finally:
        collector.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=str(ROOT / "configs" / "pong_ppo_config.py"))
    parser.add_argument("--groups", default="1,2", help="comma-separated env.sample_groups values")
    parser.add_argument("--envs", type=int, default=8)
    parser.add_argument("--manager", default=None, help="env manager (default: the config's)")
    parser.add_argument("--steps", type=int, default=64, help="vector steps per rollout")
    parser.add_argument("--rollouts", type=int, default=3, help="timed rollouts per variant and round")
    parser.add_argument("--repeats", type=int, default=2, help="rounds (the variants alternate)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of the collecting process")
    parser.add_argument("--set", nargs="*", default=[], help="config overrides KEY=VALUE")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    variants = [int(g) for g in args.groups.split(",")]
    figures: dict[int, list[float]] = {g: [] for g in variants}
    for r in range(args.repeats):
        for g in variants if r % 2 == 0 else variants[::-1]:
            figures[g].append(steps_per_second(args, g))
    base = statistics.median(figures[variants[0]])
    sizes = f"{args.steps} vector steps x {args.rollouts} rollouts, {args.repeats} rounds"
    manager = args.manager or "of the config"
    print(f"{Path(args.config).name}, {args.envs} envs, manager {manager}, {args.threads} torch threads, {sizes}")
    for g in variants:
        med = statistics.median(figures[g])
        runs = ", ".join(f"{x:.0f}" for x in figures[g])
        print(f"sample_groups={g}: {med:.0f} env steps/s (rounds: {runs}); ratio to {variants[0]}: {med / base:.2f}")


if __name__ == "__main__":
    main()
