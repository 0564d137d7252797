"""Frame-deduplicated replay for stacked pixel observations: each frame is stored once.

A frame-stacked observation ``obs_t`` of ``K`` frames shares ``K - 1`` frames with ``obs_{t-1}``, and
``next_obs_t`` is ``obs_{t+1}``. :class:`FrameReplayBuffer` therefore stores, per row and env slot, only
the newest frame of ``next_obs`` (``next_obs[-1]``), the step's index within its episode, and the
scalars; the ``K`` frames of an episode's first observation go to a small side table. Observations are
rebuilt exactly at sample time::

    obs_t[K-1-d] = frame[t-1-d]              if d < k_t  (k_t: steps since the episode started at row t-k_t)
                 = start_frames[t-k_t][K-1-d+k_t]   otherwise
    next_obs_t   = the same formula for row t+1 with k_t+1

The frame ring keeps ``K`` rows more than the transition ring so the oldest transition's frames are
still there. Per stored transition this is one frame plus ~14 bytes (plus ``K`` frames per episode):
about 1.003x one 84x84 frame. It has the API of :class:`~ding_dist.data.replay.ReplayBuffer` (n-step
returns are computed the same way).
"""

from __future__ import annotations

import collections
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from ding_dist.data.replay import ReplayBuffer, RowRing, as_tensors

__all__ = ["FrameReplayBuffer", "is_frame_stack_space", "replay_buffer_for"]


def is_frame_stack_space(space: gym.Space) -> bool:
    """A uint8 ``Box`` of stacked 2-D frames ``(K, H, W)`` with ``K > 1`` (e.g. 4 x 84 x 84 Atari). A 0/1 grid of
    object channels (MinAtar's ``(C, 10, 10)``, high 1) is not a frame stack: its channels are not shifted frames.

    Example::

        is_frame_stack_space(gym.spaces.Box(0, 255, (4, 84, 84), np.uint8))  # True
        is_frame_stack_space(gym.spaces.Box(0, 1, (4, 10, 10), np.uint8))  # False
    """
    return (
        isinstance(space, gym.spaces.Box)
        and space.dtype == np.uint8
        and len(space.shape) == 3
        and space.shape[0] > 1
        and int(np.max(space.high)) > 1
    )


def replay_buffer_for(
    obs_space: gym.Space, capacity: int, *, frame_dedup: bool | None = None, **kwargs: Any
) -> ReplayBuffer | FrameReplayBuffer:
    """The replay buffer for ``obs_space``: :class:`FrameReplayBuffer` for frame stacks (``frame_dedup``
    None: automatic; True: required; False: never), else :class:`ReplayBuffer` (uint8 images kept uint8).

    ``kwargs`` are ReplayBuffer's keyword arguments except ``obs_dtype``.

    Example::

        buf = replay_buffer_for(venv.single_observation_space, 100_000, num_envs=8, n_step=3, gamma=0.99, seed=0)
    """
    stacked = is_frame_stack_space(obs_space)
    if frame_dedup and not stacked:
        raise ValueError(f"replay_buffer.frame_dedup=True needs uint8 stacked frames (K, H, W), got {obs_space}")
    if stacked and frame_dedup is not False:
        return FrameReplayBuffer(capacity, obs_space.shape, **kwargs)
    dtype = np.uint8 if getattr(obs_space, "dtype", None) == np.uint8 else np.float32
    return ReplayBuffer(capacity, obs_space.shape, obs_dtype=dtype, **kwargs)


