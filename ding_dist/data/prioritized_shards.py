"""One prioritized replay over many buffers: the shards of every actor, on every learner (or every rank's own).

Proportional prioritized replay (Schaul et al. 2016; Ape-X's central replay, Horgan et al. 2018) draws transition
``i`` with probability ``P(i) = p_i / sum_k p_k`` over *all* stored transitions (``p`` already raised to ``alpha``)
and weighs it by ``(N P(i))**-beta / max_j (N P(j))**-beta = (p_i / p_min)**-beta``. Sharded, the sum and the
minimum are global: :func:`draw_prioritized` lays every shard's priority mass end to end (the ranks in rank
order, each rank's shards in their order), makes the ``B`` stratified draws of one buffer over that whole mass
(``u_k = (k + U_k) * total / B``) and lets each shard serve the draws that fall in its part, found in its own sum
tree. So a shard's share of the batch follows its priority sum, not its size, and the weights use the global
minimum. Across ranks that costs one allgather of three numbers per batch (each rank's priority sum, its minimum
and rank 0's seed of the draw); the draw itself is a few numpy array operations per batch, no loop per element.

A rank's share of the batch varies from draw to draw; :class:`~ding_dist.worker.learner.Learner` weights each
rank's gradient by its share (:meth:`~ding_dist.sync.DistributedModel.gradient_weight`), so the update is the
one a single process makes on the whole batch.

Example::

    draws = draw_prioritized([shard_a, shard_b], batch_size=64)  # [(index, weights) of shard_a, ... of shard_b]
    parts = [shard.gather(i, w) for shard, (i, w) in zip([shard_a, shard_b], draws) if len(i)]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from ding_dist.comm import allgather, comm_device, get_rank, get_world_size

__all__ = ["draw_prioritized"]

_SEED_HIGH = 1 << 52  # a seed travels as a float64: exact below 2**53


def _rank_masses(mass: float, low: float, seed: int, group: Any) -> tuple[np.ndarray, float, int]:
    """Every rank's priority mass, the global minimum priority and rank 0's seed (one allgather)."""
    mine = torch.tensor([mass, low, float(seed)], dtype=torch.float64)
    gathered = torch.stack([t.cpu() for t in allgather(mine.to(comm_device(group, like=mine)), group=group)])
    return gathered[:, 0].numpy(), float(gathered[:, 1].min()), int(gathered[0, 2])


def draw_prioritized(buffers: Sequence[Any], batch_size: int, group: Any = None) -> list[tuple[np.ndarray, np.ndarray]]:
    """This rank's part of ``batch_size`` prioritized draws over ``buffers`` of every rank of ``group``: per buffer,
    its drawn indices (int64) and their importance weights (float64), possibly empty.

    ``buffers``: this rank's :class:`~ding_dist.data.prioritized.PrioritizedReplayBuffer` or
    :class:`~ding_dist.data.sequence_replay.SequenceReplayBuffer` shards (``tree``, ``beta``, ``draws``, ``rng``);
    ``batch_size``: the global batch (all ranks together). Every rank of ``group`` calls it with the same
    ``batch_size``; all get the same stratified positions (seeded by rank 0's first buffer), each keeps those in
    its shards' mass. Every buffer counts the draw (``draws``: beta's schedule), served or not.

    Example::

        (index_a, w_a), (index_b, w_b) = draw_prioritized([shard_a, shard_b], 64)  # one process, two shards
    """
    if not buffers:
        raise ValueError("draw_prioritized needs at least one buffer")
    if int(batch_size) < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    batch_size = int(batch_size)
    mass = np.array([b.tree.total for b in buffers], dtype=np.float64)
    ends = np.cumsum(mass)  # each shard's part of this rank's mass: [ends[s] - mass[s], ends[s])
    low = min(b.tree.min for b in buffers)
    seed = int(buffers[0].rng.integers(_SEED_HIGH))  # every rank draws one: their generators stay in step
    if get_world_size(group) > 1:
        rank_mass, low, seed = _rank_masses(float(ends[-1]), low, seed, group)
        rank_ends = np.cumsum(rank_mass)
        rank = get_rank(group)
        start, stop = (rank_ends[rank - 1] if rank else 0.0), rank_ends[rank]
    else:
        rank_ends, start, stop = ends[-1:], 0.0, ends[-1]
    total = float(rank_ends[-1])
    if not total > 0.0:
        raise ValueError("cannot sample from an empty replay buffer")
    u = (np.arange(batch_size) + np.random.default_rng(seed).random(batch_size)) * (total / batch_size)
    u = np.minimum(u, np.nextafter(total, 0.0))
    mine = u[(u >= start) & (u < stop)] - start if len(rank_ends) > 1 else u
    # The shard holding each position (an empty shard holds none); rounding past the end: the last non-empty one.
    shard = np.minimum(np.searchsorted(ends, mine, side="right"), np.flatnonzero(mass > 0)[-1] if ends[-1] else 0)
    beta = buffers[0].beta
    out = []
    for s, buffer in enumerate(buffers):
        at = mine[shard == s] - (ends[s] - mass[s])
        if len(at):
            index = buffer.tree.find(np.minimum(at, np.nextafter(mass[s], 0.0)))
            weights = (buffer.tree.leaves(index) / low) ** -beta
        else:
            index, weights = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        buffer.draws += 1
        out.append((index, weights))
    return out
