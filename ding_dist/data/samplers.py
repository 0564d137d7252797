"""Load-balancing distributed samplers: every replica gets samples of similar cost at the same step.

In synchronous data-parallel training each step waits for the slowest replica. When samples differ in
cost (episodes of different lengths in an offline-RL dataset, sequences of different lengths), a plain
``DistributedSampler`` gives one replica a long episode while another gets a short one, and the fast
replicas idle. These samplers sort the dataset by a user-given complexity, deal it out in chunks of
``num_replicas`` neighbouring samples (one per replica), and give each replica the same chunk at the same
position, so the i-th samples of all replicas have similar complexity.

Per epoch:

1. with ``drop_last`` and a dataset size not divisible by ``num_replicas``, a random (``shuffle``) or the
   last (no ``shuffle``) ``len(dataset) % num_replicas`` samples are left out;
2. samples are ordered by the key ``(1 - random_level) * q + random_level * u`` where ``q`` in [0, 1] is the
   sample's complexity quantile in the dataset and ``u`` is uniform noise (``shuffle=False``: plain
   complexity order). ``random_level=0`` gives the best balance, ``1`` a fully random order;
3. without ``drop_last`` the last, incomplete chunk is padded by repeating its own samples (which have the
   most similar complexity), so the dataset is covered and every replica gets the same count;
4. inside each chunk samples are assigned to replicas greedily (largest sample to the replica with the
   smallest running total, widest chunks first), which keeps the replicas' total complexity within
   one chunk's spread (beyond the ``_GREEDY_CHUNKS`` widest chunks, narrower ones rotate ranks);
5. with ``shuffle`` the chunks are visited in random order, so an epoch is not a curriculum from easy to hard.

All randomness comes from ``seed + epoch``, so every replica computes the same plan without talking.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from numbers import Integral, Real
from typing import Any

import numpy as np
import torch
from torch.utils.data import Sampler

__all__ = ["LoadBalancingDistributedSampler", "LoadBalancingDistributedBatchSampler"]

# Per epoch, at most this many chunks are placed by the (sequential, Python) greedy step.
_GREEDY_CHUNKS = 2048


def _default_world() -> tuple[int, int]:
    # Imported here so that building a sampler with explicit num_replicas/rank never touches comm.
    from ding_dist.comm import get_rank, get_world_size

    return get_world_size(), get_rank()


def _check_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be an int, got {value!r}")
    return int(value)


class LoadBalancingDistributedSampler(Sampler[int]):
    """Distributed sampler whose replicas see samples of similar complexity at the same position.

    Args:
        dataset: a sized dataset; ``dataset[i]`` is passed to ``complexity_fn`` once per sample, here.
        complexity_fn: sample -> finite number measuring its cost (e.g. episode length).
        num_replicas: number of replicas; default ``ding_dist.comm.get_world_size()``.
        rank: this replica's rank; default ``ding_dist.comm.get_rank()``.
        shuffle: randomize the order each epoch (seeded by ``seed + epoch``).
        seed: random seed; must be the same on all replicas.
        drop_last: drop the tail that does not divide evenly instead of padding by repetition.
        random_level: in [0, 1]; 0 = best load balance, 1 = fully random order (needs ``shuffle``).

    Example:
        >>> episodes = [list(range(n)) for n in (5, 80, 7, 300, 42, 9)]
        >>> sampler = LoadBalancingDistributedSampler(episodes, complexity_fn=len, num_replicas=2, rank=0)
        >>> loader = torch.utils.data.DataLoader(episodes, sampler=sampler, batch_size=None)
        >>> for epoch in range(3):
        ...     sampler.set_epoch(epoch)
        ...     for episode in loader:
        ...         pass
    """

    def __init__(
        self,
        dataset: Any,
        complexity_fn: Callable[[Any], float],
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
        random_level: float = 0,
    ) -> None:
        if not callable(complexity_fn):
            raise TypeError(f"complexity_fn must be callable, got {complexity_fn!r}")
        if not hasattr(dataset, "__len__") or not hasattr(dataset, "__getitem__"):
            raise TypeError(f"dataset must support len() and indexing, got {type(dataset).__name__}")
        if num_replicas is None or rank is None:
            world_size, world_rank = _default_world()
            num_replicas = world_size if num_replicas is None else num_replicas
            rank = world_rank if rank is None else rank
        num_replicas = _check_int("num_replicas", num_replicas)
        rank = _check_int("rank", rank)
        if num_replicas < 1:
            raise ValueError(f"num_replicas must be >= 1, got {num_replicas}")
        if not 0 <= rank < num_replicas:
            raise ValueError(f"rank must be in [0, {num_replicas - 1}] for num_replicas={num_replicas}, got {rank}")
        if isinstance(random_level, bool) or not isinstance(random_level, Real):
            raise TypeError(f"random_level must be a number in [0, 1], got {random_level!r}")
        if not 0 <= random_level <= 1:
            raise ValueError(f"random_level must be in [0, 1], got {random_level}")
        if random_level > 0 and not shuffle:
            raise ValueError(f"random_level={random_level} needs shuffle=True (without shuffle it has no effect)")
        self.num_replicas = num_replicas
        self.rank = rank
        self.shuffle = bool(shuffle)
        self.seed = _check_int("seed", seed)
        self.drop_last = bool(drop_last)
        self.random_level = float(random_level)
        self.epoch = 0

        complexities = np.empty(len(dataset), dtype=np.float64)
        for i in range(len(dataset)):
            value = complexity_fn(dataset[i])
            try:
                complexities[i] = value
            except (TypeError, ValueError):
                raise TypeError(f"complexity_fn must return a number, got {value!r} for sample {i}") from None
            if not math.isfinite(complexities[i]):
                raise ValueError(f"complexity_fn must return a finite number, got {value!r} for sample {i}")
        complexities.flags.writeable = False
        self.complexities = complexities
        # Fraction of the dataset with a smaller complexity (ties share one value), in [0, 1].
        by_value = np.sort(complexities)
        self._quantile = np.searchsorted(by_value, complexities, side="left") / max(len(complexities) - 1, 1)

        n = len(complexities)
        if self.drop_last:
            self.num_samples = n // num_replicas
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas

    def __len__(self) -> int:
        return self.num_samples

    def __iter__(self):
        return iter(self.replica_indices()[self.rank])

    def set_epoch(self, epoch: int) -> None:
        """Set the epoch; with ``shuffle`` each epoch has its own order, identical on all replicas.

        Example:
            >>> sampler.set_epoch(3)
        """
        self.epoch = _check_int("epoch", epoch)

    def replica_indices(self) -> list[list[int]]:
        """This epoch's index list of every replica (``[rank][position]``); all lists have equal length.

        Example:
            >>> plan = sampler.replica_indices()
            >>> plan[sampler.rank] == list(sampler)
            True
        """
        return self._assignment().T.tolist()

    def _assignment(self) -> np.ndarray:
        """Array ``[chunk, rank]`` of dataset indices for the current epoch."""
        replicas = self.num_replicas
        if self.total_size == 0:
            return np.empty((0, replicas), dtype=np.int64)
        n = len(self.complexities)
        gen = torch.Generator()
        gen.manual_seed(self.seed + self.epoch)
        if self.drop_last and self.total_size < n:
            if self.shuffle:
                keep = torch.randperm(n, generator=gen).numpy()[: self.total_size]
            else:
                keep = np.arange(self.total_size)
        else:
            keep = np.arange(n)
        values = self.complexities[keep]
        if self.shuffle:
            # Complexity quantile blended with uniform noise; random tie-breaking.
            noise = torch.rand(len(values), generator=gen, dtype=torch.float64).numpy()
            key = (1.0 - self.random_level) * self._quantile[keep] + self.random_level * noise
            tie_break = torch.randperm(len(values), generator=gen).numpy()
            ordered = keep[np.lexsort((tie_break, key))]
        else:
            ordered = keep[np.argsort(values, kind="stable")]
        if len(ordered) < self.total_size:  # pad the last chunk with repeats of its own samples
            tail = ordered[(len(ordered) // replicas) * replicas :]
            ordered = np.concatenate([ordered, np.resize(tail, self.total_size - len(ordered))])
        assignment = self._balance(ordered.reshape(-1, replicas))
        if self.shuffle:
            assignment = assignment[torch.randperm(len(assignment), generator=gen).numpy()]
        return assignment

    def _balance(self, chunks: np.ndarray) -> np.ndarray:
        """Assign each chunk's samples to ranks so that the ranks' totals stay close.

        The widest ``_GREEDY_CHUNKS`` chunks are placed greedily, widest first (largest sample to the
        rank with the smallest running total), which keeps the spread of the totals within one chunk's
        width. Narrower chunks, placed before them, rotate which rank gets which position (vectorized).
        """
        replicas = chunks.shape[1]
        if replicas == 1:
            return chunks
        values = self.complexities[chunks]
        desc = np.argsort(-values, axis=1, kind="stable")
        chunks = np.take_along_axis(chunks, desc, axis=1)  # within a chunk: largest first
        values = np.take_along_axis(values, desc, axis=1)
        width = values[:, 0] - values[:, -1]
        # Chunks of equal values add the same to every rank; only the others need placing.
        varied = np.flatnonzero(width > 0)
        varied = varied[np.argsort(-width[varied], kind="stable")]
        greedy, rotated = varied[:_GREEDY_CHUNKS], varied[_GREEDY_CHUNKS:]
        totals = np.zeros(replicas)
        if len(rotated):
            ranks = (np.arange(replicas)[None, :] + np.arange(len(rotated))[:, None]) % replicas
            placed = np.empty((len(rotated), replicas), dtype=chunks.dtype)
            np.put_along_axis(placed, ranks, chunks[rotated], axis=1)
            totals = np.bincount(ranks.ravel(), weights=values[rotated].ravel(), minlength=replicas)
            chunks[rotated] = placed
        sums = totals.tolist()
        rows = []
        for idx_row, value_row in zip(chunks[greedy].tolist(), values[greedy].tolist()):
            row = [0] * replicas
            for position, rank in enumerate(sorted(range(replicas), key=sums.__getitem__)):
                row[rank] = idx_row[position]
                sums[rank] += value_row[position]
            rows.append(row)
        if rows:
            chunks[greedy] = np.asarray(rows, dtype=chunks.dtype)
        return chunks


class LoadBalancingDistributedBatchSampler(Sampler[list[int]]):
    """Group a :class:`LoadBalancingDistributedSampler`'s indices into variable-size batches.

    ``batch_fn(indices: list[int]) -> list[list[int]]`` splits one replica's epoch into batches (e.g. by a
    budget of transitions). Every replica runs it on every replica's indices (no communication), so all
    replicas yield the same number of batches: with ``drop_last`` each stops at the smallest count,
    otherwise the shorter ones repeat their own first batches until they reach the largest count.

    Example:
        >>> def batch_fn(indices):  # batches of up to 500 transitions
        ...     batches, current, budget = [], [], 0
        ...     for i in indices:
        ...         if current and budget + len(episodes[i]) > 500:
        ...             batches.append(current)
        ...             current, budget = [], 0
        ...         current.append(i)
        ...         budget += len(episodes[i])
        ...     return batches + ([current] if current else [])
        >>> batch_sampler = LoadBalancingDistributedBatchSampler(sampler, batch_fn=batch_fn)
        >>> loader = torch.utils.data.DataLoader(episodes, batch_sampler=batch_sampler, collate_fn=list)
        >>> for epoch in range(3):
        ...     batch_sampler.set_epoch(epoch)
        ...     for batch in loader:
        ...         pass
    """

    def __init__(
        self,
        sampler: LoadBalancingDistributedSampler,
        batch_fn: Callable[[list[int]], Sequence[Sequence[int]]],
        drop_last: bool = False,
    ) -> None:
        if not isinstance(sampler, LoadBalancingDistributedSampler):
            raise TypeError(f"sampler must be a LoadBalancingDistributedSampler, got {type(sampler).__name__}")
        if not callable(batch_fn):
            raise TypeError(f"batch_fn must be callable, got {batch_fn!r}")
        self.sampler = sampler
        self.batch_fn = batch_fn
        self.drop_last = bool(drop_last)
        self._cache: tuple[tuple[int, int], list[list[int]]] | None = None

    def set_epoch(self, epoch: int) -> None:
        """Set the epoch of the wrapped sampler (call at the start of every epoch).

        Example:
            >>> batch_sampler.set_epoch(3)
        """
        self.sampler.set_epoch(epoch)

    def generate_batches(self) -> list[list[int]]:
        """This replica's batches for the current epoch (same count on every replica).

        Example:
            >>> batches = batch_sampler.generate_batches()
        """
        key = (self.sampler.epoch, self.sampler.rank)
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1]
        per_replica = [self._batches_of(indices) for indices in self.sampler.replica_indices()]
        counts = [len(batches) for batches in per_replica]
        target = min(counts) if self.drop_last else max(counts)
        mine = per_replica[self.sampler.rank]
        if len(mine) >= target:
            mine = mine[:target]
        else:  # not drop_last, so mine is non-empty (checked in _batches_of)
            mine = mine + [mine[i % len(mine)] for i in range(target - len(mine))]
        self._cache = (key, mine)
        return mine

    def __iter__(self):
        return iter(self.generate_batches())

    def __len__(self) -> int:
        return len(self.generate_batches())

    def _batches_of(self, indices: list[int]) -> list[list[int]]:
        batches = self.batch_fn(indices)
        if isinstance(batches, (str, bytes)) or not isinstance(batches, Sequence):
            raise TypeError(f"batch_fn must return a list of lists of indices, got {type(batches).__name__}")
        allowed = set(indices)
        out = []
        for batch in batches:
            batch = list(batch)
            if not batch:
                raise ValueError("batch_fn returned an empty batch; every batch needs at least one index")
            unknown = [i for i in batch if i not in allowed]
            if unknown:
                raise ValueError(f"batch_fn returned indices {unknown[:5]} that were not in its input")
            out.append(batch)
        if indices and not out:
            raise ValueError(f"batch_fn returned no batches for {len(indices)} indices")
        return out
