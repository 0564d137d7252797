"""A learner's replay: one buffer per actor (each keeps its env slots in time order), sampled as one.

The actor-learner mode's learner fills one shard per actor it serves (:mod:`ding_dist.worker.experience` brings
the chunks); a data-parallel rank with prioritized replay wraps its own buffer in one, so every learner's shards
make one prioritized replay (:func:`~ding_dist.data.prioritized_shards.draw_prioritized`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from ding_dist.comm import get_world_size
from ding_dist.data.prioritized import HostCopy, PrioritizedReplayBuffer
from ding_dist.data.prioritized_shards import draw_prioritized
from ding_dist.data.replay import ReplayBuffer

__all__ = ["ReplayShards"]


class ReplayShards:
    """One replay buffer per actor (each actor's env slots stay in time order); batches mix all shards.

    Prioritized shards (:class:`~ding_dist.data.prioritized.PrioritizedReplayBuffer`, ``policy.priority``): one
    prioritized replay over every shard of every learner (:func:`~ding_dist.data.prioritized_shards.draw_prioritized`:
    a shard's share of the batch follows its priority sum, the weights use the global minimum); :meth:`sample`
    returns ``(batch, weights, indices)``, :meth:`update_priorities` sends each priority back to its shard, and
    :meth:`extend` takes a chunk's ``priority`` field (Ape-X: computed by the actor) as its transitions' first
    priorities. Uniform shards: each batch split over the shards in proportion to their sizes.

    Example::

        shards = ReplayShards({1: buffer_a, 2: buffer_b})
        shards.extend(rollout, shard=1)
        batch = shards.sample(64)  # uniform: about 32 from each, in proportion to their sizes
    """

    _STRIDE = 1 << 40  # a prioritized index is shard position * _STRIDE + index in that shard

    def __init__(self, shards: Mapping[int, ReplayBuffer | PrioritizedReplayBuffer]) -> None:
        self.shards = dict(shards)
        kinds = {bool(getattr(b, "prioritized", False)) for b in self.shards.values()}  # also sequence replay
        if len(kinds) > 1:
            raise ValueError("replay shards must be all prioritized or all uniform")
        self.prioritized = kinds == {True}

    def __len__(self) -> int:
        return sum(len(b) for b in self.shards.values())

    def extend(self, rollout: Mapping[str, np.ndarray], shard: int) -> None:
        """Add a rollout to ``shard``; prioritized shards take its ``priority`` field (the actor's ``|delta|``,
        Ape-X) when it has one, else the shard's current maximum priority."""
        if self.prioritized and "priority" in rollout:
            self.shards[shard].add(rollout, priority=rollout["priority"])
        else:
            self.shards[shard].extend(rollout)

    def sample(self, batch_size: int, device: str | torch.device = "cpu", group: Any = None) -> Any:
        """``batch_size`` transitions (uniform: split over the shards in proportion to their sizes).

        Prioritized: ``(batch, weights, indices)``, this learner's draws of a global batch of ``batch_size`` times
        the ranks of ``group`` (the learners; every one calls it) over every learner's shards, so the rows vary
        around ``batch_size`` with the priority mass held here. With none of the batch here, the batch is one
        transition of weight 0 and ``indices`` is empty (the learner weights its gradient 0 and updates no
        priority).
        """
        if not self.prioritized:
            return self._sample_uniform(batch_size, device)
        buffers = list(self.shards.values())
        draws = draw_prioritized(buffers, batch_size * get_world_size(group), group)
        parts = [(pos, buffers[pos].gather(i, w, device)) for pos, (i, w) in enumerate(draws) if len(i)]
        if not parts:  # a stand-in for this learner's step, counted 0 times
            pos = next((p for p, b in enumerate(buffers) if len(b)), None)
            if pos is None:
                raise ValueError("cannot sample from an empty replay buffer (this learner's shards hold nothing)")
            index = buffers[pos].tree.find(np.zeros(1))
            batch, weights, _ = buffers[pos].gather(index, np.zeros(1), device)
            return batch, weights, np.zeros(0, dtype=np.int64)
        batch = {key: torch.cat([part[0][key] for _, part in parts]) for key in parts[0][1][0]}
        indices = np.concatenate([pos * self._STRIDE + part[2] for pos, part in parts])
        return batch, torch.cat([part[1] for _, part in parts]), indices

    def _sample_uniform(self, batch_size: int, device: str | torch.device) -> dict[str, torch.Tensor]:
        sizes = {k: len(b) for k, b in self.shards.items() if len(b)}
        if not sizes:
            raise ValueError("cannot sample from an empty replay buffer")
        total = sum(sizes.values())
        counts = {k: batch_size * n // total for k, n in sizes.items()}
        for k in sorted(sizes, key=lambda k: -sizes[k])[: batch_size - sum(counts.values())]:
            counts[k] += 1
        parts = [self.shards[k].sample(n, device) for k, n in counts.items() if n]
        return {key: torch.cat([p[key] for p in parts]) for key in parts[0]}

    def update_priorities(self, indices: np.ndarray, priorities: Any) -> None:
        """Send each of ``priorities`` (``|delta|``) to the shard that :meth:`sample` drew its index from."""
        # a tensor's copy to the host starts once, each shard applies its part when it is next read
        p = HostCopy(priorities) if isinstance(priorities, torch.Tensor) else np.asarray(priorities).reshape(-1)
        shard, index = np.divmod(np.asarray(indices, dtype=np.int64).reshape(-1), self._STRIDE)
        if len(p) != len(index):
            raise ValueError(f"{len(index)} indices but {len(p)} priorities")
        for pos, buffer in enumerate(self.shards.values()):
            mine = shard == pos
            if mine.any():
                buffer.update_priorities(index[mine], p[mine])

    def state_dict(self) -> dict[str, Any]:
        return {"shards": {k: b.state_dict() for k, b in self.shards.items()}}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        saved = state["shards"]
        if sorted(saved) != sorted(self.shards):
            raise ValueError(f"replay shards of actors {sorted(saved)} saved, this learner has {sorted(self.shards)}")
        for k, b in self.shards.items():
            b.load_state_dict(saved[k])
