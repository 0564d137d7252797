"""Rollout wall time with a straggler, with and without DD-PPO's preemption (``policy.collect.preempt``).

Two gloo ranks on this machine each run the data-parallel loop's collection of one PPO rollout: a
:class:`~ding_dist.worker.Collector` stepping 4 CartPole envs for ``--steps`` vector steps with a PPO
policy, then the allreduce of the ranks' rollout lengths (what the loop does under preemption; without it
the same allreduce stands for the first collective of the update, where the fast rank waits). Every
vector step sleeps ``--cost-ms`` (a simulated env cost, sleeping so the shared CPU's load does not change
it); rank 1 then sleeps again as long as its whole vector step took (policy, env and that cost, measured
from the previous step's return), so it is 2x slower per env step. The timed span is from a barrier
to the end of the allreduce, on rank 0, i.e. how long the world waits for a rollout. Each round times
``--rollouts`` rollouts of each variant (interleaved, alternating which goes first); the figure is the
median over ``--rounds`` rounds of each round's median; preemption uses ``preempt_fraction=0.5`` (on 2
ranks: once one rank finished) and ``preempt_min_share=0.25``.

    python benchmarks/bench_preemption.py --json /tmp/preemption.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import numpy as np
import torch

from ding_dist import comm
from ding_dist.envs import env_seeds, make_vec_env
from ding_dist.policy.ppo import PPOPolicy
from ding_dist.worker import Collector
from ding_dist.worker.collector import RolloutPreemption


class _SlowStep:
    """A vector env's ``step`` that first sleeps ``ms`` milliseconds; with ``straggle``, it then sleeps
    again as long as the whole vector step took since the previous ``step`` returned (2x slower)."""

    def __init__(self, step: Any, ms: float, straggle: bool) -> None:
        self.step, self.seconds, self.straggle = step, ms / 1000, straggle
        self.returned: float | None = None

    def __call__(self, action: np.ndarray) -> Any:
        start = time.perf_counter()
        time.sleep(self.seconds)
        out = self.step(action)
        if self.straggle:
            now = time.perf_counter()
            since = self.returned if self.returned is not None and now - self.returned < 1.0 else start
            time.sleep(now - since)
        self.returned = time.perf_counter()
        return out


def bench_rank(cfg: dict[str, Any]) -> dict[str, Any]:
    """One rank: rounds of timed rollouts with and without preemption; per-rollout times and lengths."""
    rank = comm.get_rank()
    venv = make_vec_env({"id": "CartPole-v1"}, 4)
    venv.step = _SlowStep(venv.step, cfg["cost_ms"], straggle=rank == 1)
    torch.manual_seed(0)
    policy = PPOPolicy(PPOPolicy.default_config(), venv.single_observation_space, venv.single_action_space)
    collector = Collector(venv, policy, env_seeds(0, rank, "collector", venv.num_envs))
    preemption = RolloutPreemption(0.5, 0.25)
    times: dict[str, list[list[float]]] = {"off": [], "preempt": []}
    steps: dict[str, list[int]] = {"off": [], "preempt": []}
    for round_ in range(cfg["rounds"]):
        order = ("off", "preempt") if round_ % 2 == 0 else ("preempt", "off")
        per_round: dict[str, list[float]] = {name: [] for name in order}
        for _ in range(cfg["rollouts"]):
            for name in order:
                comm.barrier()
                start = time.perf_counter()
                rollout = collector.collect(cfg["steps"], 0, preemption if name == "preempt" else None)
                counts = torch.zeros(2, dtype=torch.int64)
                counts[rank] = len(rollout["reward"])
                comm.allreduce(counts, op="sum")
                per_round[name].append(time.perf_counter() - start)
                steps[name].append(int(counts[1]))
        for name in order:
            times[name].append(per_round[name])
    venv.close()
    return {"times": times, "slow_rank_steps": steps}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=64, help="vector steps per rollout (T)")
    parser.add_argument("--cost-ms", type=float, default=2.0, help="simulated env cost per vector step (sleep)")
    parser.add_argument("--rollouts", type=int, default=5, help="rollouts of each variant per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", help="write the raw figures here")
    args = parser.parse_args(argv)
    cfg = {"steps": args.steps, "cost_ms": args.cost_ms, "rollouts": args.rollouts, "rounds": args.rounds}
    result = comm.launch(bench_rank, 2, cfg, timeout=1800)[0]
    med = {n: statistics.median(statistics.median(r) for r in rounds) for n, rounds in result["times"].items()}
    share = {n: statistics.median(s) / args.steps for n, s in result["slow_rank_steps"].items()}
    print(f"T={args.steps} vector steps x 4 envs; env cost {args.cost_ms} ms per vector step; rank 1 2x slower")
    rate = {n: (1 + share[n]) / med[n] for n in med}  # both ranks' vector steps per second, in units of T
    for name in ("off", "preempt"):
        print(
            f"{name:8s} rollout {1000 * med[name]:7.1f} ms  ratio to off {med[name] / med['off']:.2f}  "
            f"slow rank's share of T {share[name]:.2f}  env steps/s ratio to off {rate[name] / rate['off']:.2f}"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"config": cfg, "median_s": med, "slow_rank_share": share, "rate": rate, **result}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
