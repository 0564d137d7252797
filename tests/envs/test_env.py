"""Environment creation, seeding, SAME_STEP autoreset and the old-gym adapter."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from ding_dist.config.sections import ENV_KEYS
from ding_dist.envs import OldGymAdapter, ensure_gymnasium, env_seeds, make_env, make_vec_env


class LegacyCounterEnv:
    """Old-gym style env, no gym import: reset() -> obs, step() -> (obs, reward, done, info).

    The episode ends after ``limit`` steps: by a time limit (``TimeLimit.truncated``) when ``timeout``,
    else by a real termination.
    """

    class _Discrete:
        n = 3

    class _Box:
        low = np.zeros(2, dtype=np.float32)
        high = np.full(2, 10.0, dtype=np.float32)
        dtype = np.float32

    observation_space = _Box()
    action_space = _Discrete()

    def __init__(self, limit: int = 3, timeout: bool = False) -> None:
        self.limit, self.timeout, self.t, self.seeded = limit, timeout, 0, None

    def seed(self, seed):
        self.seeded = seed

    def reset(self):
        self.t = 0
        return np.zeros(2, dtype=np.float32)

    def step(self, action):
        self.t += 1
        done = self.t >= self.limit
        info = {"TimeLimit.truncated": True} if done and self.timeout else {}
        return np.array([self.t, action], dtype=np.float32), 1.0, done, info


def make_legacy(limit: int = 3, timeout: bool = False) -> LegacyCounterEnv:
    return LegacyCounterEnv(limit, timeout)


def test_env_seeds_are_distinct_across_ranks_and_roles():
    seeds = [s for r in range(4) for role in ("collector", "evaluator") for s in env_seeds(7, r, role, 8)]
    assert len(set(seeds)) == len(seeds)
    assert env_seeds(7, 0, "collector", 2) == env_seeds(7, 0, "collector", 3)[:2]  # a stream: fixed by its key
    with pytest.raises(ValueError, match="role"):
        env_seeds(0, 0, "learner", 2)


def test_unknown_env_id_names_id_and_close_matches():
    with pytest.raises(ValueError, match=r"'CartPol-v1'.*CartPole-v1"):
        make_env("CartPol-v1")
    with pytest.raises(ValueError, match="env.id"):
        make_env(None)


def test_same_seed_same_trajectory_and_different_seeds_differ():
    def first_obs(seeds):
        venv = make_vec_env({"id": "CartPole-v1"}, num_envs=len(seeds))
        obs, _ = venv.reset(seed=seeds)
        venv.close()
        return obs

    a, b = first_obs([1, 2]), first_obs([1, 2])
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a[0], a[1])


def test_vector_env_same_step_autoreset_exposes_final_obs():
    venv = make_vec_env({"id": "CartPole-v1", "max_episode_steps": 5}, num_envs=2)
    obs, _ = venv.reset(seed=[0, 1])
    for _ in range(5):
        prev = obs
        obs, _, terminated, truncated, info = venv.step(np.zeros(2, dtype=np.int64))
    # The 5th step truncates both envs (a constant action cannot fail CartPole that fast):
    assert truncated.all() and not terminated.any()
    assert info["_final_obs"].all()
    final = np.stack(info["final_obs"])
    assert not np.allclose(final, obs)  # the returned obs is the reset one, final_obs the real last one
    assert np.abs(obs).max() <= 0.05  # CartPole resets near 0
    assert not np.allclose(final, prev)
    venv.close()


def test_async_manager_matches_sync():
    seeds = [3, 4]
    out = []
    for manager in ("sync", "async"):
        venv = make_vec_env({"id": "CartPole-v1"}, num_envs=2, manager=manager)
        obs, _ = venv.reset(seed=seeds)
        obs2, *_ = venv.step(np.array([0, 1]))
        out.append((obs, obs2))
        venv.close()
    np.testing.assert_allclose(out[0][0], out[1][0])
    np.testing.assert_allclose(out[0][1], out[1][1])
    with pytest.raises(ValueError, match="env_manager.type"):
        make_vec_env({"id": "CartPole-v1"}, 2, manager="threads")


def test_old_gym_adapter_maps_done_to_terminated_or_truncated():
    env = OldGymAdapter(LegacyCounterEnv(limit=2))
    assert isinstance(env.action_space, gym.spaces.Discrete) and env.action_space.n == 3
    assert isinstance(env.observation_space, gym.spaces.Box) and env.observation_space.shape == (2,)
    obs, info = env.reset(seed=5)
    assert env.env.seeded == 5 and info == {}
    assert env.step(1)[2:4] == (False, False)
    _, reward, terminated, truncated, _ = env.step(1)
    assert (reward, terminated, truncated) == (1.0, True, False)

    env = OldGymAdapter(LegacyCounterEnv(limit=2, timeout=True))
    env.reset()
    env.step(0)
    _, _, terminated, truncated, info = env.step(0)
    assert (terminated, truncated) == (False, True)
    assert "TimeLimit.truncated" not in info


def test_entry_point_builds_vectorized_legacy_env():
    cfg = ENV_KEYS.defaults()
    cfg.update(entry_point=f"{__name__}:make_legacy", env_kwargs={"limit": 4, "timeout": True})
    venv = make_vec_env(cfg, num_envs=2)
    venv.reset(seed=[0, 1])
    for _ in range(4):
        _, _, terminated, truncated, info = venv.step(np.array([2, 2]))
    assert truncated.all() and not terminated.any()
    np.testing.assert_array_equal(np.stack(info["final_obs"]), [[4, 2], [4, 2]])
    venv.close()


def test_ensure_gymnasium_passes_gymnasium_envs_and_rejects_non_envs():
    env = gym.make("CartPole-v1")
    assert ensure_gymnasium(env) is env
    with pytest.raises(TypeError, match="not an environment: it has no 'reset'"):
        ensure_gymnasium(object())
    with pytest.raises(ValueError, match="entry_point"):
        make_env(entry_point="no_colon_here")
