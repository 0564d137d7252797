"""Proportional prioritized experience replay (Schaul et al. 2016) over the existing replay storages.

Transition ``i`` is drawn with probability ``P(i) = p_i**alpha / sum_k p_k**alpha`` and carries the
importance weight ``w_i = (N * P(i))**-beta / max_j (N * P(j))**-beta`` (the largest weight, from the
smallest priority, normalizes it to at most 1); ``beta`` rises linearly to 1 over ``anneal_step`` draws
(0: constant). Priorities are ``p = |delta| + eps``; new transitions get the largest ``p`` seen so far
(1 at first) unless the producer gives one.

The storage is a :class:`~ding_dist.data.replay.ReplayBuffer` or, for stacked frames, a
:class:`~ding_dist.data.frame_replay.FrameReplayBuffer` (one frame per stored transition, as before):
transitions, n-step returns and observations come from it unchanged; this module only chooses which
ones. Index ``i`` is ``row * num_envs + env`` of the storage's ring, so a priority follows its slot as the
ring wraps: overwriting a row gives its slots fresh priorities.

:class:`SumMinTree` keeps ``p**alpha`` in the leaves of a sum tree and a min tree (numpy, float64). Batch updates
set the leaves and recompute their ancestors level by level with array operations; sampling finds each draw's
subtree with one ``np.searchsorted`` and descends all ``B`` draws together, one level per step: a few dozen
array operations per batch, no Python loop per element.

Priorities computed on an accelerator reach the host without making it wait (:class:`DeferredPriorities`): an
update's ``|delta|`` starts its copy to the host and is applied when the tree is next read (the next draw, new
rows, a checkpoint), by when the device has usually finished that update. The draws see every update, in order,
exactly as if it had been applied at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from ding_dist.data.frame_replay import FrameReplayBuffer
from ding_dist.data.replay import _FIELDS, ReplayBuffer, as_tensors, to_device

__all__ = ["DeferredPriorities", "HostCopy", "PrioritizedReplayBuffer", "SumMinTree"]


class SumMinTree:
    """Sum and min of non-negative leaf values, updated and searched in batches (array operations only).

    A binary sum tree and min tree (float64, heap layout: node ``j`` has children ``2j`` and ``2j + 1``, leaves at
    ``[size, 2 size)``, ``size`` the capacity rounded up to a power of two), kept from the leaves up to ``roots``
    subtree roots only: a draw finds its subtree with one ``np.searchsorted`` over the cumulative sum of the roots,
    then descends the remaining levels with all values together; an update recomputes the same levels. For 1M
    leaves with 4096 roots that is 8 levels instead of 20, about 10 array operations per level for a whole batch.

    Example::

        tree = SumMinTree(5)
        tree.update(np.array([0, 3]), np.array([1.0, 3.0]))
        tree.total, tree.min  # 4.0, 1.0
        tree.find(np.array([0.5, 2.0]))  # leaves [0, 3]: the first leaf whose prefix sum exceeds each value
    """

    def __init__(self, capacity: int, roots: int = 4096) -> None:
        if int(capacity) < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        if int(roots) < 1 or int(roots) & (int(roots) - 1):
            raise ValueError(f"roots must be a power of two, got {roots}")
        self.capacity = int(capacity)
        self.size = 1 << (self.capacity - 1).bit_length()
        self.roots = min(int(roots), self.size)
        self.levels = (self.size // self.roots).bit_length() - 1  # levels between the roots and the leaves
        self._sum = np.zeros(2 * self.size, dtype=np.float64)
        self._min = np.full(2 * self.size, np.inf, dtype=np.float64)
        self._prefix = np.zeros(self.roots + 1, dtype=np.float64)  # cumulative sums of the roots (reused)

    def nbytes(self) -> int:
        """Bytes of both trees."""
        return self._sum.nbytes + self._min.nbytes + self._prefix.nbytes

    @property
    def total(self) -> float:
        """Sum of all leaves."""
        return float(self._sum[self.roots : 2 * self.roots].sum())

    @property
    def min(self) -> float:
        """Smallest positive leaf (``inf`` when there is none)."""
        return float(self._min[self.roots : 2 * self.roots].min())

    def leaves(self, index: np.ndarray) -> np.ndarray:
        """The values at leaves ``index``."""
        return self._sum[np.asarray(index, dtype=np.int64) + self.size]

    def update(self, index: np.ndarray, value: np.ndarray) -> None:
        """Set leaves ``index`` to ``value`` (for a repeated index the last value wins), then their ancestors."""
        node = np.asarray(index, dtype=np.int64)
        if node.size and (node.min() < 0 or node.max() >= self.capacity):
            raise ValueError(f"leaf indices must be in [0, {self.capacity}), got {node.min()}..{node.max()}")
        node = node + self.size
        s, m = self._sum, self._min
        s[node] = value
        m[node] = np.where(np.asarray(value) > 0, value, np.inf)  # a 0 leaf is never drawn: no min
        for _ in range(self.levels):  # one level per step; a repeated parent just gets the same value twice
            node >>= 1
            left = node << 1
            right = left + 1
            s[node] = s[left] + s[right]
            m[node] = np.minimum(m[left], m[right])

    def find(self, value: np.ndarray) -> np.ndarray:
        """For each ``value`` in ``[0, total)``, the leaf whose prefix-sum interval holds it (never a 0 leaf;
        values at or past the top are taken just below it)."""
        prefix, s = self._prefix, self._sum
        np.cumsum(s[self.roots : 2 * self.roots], out=prefix[1:])
        value = np.minimum(np.asarray(value, dtype=np.float64), np.nextafter(prefix[-1], 0.0))
        root = np.searchsorted(prefix[1:], value, side="right")
        value = value - prefix[root]
        node = root + self.roots
        for _ in range(self.levels):
            left = node << 1
            left_sum = s[left]
            right = value >= left_sum
            value -= left_sum * right
            node = left + right
        leaf = node - self.size
        empty = s[node] == 0  # rounding (sums added in another order) can step past a subtree's last leaf
        if empty.any():
            leaf[empty] = self._find_exact(np.nextafter(prefix[root[empty] + 1], 0.0))
        return leaf

    def _find_exact(self, value: np.ndarray) -> np.ndarray:
        """The rare rounding case of :meth:`find`: the last non-zero leaf at or before each prefix sum ``value``."""
        leaves = self._sum[self.size : self.size + self.capacity]
        positive = np.flatnonzero(leaves)
        at = np.searchsorted(np.cumsum(leaves[positive]), value, side="right")
        return positive[np.minimum(at, len(positive) - 1)]

    def state_dict(self) -> dict[str, Any]:
        """The leaves (the inner nodes are rebuilt on load)."""
        return {"leaves": self._sum[self.size : self.size + self.capacity].copy()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        leaves = np.asarray(state["leaves"], dtype=np.float64)
        if leaves.shape != (self.capacity,):
            raise ValueError(f"tree state has {leaves.shape[0]} leaves, this tree {self.capacity}")
        self._sum[:] = 0.0
        self._min[:] = np.inf
        self._sum[self.size : self.size + self.capacity] = leaves
        self._min[self.size : self.size + self.capacity] = np.where(leaves > 0, leaves, np.inf)
        lo = self.size
        while lo > self.roots:  # whole levels at once, bottom up
            lo //= 2
            self._sum[lo : 2 * lo] = self._sum[2 * lo : 4 * lo : 2] + self._sum[2 * lo + 1 : 4 * lo : 2]
            self._min[lo : 2 * lo] = np.minimum(self._min[2 * lo : 4 * lo : 2], self._min[2 * lo + 1 : 4 * lo : 2])


def _unit_interval(name: str, value: float) -> float:
    value = float(value)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be in [0, 1], got {value}")
    return value


class HostCopy:
    """A tensor's values on their way to the host. From a CUDA tensor the copy into pinned memory starts at once and
    nothing waits for the device until :meth:`numpy`; from any other it is an ordinary copy.

    Example::

        pending = HostCopy(td_error)   # returns at once: the update that computes td_error may still run
        values = pending.numpy()       # waits for that update if it has not finished (a numpy array, flat)
    """

    __slots__ = ("_event", "_host", "_rows")

    def __init__(self, tensor: torch.Tensor) -> None:
        t = tensor.detach().reshape(-1)
        self._rows: np.ndarray | None = None
        self._event: Any = None
        if t.device.type == "cuda":
            self._host = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
            self._host.copy_(t, non_blocking=True)
            self._event = torch.cuda.Event()
            self._event.record()
        else:
            self._host = t.to("cpu", copy=True)

    def __len__(self) -> int:
        return len(self._host) if self._rows is None else len(self._rows)

    def take(self, rows: np.ndarray) -> HostCopy:
        """The values at ``rows`` (indices or a boolean mask), still on their way: one copy serves every part."""
        out = HostCopy.__new__(HostCopy)
        picked = np.arange(len(self._host))[rows] if self._rows is None else self._rows[rows]
        out._host, out._event, out._rows = self._host, self._event, picked
        return out

    __getitem__ = take  # a part is picked as from an array

    def numpy(self) -> np.ndarray:
        """The values, once the copy has arrived."""
        if self._event is not None:
            self._event.synchronize()
        values = self._host.numpy()
        return values if self._rows is None else values[self._rows]


class DeferredPriorities:
    """Priority updates that do not make the host wait for the device (for a buffer with a :class:`SumMinTree`).

    :meth:`update_priorities` with a tensor keeps a :class:`HostCopy` of it; every read of :attr:`tree` or
    :attr:`max_priority` applies the pending updates first, in order. Values already on the host (numpy) apply at
    once. A subclass sets ``eps`` and ``alpha``, calls :meth:`_init_priorities` and names its valid indices in
    :meth:`_index_count`.

    Example::

        buf.update_priorities(indices, td_error)  # a CUDA tensor: returns before the update has finished
        batch, weights, indices = buf.sample(64)  # applies it first (waiting only if the device is still on it)
    """

    eps: float
    alpha: float

    def _init_priorities(self, leaves: int) -> None:
        self._pending: list[tuple[np.ndarray, HostCopy]] = []
        self._tree = SumMinTree(leaves)
        self._max_priority = 1.0  # largest |delta| + eps so far (before the exponent)

    def _index_count(self) -> int:
        raise NotImplementedError

    @property
    def tree(self) -> SumMinTree:
        """The priorities' tree, with every update applied."""
        if self._pending:
            self._settle()
        return self._tree

    @property
    def max_priority(self) -> float:
        """The largest ``|delta| + eps`` so far, every update applied (new transitions get it)."""
        if self._pending:
            self._settle()
        return self._max_priority

    @max_priority.setter
    def max_priority(self, value: float) -> None:
        if self._pending:
            self._settle()
        self._max_priority = float(value)

    def update_priorities(self, indices: np.ndarray, priorities: Any) -> None:
        """Set the priorities of ``indices`` (from ``sample``) to ``(|priorities| + eps) ** alpha``: a tensor's when
        the tree is next read (its copy to the host starts now), an array's now."""
        index = np.asarray(indices, dtype=np.int64).reshape(-1)
        if isinstance(priorities, torch.Tensor):
            priorities = HostCopy(priorities)
        size = len(priorities) if isinstance(priorities, HostCopy) else np.size(priorities)
        if size != index.size:
            raise ValueError(f"{index.size} indices but {size} priorities")
        count = self._index_count()
        if index.size and (index.min() < 0 or index.max() >= count):
            raise ValueError(f"indices must be in [0, {count}), got {index.min()}..{index.max()}")
        if isinstance(priorities, HostCopy):
            self._pending.append((index, priorities))
        else:
            self._apply(index, priorities)

    def _settle(self) -> None:
        while self._pending:  # in order; a refused update is dropped, the later ones stay pending
            index, values = self._pending.pop(0)
            self._apply(index, values.numpy())

    def _scaled(self, priority: Any) -> np.ndarray:
        """``|priority| + eps`` as float64 (a tensor is read back to the host); refuses NaN and inf."""
        p = np.abs(np.asarray(priority.detach().cpu() if isinstance(priority, torch.Tensor) else priority, np.float64))
        if not np.isfinite(p).all():
            raise ValueError("priorities must be finite, got NaN or inf")
        return p + self.eps

    def _apply(self, index: np.ndarray, priorities: Any) -> None:
        p = self._scaled(priorities).reshape(-1)
        self._tree.update(index, p**self.alpha)
        self._max_priority = max(self._max_priority, float(p.max(initial=0.0)))


