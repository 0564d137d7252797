"""Replay buffer for off-policy learning: a numpy ring buffer over vector-env streams, with n-step returns.

Storage is laid out ``[rows, num_envs, ...]``: each call to :meth:`ReplayBuffer.add` writes one row,
one transition per vector-env slot, so each slot's transitions stay in time order and n-step returns
can be computed at sample time without crossing episodes or envs. Each row also stores the real next
observation (for a finished episode: the final observation, not the reset one), so no transition
needs its successor row to be bootstrapped.

A sampled n-step transition starting at row ``t`` sums ``gamma**k * r[t+k]`` for ``k < m``, where ``m``
is ``n_step`` or fewer when the episode ends first (terminated or truncated) or the newest row is
reached. It returns ``next_obs`` at row ``t+m-1`` and ``discount = gamma**m`` (0 when that last step
terminated), so every learner computes its target as ``reward + discount * V(next_obs)``: truncation
bootstraps, termination does not.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

__all__ = ["ReplayBuffer", "as_tensors", "to_device"]

_FIELDS = ("obs", "action", "reward", "next_obs", "terminated", "truncated")


class RowRing:
    """What both replay buffers share: rows of ``num_envs`` transitions in a ring, uniform n-step sampling.

    A subclass keeps ``reward``, ``terminated`` and ``truncated`` arrays of shape ``[rows_capacity, num_envs]``
    in ``self._data``, stores the rest its own way (:class:`ReplayBuffer`: every field;
    :class:`~ding_dist.data.frame_replay.FrameReplayBuffer`: each frame once) and defines
    ``add(obs, action, reward, next_obs, terminated, truncated)``, which counts the filled rows in ``_rows``.
    """

    def __init__(
        self,
        capacity: int,
        obs_shape: tuple[int, ...],
        action_shape: tuple[int, ...],
        num_envs: int,
        n_step: int,
        gamma: float,
        seed: int | None,
    ) -> None:
        if int(capacity) < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        if int(num_envs) < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        if int(n_step) < 1:
            raise ValueError(f"n_step must be >= 1, got {n_step}")
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(f"gamma must be in [0, 1], got {gamma}")
        self.num_envs = int(num_envs)
        self.rows_capacity = math.ceil(int(capacity) / self.num_envs)
        self.n_step = int(n_step)
        self.gamma = float(gamma)
        self.obs_shape = tuple(obs_shape)
        self.action_shape = tuple(action_shape)
        self._data: dict[str, np.ndarray] = {}
        self._rows = 0  # rows filled so far (<= rows_capacity)
        self._rng = np.random.default_rng(seed)
        self._gamma_powers = np.array([self.gamma**k for k in range(self.n_step)], dtype=np.float32)

    @property
    def capacity(self) -> int:
        """Total transitions the buffer holds when full."""
        return self.rows_capacity * self.num_envs

    def __len__(self) -> int:
        return self._rows * self.num_envs

    def cut_streams(self) -> None:
        """Mark each slot's newest transition truncated unless it terminated: the slot's env stream was cut there
        (a resumed run's envs start new episodes), so no n-step return sums across into the next episode.

        Example::

            buf.load_state_dict(saved)
            buf.cut_streams()  # the envs that feed it from now on were reset
        """
        if self._rows:
            row = (self._oldest() + self._rows - 1) % self.rows_capacity
            self._data["truncated"][row] |= ~self._data["terminated"][row]

    def extend(self, rollout: Mapping[str, np.ndarray]) -> None:
        """Add every row of a rollout whose fields have shape ``[T, num_envs, ...]`` (see the collector)."""
        for t in range(len(rollout["reward"])):
            self.add(*(rollout[name][t] for name in _FIELDS))

    def _draw_n_step(self, batch_size: int, oldest: int) -> dict[str, np.ndarray]:
        """Draw ``batch_size`` transitions uniformly and sum their n-step returns (see the module docstring).

        ``oldest`` is the oldest row, counted so that ``row % rows_capacity`` indexes the arrays. Returns the
        slots ``env``, the first and last rows ``start`` and ``last`` (same counting, not reduced), the
        discounted ``reward`` sum and ``discount`` (``gamma**m``, 0 when the last step terminated).
        """
        if self._rows == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        if int(batch_size) < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        offset = self._rng.integers(0, self._rows, size=batch_size)  # age rank, 0 = oldest row
        env = self._rng.integers(0, self.num_envs, size=batch_size)
        return self._n_step_at(oldest, offset, env)

    def _n_step_at(self, oldest: int, offset: np.ndarray, env: np.ndarray) -> dict[str, np.ndarray]:
        """The n-step returns of the transitions ``offset`` rows after ``oldest`` in slots ``env`` (as
        :meth:`_draw_n_step`, which draws them uniformly; the prioritized buffer draws them by priority).

        All ``n_step`` rows of every transition are read at once (``[batch, n_step]``): step ``k`` counts when it is
        stored and no earlier step of the transition ended its episode, so the counted steps are a prefix."""
        cap, d = self.rows_capacity, self._data
        start = oldest + offset
        if self.n_step == 1:  # one step: always stored, nothing to cut short
            row = start % cap
            discount = (self.gamma * ~d["terminated"][row, env]).astype(np.float32)
            reward = d["reward"][row, env].astype(np.float32, copy=False)
            return {"env": env, "start": start, "last": start, "reward": reward, "discount": discount}
        k = np.arange(self.n_step)
        rows, envs = (start[:, None] + k) % cap, env[:, None]
        counted = k < (self._rows - offset)[:, None]  # stored: at most the newest row
        ended = d["terminated"][rows[:, :-1], envs] | d["truncated"][rows[:, :-1], envs]
        counted[:, 1:] &= ~np.logical_or.accumulate(ended, axis=1)
        # each step's discounted reward in float32 (gamma**k rounded to float32), summed in float64 in step order
        scaled = np.where(counted, d["reward"][rows, envs] * self._gamma_powers, np.float32(0.0))
        steps = counted.sum(axis=1)
        last = start + steps - 1
        discount = self.gamma**steps * (~d["terminated"][last % cap, env])
        return {
            "env": env,
            "start": start,
            "last": last,
            "reward": scaled.sum(axis=1, dtype=np.float64).astype(np.float32),
            "discount": discount.astype(np.float32),
        }

    def _shape(self) -> tuple[int, int, tuple[int, ...], tuple[int, ...]]:
        return (self.rows_capacity, self.num_envs, self.obs_shape, self.action_shape)

    def _check_shape(self, state: Mapping[str, Any]) -> None:
        """Refuse a :meth:`state_dict` of a buffer with other shapes."""
        rows, envs, obs, action = state["shape"]
        if (rows, envs, tuple(obs), tuple(action)) != self._shape():
            raise ValueError(
                f"replay state has (rows, num_envs, obs_shape, action_shape) = {tuple(state['shape'])}, "
                f"this buffer {self._shape()}"
            )


def as_tensors(arrays: Mapping[str, np.ndarray], device: str | torch.device) -> dict[str, torch.Tensor]:
    """Sampled arrays as tensors on ``device`` (:func:`to_device` each).

    Example::

        as_tensors({"reward": np.zeros(32, np.float32)}, "cpu")["reward"].shape  # torch.Size([32])
    """
    cuda = torch.device(device).type == "cuda"
    return {k: to_device(torch.from_numpy(np.ascontiguousarray(v)), device, cuda) for k, v in arrays.items()}


def to_device(tensor: torch.Tensor, device: str | torch.device, cuda: bool | None = None) -> torch.Tensor:
    """A host ``tensor`` on ``device``. To a CUDA device it goes through pinned memory with a non-blocking copy, so
    the host does not wait for the work the device still has queued (a plain copy from pageable memory synchronizes
    the stream first); the copy is ordered before whatever later uses the tensor on that stream. ``cuda``: whether
    ``device`` is a CUDA device, when the caller knows.

    Example::

        weights = to_device(torch.ones(32), "cuda")  # returns before the device has run its queued update
    """
    if cuda is None:
        cuda = torch.device(device).type == "cuda"
    if cuda:
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor.to(device)


class ReplayBuffer(RowRing):
    """Ring buffer of transitions from ``num_envs`` parallel env slots, sampled uniformly as tensors.

    Args:
        capacity: total transitions kept (rounded up to a multiple of ``num_envs``); oldest are overwritten.
        obs_shape / obs_dtype: shape and dtype of one observation.
        action_shape / action_dtype: shape (``()`` for discrete) and dtype of one action.
        num_envs: vector-env slots written per :meth:`add` call.
        n_step: steps summed into each sampled return (1: plain one-step TD).
        gamma: discount factor used for n-step returns and ``discount``.
        seed: seed of the sampling generator.

    Example::

        buf = ReplayBuffer(10_000, obs_shape=(4,), num_envs=8, n_step=3, gamma=0.99, seed=0)
        buf.add(obs, actions, rewards, next_obs, terminated, truncated)  # arrays with leading dim 8
        batch = buf.sample(64)  # dict of tensors: obs, action, reward, next_obs, discount
    """

    def __init__(
        self,
        capacity: int,
        obs_shape: tuple[int, ...],
        *,
        action_shape: tuple[int, ...] = (),
        obs_dtype: Any = np.float32,
        action_dtype: Any = np.int64,
        num_envs: int = 1,
        n_step: int = 1,
        gamma: float = 0.99,
        seed: int | None = None,
    ) -> None:
        super().__init__(capacity, obs_shape, action_shape, num_envs, n_step, gamma, seed)
        shape = (self.rows_capacity, self.num_envs)
        self._data = {
            "obs": np.zeros(shape + self.obs_shape, dtype=obs_dtype),
            "action": np.zeros(shape + self.action_shape, dtype=action_dtype),
            "reward": np.zeros(shape, dtype=np.float32),
            "next_obs": np.zeros(shape + self.obs_shape, dtype=obs_dtype),
            "terminated": np.zeros(shape, dtype=bool),
            "truncated": np.zeros(shape, dtype=bool),
        }
        self._pos = 0  # next row to write

    def nbytes(self) -> int:
        """Bytes held by the stored arrays (allocated for the full capacity)."""
        return sum(v.nbytes for v in self._data.values())

    def add(
        self,
        obs: np.ndarray,
        action: np.ndarray,
        reward: np.ndarray,
        next_obs: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
    ) -> None:
        """Write one transition per env slot (each argument has leading dimension ``num_envs``)."""
        values = dict(zip(_FIELDS, (obs, action, reward, next_obs, terminated, truncated)))
        for name, value in values.items():
            value = np.asarray(value)
            expected = self._data[name].shape[1:]
            if value.shape != expected:
                raise ValueError(f"replay field {name!r} must have shape {expected}, got {value.shape}")
            self._data[name][self._pos] = value
        self._pos = (self._pos + 1) % self.rows_capacity
        self._rows = min(self._rows + 1, self.rows_capacity)

    def sample(self, batch_size: int, device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
        """``batch_size`` uniformly drawn n-step transitions as tensors on ``device``.

        Keys: ``obs``, ``action``, ``reward`` (discounted n-step sum), ``next_obs`` (observation to
        bootstrap from), ``discount`` (``gamma**m``, 0 after termination).
        """
        return as_tensors(self._gather(self._draw_n_step(batch_size, self._oldest())), device)

    def _oldest(self) -> int:
        """The oldest stored row (``row % rows_capacity`` indexes the arrays)."""
        return self._pos if self._rows == self.rows_capacity else 0

    def _gather(self, drawn: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The sampled fields of the transitions :meth:`_n_step_at` described."""
        cap, d = self.rows_capacity, self._data
        start, last, env = drawn["start"] % cap, drawn["last"] % cap, drawn["env"]
        return {
            "obs": d["obs"][start, env],
            "action": d["action"][start, env],
            "reward": drawn["reward"],
            "next_obs": d["next_obs"][last, env],
            "discount": drawn["discount"],
        }

    def state_dict(self) -> dict[str, Any]:
        """Stored rows, write position and sampler state, for checkpoints."""
        return {
            "data": {k: v[: self._rows].copy() for k, v in self._data.items()},
            "pos": self._pos,
            "rows": self._rows,
            "rng": self._rng.bit_generator.state,
            "shape": self._shape(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`; the buffer must have been built with the same shapes."""
        self._check_shape(state)
        rows = int(state["rows"])
        for k, v in state["data"].items():
            self._data[k][:rows] = v
        self._pos, self._rows = int(state["pos"]), rows
        if state.get("rng") is not None:  # None: a re-sharded state (ding_dist.data.reshard) keeps this sampler
            self._rng.bit_generator.state = state["rng"]
