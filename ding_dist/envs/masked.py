"""Partially observed envs: an observation wrapper that keeps only some components of a Box observation.

Importing this module registers ``MaskedCartPole-v1``: CartPole-v1 whose observation is only the cart position and
the pole angle (the two velocities are dropped), a task a memoryless policy cannot solve well and a recurrent one
(R2D2) can. A config selects it with ``env.id="ding_dist.envs.masked:MaskedCartPole-v1"`` (gymnasium's
``module:Id`` form imports the module first).

Example::

    env = make_env("ding_dist.envs.masked:MaskedCartPole-v1")
    obs, _ = env.reset(seed=0)  # shape (2,): position, angle
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

__all__ = ["KeepComponents", "masked_cartpole"]

#: CartPole's observation: position, velocity, angle, angular velocity; the masked task keeps these.
CARTPOLE_POSITIONS = (0, 2)


class KeepComponents(gym.ObservationWrapper):
    """Keep the components ``keep`` of a flat Box observation (the others are not observed).

    Example::

        env = KeepComponents(gym.make("CartPole-v1"), keep=(0, 2))
        env.observation_space.shape  # (2,)
    """

    def __init__(self, env: gym.Env, keep: Sequence[int]) -> None:
        super().__init__(env)
        space = env.observation_space
        if not isinstance(space, gym.spaces.Box) or len(space.shape) != 1:
            raise ValueError(f"KeepComponents needs a flat Box observation space, got {space}")
        self.keep = np.asarray(list(keep), dtype=np.int64)
        if self.keep.size == 0 or self.keep.min() < 0 or self.keep.max() >= space.shape[0]:
            raise ValueError(f"keep must name components in [0, {space.shape[0]}), got {list(keep)}")
        self.observation_space = gym.spaces.Box(space.low[self.keep], space.high[self.keep], dtype=space.dtype)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return np.asarray(observation)[self.keep]


def masked_cartpole(keep: Sequence[int] = CARTPOLE_POSITIONS, **kwargs: Any) -> gym.Env:
    """CartPole-v1 observing only ``keep`` (default: position and angle, no velocities).

    Example::

        masked_cartpole().observation_space.shape  # (2,)
    """
    return KeepComponents(gym.make("CartPole-v1", **kwargs), keep)


if "MaskedCartPole-v1" not in gym.registry:
    gym.register("MaskedCartPole-v1", entry_point="ding_dist.envs.masked:masked_cartpole")
