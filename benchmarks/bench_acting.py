"""Per-step costs of off-policy collection: epsilon-greedy acting and n-step replay sampling, beside plain references.

- **acting**: the ``breakout_dqn`` row's DQN (MinAtar Breakout, one env, the MinAtar CNN) choosing one action with
  :meth:`~ding_dist.policy.q_learning.QLearningPolicy.collect_action` at epsilon 1, 0.5 and 0.1, beside the plain
  way: the same method with the network always run before the coins pick random or greedy actions. Ours draws the
  coins first and skips the network when every env explores, so the two differ most at high epsilon.
- **sampling**: a :class:`~ding_dist.data.replay.ReplayBuffer` of 8 env slots (4,000 rows of random MinAtar-sized
  transitions, 2 % terminations, 1 % truncations) summing the n-step returns of 32 drawn transitions, with
  ``n_step`` 1 and 3, beside the plain per-step loop over the n steps written in this file (its results are checked
  to be the same, bit for bit).

One torch thread. The variants run interleaved (a round times each once, every other round in reverse order); the
figures are medians over the rounds in microseconds per call, with ours over the reference.

Run:  python benchmarks/bench_acting.py [--rounds 9]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

import bench_parity  # noqa: E402
import bench_updates  # noqa: E402

from ding_dist.data.replay import ReplayBuffer  # noqa: E402
from ding_dist.policy.dqn import DQNPolicy  # noqa: E402
from ding_dist.policy.encoders import obs_tensor  # noqa: E402


def acting_pairs() -> list[tuple[str, Callable[[], object], Callable[[], object]]]:
    policy = DQNPolicy(
        bench_updates._policy_cfg(bench_parity.all_rows()["breakout_dqn"], False), *bench_updates.BREAKOUT
    )
    obs = (np.random.default_rng(0).random((1, 4, 10, 10)) < 0.1).astype(np.uint8)
    decay = float(policy.cfg.other.eps.decay)

    @torch.no_grad()
    def always(step: int) -> np.ndarray:  # the network always runs, then the coins
        eps = policy.schedule_values(step)["train/epsilon"]
        greedy = policy.model(obs_tensor(obs, policy.obs_space, policy.device)).argmax(dim=-1)
        explore = torch.rand(greedy.shape) < eps
        return torch.where(explore, torch.randint_like(greedy, policy.n_actions), greedy).cpu().numpy()

    def plain(step: int) -> np.ndarray:
        with torch.inference_mode():
            return always(step)

    def ours(step: int) -> np.ndarray:
        with torch.inference_mode():
            return policy.collect_action(obs, step)[0]

    pairs = []
    for eps in (1.0, 0.5, 0.1):
        step = round((1.0 - eps) / 0.9 * decay)  # the row's schedule: linear 1 -> 0.1 over `decay` env steps
        pairs.append((f"acting, epsilon {eps:g}", lambda s=step: ours(s), lambda s=step: plain(s)))
    return pairs


def plain_n_step(buf: ReplayBuffer, oldest: int, offset: np.ndarray, env: np.ndarray) -> dict[str, np.ndarray]:
    """The n-step sums one step at a time (the textbook loop)."""
    cap, d, n = buf.rows_capacity, buf._data, len(offset)
    start, remaining = oldest + offset, buf._rows - offset
    ret, steps, last, alive = np.zeros(n), np.zeros(n, dtype=np.int64), start.copy(), np.ones(n, dtype=bool)
    for k in range(buf.n_step):
        active = alive & (k < remaining)
        row = (start + k) % cap
        ret += np.where(active, buf.gamma**k * d["reward"][row, env], 0.0)
        last = np.where(active, start + k, last)
        steps = np.where(active, k + 1, steps)
        alive = active & ~(d["terminated"][row, env] | d["truncated"][row, env])
    discount = buf.gamma**steps * (~d["terminated"][last % cap, env])
    return {"start": start, "last": last, "reward": ret.astype(np.float32), "discount": discount.astype(np.float32)}


def sampling_pairs() -> list[tuple[str, Callable[[], object], Callable[[], object]]]:
    pairs = []
    for n_step in (1, 3):
        buf = ReplayBuffer(100_000, (4, 10, 10), obs_dtype=np.uint8, num_envs=8, n_step=n_step, gamma=0.99, seed=0)
        rng = np.random.default_rng(0)
        for _ in range(4_000):
            o = (rng.random((8, 4, 10, 10)) < 0.05).astype(np.uint8)
            buf.add(o, np.ones(8, np.int64), rng.normal(size=8), o, rng.random(8) < 0.02, rng.random(8) < 0.01)
        oldest = buf._oldest()
        offset, env = rng.integers(0, buf._rows, 32), rng.integers(0, 8, 32)
        ours, plain = buf._n_step_at(oldest, offset, env), plain_n_step(buf, oldest, offset, env)
        for key, value in plain.items():
            if not np.array_equal(ours[key], value):
                raise SystemExit(f"n_step={n_step}: {key} differs from the per-step loop")
        pairs.append((f"sampling, n_step {n_step}", lambda b=buf, o=oldest, f=offset, e=env: b._n_step_at(o, f, e),
                      lambda b=buf, o=oldest, f=offset, e=env: plain_n_step(b, o, f, e)))  # fmt: skip
    return pairs


def per_call_us(fn: Callable[[], object], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=9, help="interleaved rounds (the median is printed)")
    parser.add_argument("--calls", type=int, default=500, help="calls per variant and round")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.calls < 1:
        print(f"error: --rounds and --calls must be >= 1, got {args.rounds} and {args.calls}", file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    torch.manual_seed(0)
    print(f"{'case':<22} {'ours (us)':>10} {'plain (us)':>11} {'ours / plain':>13}")
    for name, ours, plain in acting_pairs() + sampling_pairs():
        times: dict[str, list[float]] = {"ours": [], "plain": []}
        for r in range(args.rounds):
            order = [("ours", ours), ("plain", plain)]
            for side, fn in order if r % 2 == 0 else order[::-1]:
                times[side].append(per_call_us(fn, args.calls))
        a, b = statistics.median(times["ours"]), statistics.median(times["plain"])
        print(f"{name:<22} {a:>10.1f} {b:>11.1f} {a / b:>13.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