class PrioritizedReplayBuffer(DeferredPriorities):
    """Proportional prioritized replay over a :class:`ReplayBuffer` or :class:`FrameReplayBuffer` storage.

    Args:
        storage: the (empty) buffer that stores transitions and computes n-step returns; its ``seed`` seeds
            the draws here too.
        alpha: priority exponent in [0, 1] (0: uniform).
        beta: initial importance-sampling exponent in [0, 1].
        anneal_step: draws (:meth:`sample` calls) over which beta rises linearly to 1; 0 keeps it constant.
        eps: added to ``|delta|`` so that no transition's priority is 0.

    Example::

        buf = PrioritizedReplayBuffer(ReplayBuffer(10_000, (4,), num_envs=8, n_step=3, seed=0), alpha=0.6, beta=0.4,
                                      anneal_step=100_000)
        buf.add(rollout)  # fields [T, 8, ...] as the collector yields them; priority [T, 8] optional
        batch, weights, indices = buf.sample(64)  # dict of tensors, (64,) float32 tensor, (64,) int64 array
        td_error = ...  # |Q - target| per sample, from the learner
        buf.update_priorities(indices, td_error)
    """

    prioritized = True  # sample() returns (batch, weights, indices); as ReplayShards of prioritized buffers

    def __init__(
        self,
        storage: ReplayBuffer | FrameReplayBuffer,
        *,
        alpha: float = 0.6,
        beta: float = 0.4,
        anneal_step: int = 0,
        eps: float = 1e-6,
    ) -> None:
        self.alpha = _unit_interval("alpha", alpha)
        self.beta0 = _unit_interval("beta", beta)
        if int(anneal_step) < 0:
            raise ValueError(f"anneal_step must be >= 0, got {anneal_step}")
        if not float(eps) > 0.0:
            raise ValueError(f"eps must be > 0, got {eps}")
        if len(storage):
            raise ValueError(f"the storage of a PrioritizedReplayBuffer must start empty, it holds {len(storage)}")
        self.anneal_step, self.eps = int(anneal_step), float(eps)
        self.storage = storage
        self._init_priorities(storage.capacity)
        self.draws = 0  # sample() calls so far (beta's schedule)
        self.sampled_age = [0.0, 0]  # since pop_sample_age(): sum of the sampled transitions' ages, their count

    @property
    def capacity(self) -> int:
        return self.storage.capacity

    @property
    def num_envs(self) -> int:
        return self.storage.num_envs

    def __len__(self) -> int:
        return len(self.storage)

    def nbytes(self) -> int:
        """Bytes held by the storage and both trees."""
        return self.storage.nbytes() + self.tree.nbytes()

    @property
    def rng(self) -> np.random.Generator:
        """The generator of the draws (the storage's)."""
        return self.storage._rng

    @property
    def beta(self) -> float:
        """The importance-sampling exponent for the next draw."""
        if self.anneal_step == 0:
            return self.beta0
        return self.beta0 + (1.0 - self.beta0) * min(1.0, self.draws / self.anneal_step)

    def add(self, batch: Mapping[str, np.ndarray], priority: Any = None) -> None:
        """Append the rows of ``batch`` (fields ``obs, action, reward, next_obs, terminated, truncated`` with shape
        ``[T, num_envs, ...]``); ``priority`` (``|delta|``, shape ``[T, num_envs]``) or the current maximum."""
        rows = len(batch["reward"])
        if priority is not None:
            p = self._scaled(priority)
            if p.shape != (rows, self.num_envs):
                raise ValueError(f"priority must have shape {(rows, self.num_envs)}, got {p.shape}")
            self.max_priority = max(self.max_priority, float(p.max(initial=0.0)))
        else:
            p = np.full((rows, self.num_envs), self.max_priority)
        s, slots = self.storage, np.arange(self.num_envs)
        for t in range(rows):
            s.add(*(batch[name][t] for name in _FIELDS))
            row = (s._oldest() + s._rows - 1) % s.rows_capacity  # the row just written
            self.tree.update(row * self.num_envs + slots, p[t] ** self.alpha)

    def extend(self, rollout: Mapping[str, np.ndarray]) -> None:
        """:meth:`add` with the current maximum priority (the uniform buffers' interface)."""
        self.add(rollout)

    def sample(
        self, batch_size: int, device: str | torch.device = "cpu"
    ) -> tuple[dict[str, torch.Tensor], torch.Tensor, np.ndarray]:
        """``batch_size`` n-step transitions drawn by priority, one per equal segment of the priority mass.

        Returns the batch (keys of :meth:`ReplayBuffer.sample`), the importance weights (float32 on ``device``)
        and the indices to pass to :meth:`update_priorities`.
        """
        return self.gather(*self.sample_indices(batch_size), device)

    def gather(
        self, index: np.ndarray, weights: np.ndarray, device: str | torch.device = "cpu"
    ) -> tuple[dict[str, torch.Tensor], torch.Tensor, np.ndarray]:
        """The transitions at drawn ``index`` with their ``weights``, as :meth:`sample` returns them (a draw made
        elsewhere, e.g. :func:`~ding_dist.data.prioritized_shards.draw_prioritized` over several buffers)."""
        s, oldest = self.storage, self.storage._oldest()
        row, env = np.divmod(index, self.num_envs)
        age = (oldest + s._rows - 1 - row) % s.rows_capacity  # rows written after the sampled one
        self.sampled_age[0] += float(age.sum()) * self.num_envs
        self.sampled_age[1] += len(age)
        drawn = s._n_step_at(oldest, (row - oldest) % s.rows_capacity, env)
        weight = to_device(torch.as_tensor(weights, dtype=torch.float32), device)
        return as_tensors(s._gather(drawn), device), weight, index

    def sample_indices(self, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
        """The draw of :meth:`sample` without the transitions: indices (int64) and importance weights (float64)."""
        if len(self.storage) == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        if int(batch_size) < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        total = self.tree.total
        u = (np.arange(batch_size) + self.storage._rng.random(batch_size)) * (total / batch_size)
        index = self.tree.find(np.minimum(u, np.nextafter(total, 0.0)))
        # w_i = (N P(i))^-beta / (N P_min)^-beta = (p_i / p_min)^-beta, p already raised to alpha.
        weights = (self.tree.leaves(index) / self.tree.min) ** -self.beta
        self.draws += 1
        return index, weights

    def pop_sample_age(self) -> tuple[float, int]:
        """(sum of ages, count) of the transitions :meth:`sample` drew since the last call; a transition's age is the
        number of transitions stored after it (its env slots' steps since).

        Example::

            total, n = buf.pop_sample_age()
            mean_age = total / max(n, 1)
        """
        out = (self.sampled_age[0], self.sampled_age[1])
        self.sampled_age = [0.0, 0]
        return out

    def _index_count(self) -> int:
        return len(self)

    def state_dict(self) -> dict[str, Any]:
        """The storage's state plus the priorities, the maximum priority and the draw count (plain values)."""
        return {
            "storage": self.storage.state_dict(),
            "priorities": self.tree.state_dict()["leaves"],
            "max_priority": self.max_priority,
            "draws": self.draws,
        }

    def load_storage_state(self, storage_state: Mapping[str, Any], priority: float | None = None) -> None:
        """Restore only the transitions (a storage state, e.g. re-sharded from the ranks of another world size:
        :mod:`ding_dist.data.reshard`); each gets ``priority`` (default: the current maximum), as new data does.

        Example::

            buffer.load_storage_state(reshard_states(load, rank, world, old_world, rows_capacity=cap), 2.5)
        """
        self.storage.load_state_dict(storage_state)
        if priority is not None:
            self.max_priority = max(self.max_priority, float(priority))
        s = self.storage
        rows = (s._oldest() + np.arange(s._rows)) % s.rows_capacity
        index = (rows[:, None] * self.num_envs + np.arange(self.num_envs)[None, :]).reshape(-1)
        leaves = np.zeros_like(np.asarray(self.tree.state_dict()["leaves"], dtype=np.float64))
        leaves[index] = self.max_priority**self.alpha
        self.tree.load_state_dict({"leaves": leaves})

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` (same shapes and capacity)."""
        self.storage.load_state_dict(state["storage"])
        self.tree.load_state_dict({"leaves": np.asarray(state["priorities"])})
        self.max_priority, self.draws = float(state["max_priority"]), int(state["draws"])
