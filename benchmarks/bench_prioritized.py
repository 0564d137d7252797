"""Prioritized replay: draw 256 from a full 1M-capacity buffer and update 256 priorities, ours vs DI-engine and TorchRL.

Run:  PYTHONPATH=. .venvs/references/bin/python benchmarks/bench_prioritized.py [--capacity 1000000]
      [--batch 256] [--iters 200] [--repeats 7]

(from the repo: ``.venvs/references`` holds DI-engine and TorchRL next to torch; ``PYTHONPATH`` makes ``ding_dist``
importable; what it
needs and that venv lacks, gymnasium, comes from the checkout's ``.venv``, after the reference packages.)

All three start from the same priority vector (``|delta| ~ Exp(1)``, one per slot, the buffer full) and, per
iteration, draw ``batch`` indices with their importance weights, then set ``batch`` new priorities at the drawn
indices (alpha 0.6, beta 0.4):

* ``ding_dist``: :meth:`PrioritizedReplayBuffer.sample_indices` + :meth:`~PrioritizedReplayBuffer.update_priorities`
  (numpy sum/min tree, stratified draw); ``ding_dist (with batch)`` uses :meth:`~PrioritizedReplayBuffer.sample`,
  which also gathers the 256 transitions (CartPole-sized, 1-step) from the storage.
* ``DI-engine``: its ``SumSegmentTree``/``MinSegmentTree`` (numba when installed) with the calls its
  ``AdvancedReplayBuffer`` makes: one ``find_prefixsum_idx`` per stratified draw, the IS weight per sample from
  the trees, one ``tree[idx] = p ** alpha`` per updated priority (the buffer class itself is not imported: its
  package needs ``einops``, which the reference venv lacks).
* ``TorchRL``: ``PrioritizedSampler.sample`` (C++ trees, float32, unstratified) and ``update_priority``.

Each repeat times ``iters`` iterations; the median time per iteration over ``repeats`` repeats is printed, the
implementations interleaved repeat by repeat, with the ratio to ours (above 1: ours is faster). Memory per stored
priority is the two trees' bytes over the capacity (DI-engine: its numpy arrays; TorchRL: the process's resident
memory growth when its sampler is built and filled, as its trees live in C++).
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

if importlib.util.find_spec("gymnasium") is None:  # the reference venv lacks what ding_dist imports: take it from
    sys.path += [
        str(p) for p in Path(__file__).resolve().parents[1].glob(".venv/lib/python*/site-packages")
    ]  # ours, last

from ding_dist.data.prioritized import PrioritizedReplayBuffer  # noqa: E402
from ding_dist.data.replay import ReplayBuffer  # noqa: E402

ALPHA, BETA = 0.6, 0.4


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def ours(capacity: int, priorities: np.ndarray, with_batch: bool):
    storage = ReplayBuffer(capacity, (4,), num_envs=1, seed=0)
    buf = PrioritizedReplayBuffer(storage, alpha=ALPHA, beta=BETA)
    # Fill the storage row by row would take minutes of Python calls: the rows are written directly, as if added.
    storage._rows, storage._pos = storage.rows_capacity, 0
    buf.update_priorities(np.arange(capacity), priorities)
    nbytes = buf.tree.nbytes()

    def step(new: np.ndarray) -> None:
        if with_batch:
            _, _, index = buf.sample(len(new))
        else:
            index, _ = buf.sample_indices(len(new))
        buf.update_priorities(index, new)

    return step, nbytes


def ding(capacity: int, priorities: np.ndarray):
    from ding.utils.segment_tree import MinSegmentTree, SumSegmentTree

    size = 1 << (capacity - 1).bit_length()  # its trees need a power of two, as its buffer rounds up
    sum_tree, min_tree = SumSegmentTree(size), MinSegmentTree(size)
    for tree, op in ((sum_tree, np.add), (min_tree, np.minimum)):  # filled through its array (setup, not timed):
        tree.value[size : size + capacity] = (priorities + 1e-8) ** ALPHA  # one __setitem__ per slot takes minutes
        for level in range(size.bit_length() - 2, -1, -1):
            lo, hi = 1 << level, 2 << level
            tree.value[lo:hi] = op(tree.value[2 * lo : 2 * hi : 2], tree.value[2 * lo + 1 : 2 * hi : 2])
    nbytes = sum_tree.value.nbytes + min_tree.value.nbytes

    def step(new: np.ndarray) -> None:
        n = len(new)  # the calls AdvancedReplayBuffer makes (_get_indices, _sample_with_indices, update)
        root = sum_tree.reduce()
        mass = (np.arange(n) / n + np.random.uniform(size=n) / n) * root
        index = [sum_tree.find_prefixsum_idx(m) for m in mass]
        max_weight = (capacity * min_tree.reduce() / root) ** -BETA
        _ = [(capacity * sum_tree[i] / root) ** -BETA / max_weight for i in index]
        for i, p in zip(index, ((new + 1e-8) ** ALPHA).tolist()):
            sum_tree[i] = p
            min_tree[i] = p

    return step, nbytes


def torchrl(capacity: int, priorities: np.ndarray):
    from torchrl.data import LazyTensorStorage
    from torchrl.data.replay_buffers.samplers import PrioritizedSampler

    storage = LazyTensorStorage(capacity)
    storage.set(torch.arange(capacity), torch.zeros(capacity, dtype=torch.uint8))  # one byte per slot, full
    gc.collect()
    before = rss_bytes()
    sampler = PrioritizedSampler(capacity, alpha=ALPHA, beta=BETA)
    sampler.update_priority(torch.arange(capacity), torch.as_tensor(priorities, dtype=torch.float32))
    nbytes = rss_bytes() - before

    def step(new: np.ndarray) -> None:
        index, info = sampler.sample(storage, len(new))
        sampler.update_priority(index, torch.as_tensor(new, dtype=torch.float32))

    return step, nbytes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capacity", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--iters", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    priorities = rng.exponential(size=args.capacity)
    updates = rng.exponential(size=(args.iters, args.batch))

    impls = {}
    for name, build in (
        ("ding_dist", lambda: ours(args.capacity, priorities, with_batch=False)),
        ("ding_dist (with batch)", lambda: ours(args.capacity, priorities, with_batch=True)),
        ("DI-engine", lambda: ding(args.capacity, priorities)),
        ("TorchRL", lambda: torchrl(args.capacity, priorities)),
    ):
        t0 = time.perf_counter()
        impls[name] = build()
        print(f"built {name} in {time.perf_counter() - t0:.1f} s", flush=True)

    times: dict[str, list[float]] = {name: [] for name in impls}
    for step, _ in impls.values():  # warm-up (numba compiles on first use)
        for u in updates[:5]:
            step(u)
    for _ in range(args.repeats):
        for name, (step, _) in impls.items():
            t0 = time.perf_counter()
            for u in updates:
                step(u)
            times[name].append((time.perf_counter() - t0) / args.iters)

    base = statistics.median(times["ding_dist"])
    print(f"\ncapacity {args.capacity:,}, batch {args.batch}, {args.iters} iterations x {args.repeats} repeats")
    print(f"{'':24s} {'sample+update':>14s} {'/ ding_dist':>13s} {'bytes/priority':>15s}")
    for name, (_, nbytes) in impls.items():
        med = statistics.median(times[name])
        print(f"{name:24s} {med * 1e6:11.1f} us {med / base:12.2f}x {nbytes / args.capacity:15.1f}")


if __name__ == "__main__":
    main()
