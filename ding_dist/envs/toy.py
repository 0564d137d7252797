"""A tiny image env that needs no ROMs: four stacked uint8 frames, as Atari's preprocessing gives.

For tests and the GPU check: the image policies (Nature-CNN, uint8 scaled on the device, the frame
replay) see Atari's shapes and dtype on machines without ale-py.

Example::

    env = make_env(None, entry_point="ding_dist.envs.toy:FrameStackEnv", env_kwargs={"side": 36})
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

__all__ = ["FrameStackEnv"]


class FrameStackEnv(gym.Env):
    """Four stacked ``side x side`` uint8 frames (84 x 84 in Atari; 36 is the Nature-CNN's smallest input).

    Each step pushes a noise frame whose brightness names the rewarded action (reward 1 for it, else 0);
    episodes terminate at random, with probability ``end_p`` a step.

    Example::

        env = FrameStackEnv(side=36)
        obs, _ = env.reset(seed=0)   # obs.shape == (4, 36, 36), uint8
    """

    action_space = gym.spaces.Discrete(3)

    def __init__(self, side: int = 84, end_p: float = 0.05) -> None:
        if isinstance(side, bool) or not isinstance(side, int) or side < 1:
            raise ValueError(f"side must be an int >= 1, got {side!r}")
        if not 0.0 <= end_p <= 1.0:
            raise ValueError(f"end_p must be in [0, 1], got {end_p!r}")
        self.side, self.end_p = side, float(end_p)
        self.observation_space = gym.spaces.Box(0, 255, (4, side, side), np.uint8)

    def _push(self) -> np.ndarray:
        self._target = int(self.np_random.integers(3))
        frame = self.np_random.integers(0, 85, (self.side, self.side), dtype=np.uint8) + np.uint8(85 * self._target)
        self._frames = np.concatenate([self._frames[1:], frame[None]])
        return self._frames.copy()

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._frames = np.zeros(self.observation_space.shape, np.uint8)
        return self._push(), {}

    def step(self, action):
        reward = float(int(action) == self._target)
        return self._push(), reward, bool(self.np_random.random() < self.end_p), False, {}
