"""The EnvPool backend (``env_manager.type=envpool``): shapes, SAME_STEP autoreset, true game scores, seeds."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("envpool")

from ding_dist.envs import make_vec_env  # noqa: E402
from ding_dist.envs.atari import EPISODE_STATS_KEY  # noqa: E402
from ding_dist.envs.envpool_env import envpool_task  # noqa: E402

PONG = {"id": "ALE/Pong-v5", "env_kwargs": {"repeat_action_probability": 0.0}}


def test_task_names_and_sticky_action_defaults():
    assert envpool_task("ALE/Pong-v5") == ("Pong-v5", 0.25)
    assert envpool_task("PongNoFrameskip-v4") == ("Pong-v5", 0.0)
    with pytest.raises(ValueError, match="Atari ids"):
        envpool_task("CartPole-v1")


def test_observations_are_stacked_uint8_frames_and_ended_envs_reset_in_the_same_step():
    venv = make_vec_env({**PONG, "max_episode_steps": 20}, 2, "envpool", training=True)
    assert venv.single_observation_space.shape == (4, 84, 84) and venv.metadata[EPISODE_STATS_KEY]
    obs, _ = venv.reset(seed=[3, 4])
    assert obs.shape == (2, 4, 84, 84) and obs.dtype == np.uint8
    for t in range(1, 21):
        nxt, reward, terminated, truncated, info = venv.step(np.zeros(2, dtype=np.int64))
        if t < 20:
            assert not (terminated | truncated).any() and "final_obs" not in info
            np.testing.assert_array_equal(nxt[:, :3], obs[:, 1:])  # a frame stack
        obs_before, obs = obs, nxt
    assert truncated.all() and info["_final_obs"].all()
    final = np.stack(info["final_obs"])
    np.testing.assert_array_equal(final[:, :3], obs_before[:, 1:])  # the real last observation
    assert not np.array_equal(final, nxt)  # ... and nxt is already the reset one
    assert info["final_info"]["_episode"].all() and list(info["final_info"]["episode"]["l"]) == [20, 20]
    nxt2, *_ = venv.step(np.zeros(2, dtype=np.int64))
    np.testing.assert_array_equal(nxt2[:, :3], nxt[:, 1:])  # the next step continues the new episode
    venv.close()


def test_same_seeds_same_frames_and_other_seeds_differ():
    runs = []
    for seeds in ([1, 2], [1, 2], [7, 8]):
        venv = make_vec_env(PONG, 2, "envpool")
        venv.reset(seed=seeds)
        rng = np.random.default_rng(0)
        for _ in range(30):
            obs, *_ = venv.step(rng.integers(0, 6, 2))
        runs.append(obs)
        venv.close()
    np.testing.assert_array_equal(runs[0], runs[1])
    assert not np.array_equal(runs[0], runs[2])


def test_options_envpool_cannot_honour_are_rejected():
    with pytest.raises(ValueError, match="env_kwargs"):
        make_vec_env({"id": "ALE/Pong-v5", "env_kwargs": {"render_mode": "rgb_array"}}, 1, "envpool")
    with pytest.raises(ValueError, match="atari"):
        make_vec_env({"id": "ALE/Pong-v5", "atari": {"frame_stak": 2}}, 1, "envpool")


def test_short_pong_ppo_run_on_envpool(tmp_path):
    from ding_dist.entry.pipeline import train

    overrides = (
        "create_config.env_manager.type=envpool",
        "env.collector_env_num=2",
        "env.evaluator_env_num=1",
        "env.n_evaluator_episode=1",
        "env.max_episode_steps=100",
        "policy.collect.n_sample=128",
        "policy.learn.batch_size=64",
        "policy.learn.epoch_per_collect=1",
        "policy.eval.eval_freq=0",
    )
    out = train("configs/pong_ppo_config.py", overrides=overrides, exp_dir=tmp_path / "run", max_env_steps=256)
    assert out["env_steps"] >= 256 and out["train_iters"] > 0 and out["last_eval_return"] is not None
    assert out["episodes"] >= 2  # truncated games, counted from the final_info episode statistics


def test_training_envs_clip_rewards_while_the_recorded_game_score_is_unclipped():
    venv = make_vec_env({"id": "ALE/SpaceInvaders-v5", "max_episode_steps": 300}, 2, "envpool", training=True)
    venv.reset(seed=[0, 1])
    rng = np.random.default_rng(0)
    clipped, games = np.zeros(2), []
    for _ in range(300):
        _, reward, _, _, info = venv.step(rng.integers(0, 6, 2))
        assert set(np.unique(reward)) <= {-1.0, 0.0, 1.0}
        clipped += reward
        if info.get("final_info", {}).get("_episode") is not None:
            games.append(info["final_info"]["episode"]["r"][info["final_info"]["_episode"]])
    venv.close()
    scores = np.concatenate(games)
    assert len(scores) == 2 and clipped.min() > 0  # each game ended once (truncated), both scored
    assert (scores >= 5 * clipped).all()  # Space Invaders aliens are worth 5-30 points each
