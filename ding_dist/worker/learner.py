"""The learner: drives ``policy.learn`` and reduces logged values across ranks with one collective."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ding_dist.comm import allreduce, comm_device, get_world_size
from ding_dist.policy.base import Policy
from ding_dist.sync import DistributedModel

if TYPE_CHECKING:  # an on-policy run imports no replay
    from ding_dist.data.prioritized import PrioritizedReplayBuffer
    from ding_dist.data.replay import ReplayBuffer

__all__ = ["Learner", "reduce_log"]


Stat = float | torch.Tensor  # a Python number or a 0-dim tensor still on the policy's device


def reduce_log(sums: Mapping[str, Stat], means: Mapping[str, Stat], group: Any = None) -> dict[str, float]:
    """Sum ``sums`` and average ``means`` over the ranks of ``group`` (default: all) with ONE allreduce of a
    packed tensor.

    Values are Python numbers or 0-dim tensors (e.g. a loss still on the GPU); the packed tensor lives on
    the device the backend needs (:func:`~ding_dist.comm.comm_device`), and the result is read back to
    the host once. Every rank must pass the same keys (they are sorted, so insertion order does not matter).

    Example::

        out = reduce_log({"episodes": 3}, {"train/loss": 0.5})
        # on 2 ranks: {"episodes": 6.0 (sum), "train/loss": mean of the two ranks}
    """
    overlap = set(sums) & set(means)
    if overlap:
        raise ValueError(f"keys {sorted(overlap)} appear in both sums and means")
    sum_keys, mean_keys = sorted(sums), sorted(means)
    values = [sums[k] for k in sum_keys] + [means[k] for k in mean_keys]
    if not values:
        return {}
    like = next((v for v in values if isinstance(v, torch.Tensor)), None)
    device = comm_device(group, like=like)
    packed = torch.stack(
        [
            v.detach().reshape(()).to(device=device, dtype=torch.float64)
            if isinstance(v, torch.Tensor)
            else torch.tensor(float(v), dtype=torch.float64, device=device)
            for v in values
        ]
    )
    allreduce(packed, op="sum", group=group)
    world = get_world_size(group)
    host = packed.tolist()  # the one host read of a log interval
    out = dict(zip(sum_keys, host[: len(sum_keys)]))
    out.update({k: v / world for k, v in zip(mean_keys, host[len(sum_keys) :])})
    return out


class Learner:
    """Apply policy updates and keep running means of their statistics until :meth:`pop_stats`.

    The optimizer step itself happens in ``policy.learn`` through the sync engine (gradients are
    averaged across ranks); every rank runs the same number of updates, because the pipelines base
    every decision on global counters.

    Example::

        learner = Learner(policy)
        learner.train_replay(buffer, n_updates=4, rank_batch=32)
        stats = learner.pop_stats()  # {"train/loss": ..., "train/q_mean": ...}
    """

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self._sums: dict[str, Stat] = {}
        self._count = 0

    def _models(self) -> list[DistributedModel]:
        return [v for v in vars(self.policy).values() if isinstance(v, DistributedModel)]

    def nonfinite_skips(self) -> int:
        """Optimizer steps skipped so far because a synchronized gradient held NaN/inf (all the policy's
        distributed models together; the same number on every rank)."""
        return sum(m.nonfinite_skips for m in self._models())

    def _record(self, stats: Mapping[str, Stat]) -> None:
        # Tensors stay where the policy made them (adding them does not wait for the device).
        for k, v in stats.items():
            v = v.detach() if isinstance(v, torch.Tensor) else float(v)
            self._sums[k] = self._sums[k] + v if k in self._sums else v
        self._count += 1

    def train_replay(self, buffer: ReplayBuffer | PrioritizedReplayBuffer, n_updates: int, rank_batch: int) -> None:
        """``n_updates`` updates, each on a fresh batch of ``rank_batch`` samples from ``buffer`` (off-policy; this
        rank's share of ``learn.batch_size``: ``policy.plan.rank_batch``).

        From a :class:`~ding_dist.data.prioritized.PrioritizedReplayBuffer` the batch also holds the importance
        weights (``"weight"``), and the ``"priority"`` the policy returns updates the sampled transitions. Prioritized
        replay over several ranks or shards (the ranks' own buffers, a learner's
        :class:`~ding_dist.data.replay_shards.ReplayShards`) is one prioritized replay over all of them
        (:func:`~ding_dist.data.prioritized_shards.draw_prioritized`, ``rank_batch`` per rank): each rank's part of
        the global batch follows its priority mass, and its gradient counts in proportion to its part, so the
        update is that of one process drawing the whole batch from one buffer.
        """
        device = self.policy.device
        if not getattr(buffer, "prioritized", False):  # PrioritizedReplayBuffer or ReplayShards of them
            for _ in range(n_updates):
                self._record(self.policy.learn(buffer.sample(rank_batch, device=device)))
            return
        from ding_dist.data.replay_shards import ReplayShards

        group = self.policy.sync_group
        world = get_world_size(group)
        if world > 1 and not isinstance(buffer, ReplayShards):  # a data-parallel rank's own prioritized buffer
            buffer = ReplayShards({0: buffer})
        for _ in range(n_updates):
            if isinstance(buffer, ReplayShards):
                batch, weights, indices = buffer.sample(rank_batch, device=device, group=group)
            else:
                batch, weights, indices = buffer.sample(rank_batch, device=device)
            with contextlib.ExitStack() as weighting:
                if world > 1:  # this rank's rows over its even share of the global batch: N n_r / B
                    for model in self._models():
                        weighting.enter_context(model.gradient_weight(len(indices) / rank_batch))
                stats = dict(self.policy.learn({**batch, "weight": weights}))
            priority = stats.pop("priority", None)
            if priority is not None and len(indices):
                buffer.update_priorities(indices, priority)
            self._record(stats)

    def train_rollout(self, rollout: Mapping[str, np.ndarray]) -> None:
        """One ``policy.learn`` call on a fresh rollout (on-policy: all epochs and minibatches)."""
        self._record(self.policy.learn(rollout))

    def pop_stats(self) -> dict[str, Stat]:
        """Local means of the statistics since the last call, keyed ``train/<name>``; then reset.

        Values a policy returned as tensors stay tensors on its device (no host read here): hand them
        to :func:`reduce_log`, which reads everything back once.

        Once a step has been skipped for a non-finite gradient, ``train/nonfinite_skips`` (the total so
        far, identical on every rank, so every rank reports the same keys) is added as well.
        """
        out = {f"train/{k}": v / self._count for k, v in self._sums.items()} if self._count else {}
        skips = self.nonfinite_skips()
        if out and skips:
            out["train/nonfinite_skips"] = float(skips)
        self._sums, self._count = {}, 0
        return out
