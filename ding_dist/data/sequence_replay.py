"""Sequence replay for recurrent policies (R2D2, Kapturowski et al. 2019): fixed-length sequences, prioritized.

Each env slot's stream of steps (rollouts ``[T, num_envs, ...]`` as the collector yields them, one after the other)
is cut into sequences of ``seq_len`` steps; consecutive sequences of one episode share ``overlap`` steps (a new
one starts every ``seq_len - overlap`` steps), across rollout (chunk) boundaries. An episode's end closes its
sequence early: the steps after it are padding (``mask`` False), and the next sequence starts at the next
episode's first step. Each sequence keeps the recurrent state at its first step (the policy's collect extras
named by ``state_keys``, e.g. ``h`` and ``c``) and its burn-in length: ``burnin`` steps, or 0 for a sequence that
starts an episode (its zero start state is exact); a sequence with no step left to learn after its burn-in is
not stored.

A stored sequence of ``v`` valid steps holds ``obs [seq_len + 1, ...]`` (positions ``0..v-1`` the observations,
position ``v`` the next observation of the last valid step, to bootstrap from), ``action, reward, terminated,
mask [seq_len]``, the start state and ``burnin``. Sequences are drawn by priority over a
:class:`~ding_dist.data.prioritized.SumMinTree` (as :class:`~ding_dist.data.prioritized.PrioritizedReplayBuffer`
draws transitions: proportional, stratified, importance weights normalized by the largest); a sequence's
priority is :func:`sequence_priority` of its TD errors; new sequences enter with the largest priority so far.
``alpha=0`` samples uniformly (every weight 1).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from ding_dist.data.prioritized import DeferredPriorities
from ding_dist.data.replay import as_tensors, to_device

__all__ = ["SequenceReplayBuffer", "sequence_priority"]


def sequence_priority(td: torch.Tensor, mask: torch.Tensor, eta: float = 0.9) -> torch.Tensor:
    """R2D2's priority of each sequence: ``eta * max|d| + (1 - eta) * mean|d|`` over its steps where ``mask``
    (``td``, ``mask``: ``[B, L]``); 0 for a sequence with no such step.

    Example::

        sequence_priority(torch.tensor([[1.0, 3.0]]), torch.tensor([[True, True]]))  # tensor([2.9000])
    """
    td, mask = td.abs(), mask.bool()
    count = mask.sum(1)
    mean = (td * mask).sum(1) / count.clamp(min=1)
    top = torch.where(mask, td, torch.zeros_like(td)).amax(1)
    return torch.where(count > 0, eta * top + (1.0 - eta) * mean, torch.zeros_like(mean))


#: Rows a sequence replay allocates first (then doubling as sequences arrive).
_FIRST_ROWS = 64


class SequenceReplayBuffer(DeferredPriorities):
    """Prioritized replay of fixed-length sequences cut from each env slot's stream (see the module docstring).

    Args:
        capacity: steps kept (``ceil(capacity / seq_len)`` sequence slots); the oldest sequences are overwritten.
        obs_shape / obs_dtype, action_shape / action_dtype: one observation's and one action's.
        num_envs: env slots per row of the rollouts given to :meth:`add`.
        state_shapes: the rollout fields holding the recurrent state at each step, with their per-slot shapes.
        seq_len / burnin / overlap: steps per sequence (burn-in prefix included), burn-in steps, shared steps.
        alpha / beta / anneal_step / eps: as :class:`~ding_dist.data.prioritized.PrioritizedReplayBuffer`.
        seed: seed of the sampling generator.

    Example::

        buf = SequenceReplayBuffer(10_000, (4,), num_envs=8, state_shapes={"h": (64,), "c": (64,)}, seq_len=20,
                                   burnin=4, overlap=10, seed=0)
        buf.add(rollout)  # obs, action, reward, next_obs, terminated, truncated, h, c: [T, 8, ...]
        batch, weights, index = buf.sample(16)  # batch["obs"]: (16, 21, 4); batch["h"]: (16, 64)
        buf.update_priorities(index, priority)  # e.g. R2D2Policy.learn's stats["priority"]
    """

    prioritized = True  # sample() returns (batch, weights, indices), as PrioritizedReplayBuffer's

    def __init__(
        self,
        capacity: int,
        obs_shape: tuple[int, ...],
        *,
        obs_dtype: Any = np.float32,
        action_shape: tuple[int, ...] = (),
        action_dtype: Any = np.int64,
        num_envs: int = 1,
        state_shapes: Mapping[str, tuple[int, ...]] | None = None,
        seq_len: int = 80,
        burnin: int = 40,
        overlap: int = 40,
        alpha: float = 0.9,
        beta: float = 0.6,
        anneal_step: int = 0,
        eps: float = 1e-6,
        seed: int | None = None,
    ) -> None:
        if int(capacity) < 1 or int(num_envs) < 1:
            raise ValueError(f"capacity and num_envs must be >= 1, got {capacity} and {num_envs}")
        if not 0 <= int(burnin) < int(seq_len):
            raise ValueError(f"seq_len={seq_len} must be longer than burnin={burnin} (>= 0)")
        if not 0 <= int(overlap) < int(seq_len):
            raise ValueError(f"overlap={overlap} must be in [0, seq_len={seq_len})")
        for name, value in (("alpha", alpha), ("beta", beta)):
            if not 0.0 <= float(value) <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {value}")
        if int(anneal_step) < 0 or not float(eps) > 0:
            raise ValueError(f"anneal_step must be >= 0 and eps > 0, got {anneal_step} and {eps}")
        self.seq_len, self.burnin, self.overlap = int(seq_len), int(burnin), int(overlap)
        self.num_envs = int(num_envs)
        self.slots = math.ceil(int(capacity) / self.seq_len)
        self.alpha, self.beta0, self.anneal_step, self.eps = float(alpha), float(beta), int(anneal_step), float(eps)
        self.obs_shape, self.action_shape = tuple(obs_shape), tuple(action_shape)
        self.state_shapes = {k: tuple(v) for k, v in (state_shapes or {}).items()}
        # Rows are allocated as sequences arrive (doubling, up to the slots): a large replay (DI-engine's Atari R2D2
        # files ask for 10000 sequences of 101 stacked frames, 26 GB) costs only what it holds.
        s, n = min(self.slots, _FIRST_ROWS), self.seq_len
        self._data: dict[str, np.ndarray] = {
            "obs": np.zeros((s, n + 1, *self.obs_shape), dtype=obs_dtype),
            "action": np.zeros((s, n, *self.action_shape), dtype=action_dtype),
            "reward": np.zeros((s, n), dtype=np.float32),
            "terminated": np.zeros((s, n), dtype=bool),
            "mask": np.zeros((s, n), dtype=bool),
            "burnin": np.zeros(s, dtype=np.int64),
            **{k: np.zeros((s, *shape), dtype=np.float32) for k, shape in self.state_shapes.items()},
        }
        self._init_priorities(self.slots)
        self.draws = 0
        self._pos = 0  # next slot written
        self._count = 0  # slots filled
        self._rng = np.random.default_rng(seed)
        self._open: list[list[dict[str, np.ndarray]]] = [[] for _ in range(self.num_envs)]  # each slot's open steps
        self._fresh = [True] * self.num_envs  # the open sequence starts an episode

    @property
    def capacity(self) -> int:
        """Sequence slots."""
        return self.slots

    def __len__(self) -> int:
        """Sequences stored."""
        return self._count

    def nbytes(self) -> int:
        """Bytes of the stored arrays and the priority trees."""
        return sum(v.nbytes for v in self._data.values()) + self.tree.nbytes()

    @property
    def rng(self) -> np.random.Generator:
        """The generator of the draws."""
        return self._rng

    @property
    def beta(self) -> float:
        """The importance-sampling exponent for the next draw."""
        if self.anneal_step == 0:
            return self.beta0
        return self.beta0 + (1.0 - self.beta0) * min(1.0, self.draws / self.anneal_step)

    # --- adding ------------------------------------------------------------------------------------------
    def add(self, rollout: Mapping[str, np.ndarray], priority: Any = None) -> None:
        """Append a rollout's steps (``obs, action, reward, next_obs, terminated, truncated`` and the state
        fields, ``[T, num_envs, ...]``) to each slot's stream; close and store the sequences they complete."""
        if priority is not None:
            raise ValueError("a sequence replay computes sequence priorities itself: add() takes no per-step priority")
        missing = [k for k in ("obs", "action", "reward", "next_obs", "terminated", "truncated", *self.state_shapes)
                   if k not in rollout]  # fmt: skip
        if missing:
            raise KeyError(f"rollout is missing {missing} (a recurrent policy's collect extras hold the state)")
        names = ("obs", "action", "reward", "next_obs", "terminated", "truncated", *self.state_shapes)
        arrays = {k: np.asarray(rollout[k]) for k in names}
        steps = len(arrays["reward"])
        for t in range(steps):
            for e in range(self.num_envs):
                step = {k: np.array(v[t, e]) for k, v in arrays.items()}  # copies: chunks reuse their buffers
                seq = self._open[e]
                seq.append(step)
                ended = bool(step["terminated"]) or bool(step["truncated"])
                if ended or len(seq) == self.seq_len:
                    self._store(seq, self._fresh[e])
                    if ended:
                        seq.clear()
                    else:
                        del seq[: self.seq_len - self.overlap]
                    self._fresh[e] = ended

    extend = add

    def _store(self, seq: list[dict[str, np.ndarray]], fresh: bool) -> None:
        burnin = 0 if fresh else self.burnin
        valid = len(seq)
        if valid <= burnin:  # nothing left to learn after the burn-in
            return
        slot = self._pos
        self._reserve(slot + 1)
        d = self._data
        for name in ("obs", "action", "reward", "terminated", "mask"):
            d[name][slot] = 0
        d["obs"][slot, :valid] = np.stack([s["obs"] for s in seq])
        d["obs"][slot, valid] = seq[-1]["next_obs"]
        d["action"][slot, :valid] = np.stack([s["action"] for s in seq])
        d["reward"][slot, :valid] = [float(s["reward"]) for s in seq]
        d["terminated"][slot, :valid] = [bool(s["terminated"]) for s in seq]
        d["mask"][slot, :valid] = True
        d["burnin"][slot] = burnin
        for k in self.state_shapes:
            d[k][slot] = seq[0][k]
        self.tree.update(np.array([slot]), np.array([self.max_priority**self.alpha]))
        self._pos = (slot + 1) % self.slots
        self._count = min(self._count + 1, self.slots)

    def _reserve(self, rows: int) -> None:
        """At least ``rows`` allocated rows (at most the slots): double, zero-filled."""
        have = len(self._data["burnin"])
        if rows <= have:
            return
        new = min(self.slots, max(rows, 2 * have))
        self._data = {
            k: np.concatenate([v, np.zeros((new - have, *v.shape[1:]), dtype=v.dtype)]) for k, v in self._data.items()
        }

    # --- sampling ----------------------------------------------------------------------------------------
    def sample_indices(self, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
        """Slots drawn by priority, one per equal segment of the priority mass, and their importance weights."""
        if self._count == 0:
            raise ValueError("cannot sample from an empty sequence replay buffer (no sequence is complete yet)")
        if int(batch_size) < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        total = self.tree.total
        u = (np.arange(batch_size) + self._rng.random(batch_size)) * (total / batch_size)
        index = self.tree.find(np.minimum(u, np.nextafter(total, 0.0)))
        weights = (self.tree.leaves(index) / self.tree.min) ** -self.beta
        self.draws += 1
        return index, weights

    def sample(
        self, batch_size: int, device: str | torch.device = "cpu"
    ) -> tuple[dict[str, torch.Tensor], torch.Tensor, np.ndarray]:
        """``batch_size`` sequences (keys ``obs [B, seq_len + 1, ...], action, reward, terminated, mask
        [B, seq_len], burnin [B]`` and the state fields ``[B, ...]``), their importance weights (float32 on
        ``device``) and their indices for :meth:`update_priorities`."""
        return self.gather(*self.sample_indices(batch_size), device)

    def gather(
        self, index: np.ndarray, weights: np.ndarray, device: str | torch.device = "cpu"
    ) -> tuple[dict[str, torch.Tensor], torch.Tensor, np.ndarray]:
        """The sequences at drawn ``index`` with their ``weights``, as :meth:`sample` returns them."""
        batch = as_tensors({k: v[index] for k, v in self._data.items()}, device)
        return batch, to_device(torch.as_tensor(weights, dtype=torch.float32), device), index

    def _index_count(self) -> int:
        return self._count

    # --- checkpoints -------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The stored sequences, their priorities and the counters (the slots' open sequences are not kept: a
        resumed run's collector starts new episodes)."""
        return {
            "shape": (self.slots, self.seq_len, self.obs_shape, self.action_shape),
            "data": {k: v.copy() for k, v in self._data.items()},
            "priorities": self.tree.state_dict()["leaves"],
            "max_priority": self.max_priority,
            "draws": self.draws,
            "pos": self._pos,
            "count": self._count,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` (same shapes); every slot's stream starts afresh."""
        slots, seq_len, obs, action = state["shape"]
        mine = (self.slots, self.seq_len, self.obs_shape, self.action_shape)
        if (slots, seq_len, tuple(obs), tuple(action)) != mine:
            raise ValueError(f"sequence replay state has (slots, seq_len, obs, action) = {state['shape']}, this {mine}")
        self._reserve(len(state["data"]["burnin"]))
        for k, v in self._data.items():
            given = np.asarray(state["data"][k])
            v[: len(given)] = given
            v[len(given) :] = 0
        self.tree.load_state_dict({"leaves": np.asarray(state["priorities"])})
        self.max_priority, self.draws = float(state["max_priority"]), int(state["draws"])
        self._pos, self._count = int(state["pos"]), int(state["count"])
        self._open = [[] for _ in range(self.num_envs)]
        self._fresh = [True] * self.num_envs
