"""The masked-velocity CartPole: the same episode as CartPole-v1, observing only the position and the angle."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from ding_dist.envs import make_env
from ding_dist.envs.masked import KeepComponents


def test_masked_cartpole_observes_position_and_angle_of_the_same_episode():
    masked, full = make_env("ding_dist.envs.masked:MaskedCartPole-v1"), gym.make("CartPole-v1")
    assert masked.observation_space.shape == (2,)
    obs, _ = masked.reset(seed=3)
    want, _ = full.reset(seed=3)
    steps = 0
    while True:
        np.testing.assert_array_equal(obs, want[[0, 2]])
        obs, _, term, trunc, _ = masked.step(steps % 2)
        want, _, term_full, trunc_full, _ = full.step(steps % 2)
        steps += 1
        assert (term, trunc) == (term_full, trunc_full)
        if term or trunc:
            break
    assert steps > 1
    with pytest.raises(ValueError, match="keep must name components in"):
        KeepComponents(gym.make("CartPole-v1"), keep=(4,))
