"""SQN's twin Q-networks as one ensemble beside the same two networks kept apart: one training step each.

A step is what SQN's update does to its two Q-networks: both forward on a batch, the sum of their squared errors to
a target, backward, one fused Adam step. ``ensemble`` is :class:`ding_dist.policy.sqn.TwinQNetwork` (vector
observations: one batched matmul per layer for both networks); ``separate`` is two
:class:`~ding_dist.policy.networks.AtomQNetwork` of the same shape, drawn the same way, under one optimizer. The two
sides run interleaved (a round times each once, in turn) on one torch thread; printed per size: the median time of a
step over the rounds and the ratio ensemble / separate.

Run::

    python benchmarks/bench_twin_q.py                 # 3 sizes, 9 rounds of 300 steps
    python benchmarks/bench_twin_q.py --rounds 5 --steps 200
"""

from __future__ import annotations

import argparse
import statistics
import time

import gymnasium as gym
import torch
from torch import nn

from ding_dist.policy.networks import AtomQNetwork
from ding_dist.policy.sqn import TwinQNetwork

#: (observation size, actions, hidden sizes, batch)
SIZES = [(4, 2, [64, 64], 64), (8, 4, [128, 128], 128), (17, 6, [256, 256], 256)]


class _Separate(nn.Module):
    def __init__(self, space: gym.Space, n_actions: int, hidden: list[int]) -> None:
        super().__init__()
        self.q1 = AtomQNetwork(space, n_actions, 1, hidden, dueling=True)
        self.q2 = AtomQNetwork(space, n_actions, 1, hidden, dueling=True)

    def forward(self, obs: torch.Tensor, full: bool = False):
        return (self.q1(obs), self.q2(obs)) if full else self.q1(obs)


def _step_fn(net: nn.Module, obs: torch.Tensor, target: torch.Tensor):
    opt = torch.optim.Adam(net.parameters(), lr=1e-3, fused=True)

    def step() -> None:
        q1, q2 = net(obs, full=True)
        loss = (q1 - target).pow(2).mean() + (q2 - target).pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args()
    if args.rounds < 1 or args.steps < 1:
        raise SystemExit("bench_twin_q.py: --rounds and --steps must be >= 1")
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, 1 thread, {args.rounds} rounds of {args.steps} steps; ms per step (median)")
    print(f"{'observation, actions, hidden, batch':<40} {'separate':>9} {'ensemble':>9} {'ratio':>6}")
    for dim, n_actions, hidden, batch in SIZES:
        space = gym.spaces.Box(-1.0, 1.0, (dim,))
        torch.manual_seed(0)
        sides = {"separate": _Separate(space, n_actions, hidden)}
        torch.manual_seed(0)
        sides["ensemble"] = TwinQNetwork(space, n_actions, hidden, dueling=True)
        g = torch.Generator().manual_seed(0)
        obs, target = torch.randn(batch, dim, generator=g), torch.randn(batch, n_actions, generator=g)
        steps = {name: _step_fn(net, obs, target) for name, net in sides.items()}
        times: dict[str, list[float]] = {name: [] for name in sides}
        for fn in steps.values():  # warm-up
            for _ in range(20):
                fn()
        for r in range(args.rounds):
            for name in list(steps) if r % 2 == 0 else list(reversed(steps)):
                start = time.perf_counter()
                for _ in range(args.steps):
                    steps[name]()
                times[name].append((time.perf_counter() - start) / args.steps * 1e3)
        sep, ens = statistics.median(times["separate"]), statistics.median(times["ensemble"])
        label = f"{dim}, {n_actions}, {hidden}, {batch}"
        print(f"{label:<40} {sep:>9.3f} {ens:>9.3f} {ens / sep:>6.2f}")


if __name__ == "__main__":
    main()