class FrameReplayBuffer(RowRing):
    """Ring buffer of frame-stacked transitions that stores each frame once; API of ``ReplayBuffer``.

    Args: as :class:`~ding_dist.data.replay.ReplayBuffer`; ``obs_shape`` is ``(K, H, W)``, uint8.
    ``add`` checks that ``next_obs`` is ``obs`` shifted by one frame (a frame stack) and detects an
    episode start when ``obs`` is not the slot's previous ``next_obs`` or the previous step ended.

    Example::

        buf = FrameReplayBuffer(1_000_000, (4, 84, 84), num_envs=8, n_step=3, gamma=0.99, seed=0)
        buf.extend(rollout)
        batch = buf.sample(32)  # obs / next_obs uint8 (32, 4, 84, 84)
    """

    def __init__(
        self,
        capacity: int,
        obs_shape: tuple[int, ...],
        *,
        action_shape: tuple[int, ...] = (),
        action_dtype: Any = np.int64,
        num_envs: int = 1,
        n_step: int = 1,
        gamma: float = 0.99,
        seed: int | None = None,
    ) -> None:
        if len(obs_shape) != 3 or obs_shape[0] < 2:
            raise ValueError(f"FrameReplayBuffer needs stacked frames (K >= 2, H, W), got obs_shape {obs_shape}")
        super().__init__(capacity, obs_shape, action_shape, num_envs, n_step, gamma, seed)
        self.stack = int(obs_shape[0])
        self._frame_rows = self.rows_capacity + self.stack  # the oldest transition's K earlier frames stay
        shape = (self.rows_capacity, self.num_envs)
        self._frames = np.zeros((self._frame_rows, self.num_envs, *obs_shape[1:]), dtype=np.uint8)
        self._data = {
            "action": np.zeros(shape + self.action_shape, dtype=action_dtype),
            "reward": np.zeros(shape, dtype=np.float32),
            "terminated": np.zeros(shape, dtype=bool),
            "truncated": np.zeros(shape, dtype=bool),
            "ep_step": np.zeros(shape, dtype=np.int32),  # steps since the episode started (capped at K)
        }
        self._starts: dict[tuple[int, int], np.ndarray] = {}  # (absolute row, env) -> first obs (K frames)
        self._start_order: collections.deque[tuple[int, int]] = collections.deque()
        self._total = 0  # rows ever written (absolute index of the next row)
        self._last_next = np.zeros((self.num_envs, *obs_shape), dtype=np.uint8)
        self._ended = np.ones(self.num_envs, dtype=bool)  # the slot's previous step ended an episode (or none yet)

    def nbytes(self) -> int:
        """Bytes held by the stored arrays (frames, scalars, episode-start frames)."""
        return (
            self._frames.nbytes
            + sum(v.nbytes for v in self._data.values())
            + sum(v.nbytes for v in self._starts.values())
            + self._last_next.nbytes
        )

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
        obs, next_obs = np.asarray(obs), np.asarray(next_obs)
        expected = (self.num_envs, *self.obs_shape)
        for name, v in (("obs", obs), ("next_obs", next_obs)):
            if v.shape != expected:
                raise ValueError(f"replay field {name!r} must have shape {expected}, got {v.shape}")
        if not np.array_equal(next_obs[:, :-1], obs[:, 1:]):
            raise ValueError(
                "next_obs is not obs shifted by one frame: FrameReplayBuffer needs frame-stacked observations"
            )
        scalars = {"action": action, "reward": reward, "terminated": terminated, "truncated": truncated}
        for name, value in scalars.items():
            value = np.asarray(value)
            if value.shape != self._data[name].shape[1:]:
                raise ValueError(
                    f"replay field {name!r} must have shape {self._data[name].shape[1:]}, got {value.shape}"
                )
        row, absolute = self._total % self.rows_capacity, self._total
        prev_row = (self._total - 1) % self.rows_capacity
        for e in range(self.num_envs):
            if self._ended[e] or not np.array_equal(obs[e], self._last_next[e]):
                self._starts[(absolute, e)] = obs[e].copy()
                self._start_order.append((absolute, e))
                step = 0
            else:
                step = min(int(self._data["ep_step"][prev_row, e]) + 1, self.stack)
            self._data["ep_step"][row, e] = step
        for name, value in scalars.items():
            self._data[name][row] = value
        self._frames[absolute % self._frame_rows] = next_obs[:, -1]
        self._last_next[:] = next_obs
        self._ended = np.asarray(terminated, dtype=bool) | np.asarray(truncated, dtype=bool)
        self._total += 1
        self._rows = min(self._rows + 1, self.rows_capacity)
        oldest_needed = self._total - self.rows_capacity - self.stack
        while self._start_order and self._start_order[0][0] < oldest_needed:
            del self._starts[self._start_order.popleft()]

    def _stacked(self, absolute: np.ndarray, k: np.ndarray, env: np.ndarray) -> np.ndarray:
        """Observations at absolute rows ``absolute`` whose episode step is ``k`` (see the module docstring)."""
        K = self.stack
        d = np.arange(K)[::-1]  # output frame j = K-1-d
        src = absolute[:, None] - 1 - d[None, :]
        out = self._frames[src % self._frame_rows, env[:, None]]
        from_start = d[None, :] >= k[:, None]
        for b in np.flatnonzero(from_start.any(axis=1)):
            first = self._starts[(int(absolute[b] - k[b]), int(env[b]))]
            cols = np.flatnonzero(from_start[b])
            out[b, cols] = first[K - 1 - d[cols] + k[b]]
        return out

    def sample(self, batch_size: int, device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
        """``batch_size`` uniformly drawn n-step transitions as tensors on ``device`` (as ``ReplayBuffer``)."""
        return as_tensors(self._gather(self._draw_n_step(batch_size, self._oldest())), device)

    def _oldest(self) -> int:
        """The oldest stored row, absolute (``row % rows_capacity`` indexes the arrays)."""
        return self._total - self._rows

    def _gather(self, drawn: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The sampled fields (observations rebuilt from frames) of the transitions ``drawn`` describes."""
        cap, d = self.rows_capacity, self._data
        start_abs, last_abs, env = drawn["start"], drawn["last"], drawn["env"]
        k_start = d["ep_step"][start_abs % cap, env].astype(np.int64)
        k_last = d["ep_step"][last_abs % cap, env].astype(np.int64)
        return {
            "obs": self._stacked(start_abs, k_start, env),
            "action": d["action"][start_abs % cap, env],
            "reward": drawn["reward"],
            "next_obs": self._stacked(last_abs + 1, k_last + 1, env),
            "discount": drawn["discount"],
        }

    def state_dict(self) -> dict[str, Any]:
        """Stored frames and rows, write position and sampler state, for checkpoints."""
        return {
            "frames": self._frames.copy(),
            "data": {k: v.copy() for k, v in self._data.items()},
            "starts": {k: v.copy() for k, v in self._starts.items()},
            "start_order": list(self._start_order),
            "total": self._total,
            "rows": self._rows,
            "last_next": self._last_next.copy(),
            "ended": self._ended.copy(),
            "rng": self._rng.bit_generator.state,
            "shape": self._shape(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`; the buffer must have been built with the same shapes."""
        self._check_shape(state)
        self._frames[:] = state["frames"]
        for k, v in state["data"].items():
            self._data[k][:] = v
        self._starts = {tuple(k): np.asarray(v) for k, v in state["starts"].items()}
        self._start_order = collections.deque(tuple(k) for k in state["start_order"])
        self._total, self._rows = int(state["total"]), int(state["rows"])
        self._last_next[:] = state["last_next"]
        self._ended[:] = state["ended"]
        self._rng.bit_generator.state = state["rng"]
