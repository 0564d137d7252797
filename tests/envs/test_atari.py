"""Atari preprocessing through ale-py and gymnasium's wrappers: shapes, dtypes, life loss, true scores."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ale_py")
pytest.importorskip("cv2")

from ding_dist.envs import make_env, make_vec_env  # noqa: E402
from ding_dist.envs.atari import EPISODE_STATS_KEY, LifeLossTerminal  # noqa: E402


def _find(env, cls):
    while not isinstance(env, cls):
        env = env.env
    return env


def test_atari_observation_is_four_stacked_84x84_uint8_frames():
    env = make_env("ALE/Pong-v5")
    assert env.observation_space.shape == (4, 84, 84)
    assert env.observation_space.dtype == np.uint8
    obs, _ = env.reset(seed=0)
    assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8
    for _ in range(5):
        obs, *_ = env.step(env.action_space.sample())
    assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8
    # Stacking: frame k of the new observation is frame k+1 of the previous one.
    nxt, *_ = env.step(0)
    np.testing.assert_array_equal(nxt[:3], obs[1:])
    assert env.unwrapped._frameskip == 1  # frames are skipped (and max-pooled) by AtariPreprocessing
    env.close()


@pytest.mark.parametrize("manager", ["sync", "async"])
def test_vector_atari_env_is_uint8_on_the_wire_and_announces_episode_statistics(manager):
    venv = make_vec_env({"id": "ALE/Pong-v5"}, 2, manager, training=True)
    obs, _ = venv.reset(seed=[0, 1])
    assert obs.shape == (2, 4, 84, 84) and obs.dtype == np.uint8
    assert venv.metadata[EPISODE_STATS_KEY] is True
    venv.close()
    assert EPISODE_STATS_KEY not in make_env("CartPole-v1").metadata


def test_life_loss_and_reward_clipping_only_in_training_envs():
    train = make_env("ALE/Breakout-v5", training=True)
    evaluation = make_env("ALE/Breakout-v5")
    assert isinstance(_find(train, LifeLossTerminal), LifeLossTerminal)
    with pytest.raises(AttributeError):
        _find(evaluation, LifeLossTerminal)
    train.close()
    evaluation.close()


def test_training_episodes_end_per_life_while_the_recorded_return_is_the_game_score():
    env = make_env("ALE/Breakout-v5", training=True, env_kwargs={"repeat_action_probability": 0.0})
    env.reset(seed=3)
    rng = np.random.default_rng(0)
    life_episodes, clipped, games = 0, 0.0, []
    for _ in range(4000):
        _, reward, terminated, truncated, info = env.step(int(rng.integers(4)))
        assert reward in (-1.0, 0.0, 1.0)
        clipped += reward
        if terminated or truncated:
            life_episodes += 1
            if "episode" in info:
                games.append((float(info["episode"]["r"]), life_episodes, clipped))
                life_episodes, clipped = 0, 0.0
                if len(games) == 2:
                    break
            env.reset()
    assert len(games) == 2
    for score, lives, clipped_sum in games:
        assert lives == 5  # Breakout: five lives, each a training episode
        assert score >= clipped_sum  # the true score; clipping can only lower it
    env.close()


def test_atari_options_are_validated_and_applied():
    env = make_env("ALE/Pong-v5", atari={"frame_stack": 2, "screen_size": 64})
    assert env.observation_space.shape == (2, 64, 64)
    with pytest.raises(ValueError, match="frame_stak"):
        make_env("ALE/Pong-v5", atari={"frame_stak": 2})
    env.close()


@pytest.mark.parametrize("training", [False, True])
def test_max_episode_steps_counts_agent_steps_of_the_whole_game(training):
    env = make_env("ALE/Pong-v5", max_episode_steps=10, training=training)
    env.reset(seed=0)
    for t in range(1, 11):
        _, _, terminated, truncated, info = env.step(0)
        assert truncated == (t == 10) and not terminated
    assert info["episode"]["l"] == 10  # the recorded game is 10 agent steps (40 emulator frames) long
    env.close()
