"""What the vector envs leave out of every step, and what they keep: gymnasium's call checks run on env 0 only, the
restarting vector env steps its envs directly with gymnasium's SAME_STEP results, and the collector acts in torch's
inference mode."""

from __future__ import annotations

import functools

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode

from ding_dist.envs import make_env, make_vec_env
from ding_dist.envs.restarting import RestartingVectorEnv, env_info
from ding_dist.worker import Collector


def _chain(env: gym.Env) -> list[type]:
    out = []
    while True:
        out.append(type(env))
        if not isinstance(env, gym.Wrapper):
            return out
        env = env.env


def _envs(venv: gym.vector.VectorEnv) -> list[gym.Env]:
    return [sub.envs[0] for sub in venv.subs] if isinstance(venv, RestartingVectorEnv) else list(venv.envs)


def test_make_env_checked_false_leaves_out_the_check_wrappers_and_keeps_the_time_limit():
    checked = _chain(make_env("CartPole-v1"))
    assert gym.wrappers.PassiveEnvChecker in checked and gym.wrappers.OrderEnforcing in checked
    lean = make_env("CartPole-v1", checked=False)
    assert _chain(lean)[:1] == [gym.wrappers.TimeLimit] and lean.spec.max_episode_steps == 500
    assert gym.wrappers.PassiveEnvChecker not in _chain(lean) and gym.wrappers.OrderEnforcing not in _chain(lean)


def test_minatar_env_without_checks_keeps_its_grid_layout_and_time_limit():
    pytest.importorskip("minatar", reason="the minatar extra")
    checked, lean = (
        make_env("MinAtar/Breakout-v1", max_episode_steps=7),
        make_env("MinAtar/Breakout-v1", max_episode_steps=7, checked=False),
    )
    assert _chain(lean)[:2] == [type(checked), gym.wrappers.TimeLimit] and len(_chain(lean)) == 3
    obs = lean.reset(seed=3)[0]
    np.testing.assert_array_equal(obs, checked.reset(seed=3)[0])
    assert obs.dtype == np.uint8 and obs.shape == (4, 10, 10) and obs.flags.c_contiguous
    np.testing.assert_array_equal(obs, np.moveaxis(lean.unwrapped.game.state(), -1, 0).astype(np.uint8))
    truncated = [lean.step(0)[3] for _ in range(7)]
    assert truncated == [False] * 6 + [True]


@pytest.mark.parametrize("training", [True, False])
def test_vector_envs_check_env_0_only(training):
    venv = make_vec_env({"id": "CartPole-v1"}, 3, "sync", training=training)
    try:
        chains = [_chain(env) for env in _envs(venv)]
        assert gym.wrappers.PassiveEnvChecker in chains[0] and gym.wrappers.OrderEnforcing in chains[0]
        for chain in chains[1:]:
            assert chain == [gym.wrappers.TimeLimit, type(_envs(venv)[0].unwrapped)]
    finally:
        venv.close()


class Talkative(gym.Env):
    """Infos of every kind on some steps (scalars, strings, arrays, nested dicts, a private ``_`` key), episodes that
    terminate or truncate."""

    observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
    action_space = gym.spaces.Discrete(3)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.np_random.random(2).astype(np.float32), {"start": True, "n": {"a": 1, "b": 2.5}}

    def step(self, action):
        self.t += 1
        info = {}
        if self.t % 3 == 0:
            info = {"flag": bool(self.t % 2), "count": self.t, "name": "x", "vec": np.full(2, self.t)}
        if self.t % 5 == 0:
            info["episode"] = {"r": float(self.t), "l": self.t}
        obs = self.np_random.random(2).astype(np.float32)
        return obs, float(action), bool(self.np_random.random() < 0.1), self.t >= 12, info


def _assert_same(a, b) -> None:
    """Equal values, dicts key by key (the two vector envs batch info scalars in different dtypes)."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and sorted(a) == sorted(b)
        for key in a:
            _assert_same(a[key], b[key])
    else:
        np.testing.assert_array_equal(a, b)


def test_restarting_sync_steps_as_gymnasium_sync_vector_env():
    fns = [Talkative] * 4
    ours = RestartingVectorEnv(fns, "sync")
    ref = gym.vector.SyncVectorEnv(fns, autoreset_mode=AutoresetMode.SAME_STEP)
    obs, _ = ours.reset(seed=[0, 1, 2, 3])
    np.testing.assert_array_equal(obs, ref.reset(seed=[0, 1, 2, 3])[0])
    rng, ends = np.random.default_rng(0), 0
    for _ in range(100):
        actions = rng.integers(3, size=4)
        got, want = ours.step(actions), ref.step(actions)
        for a, b in zip(got[:4], want[:4]):
            assert a.dtype == b.dtype and a.tolist() == b.tolist()
        for j in range(4):
            _assert_same(env_info(got[4], j), env_info(want[4], j))
        ends += int((got[2] | got[3]).sum())
    assert ends > 20
    ours.close()
    ref.close()


def _assert_identical(a, b) -> None:
    """The same keys in the same order, the same dtypes and values (object arrays element by element)."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b)
        for key in a:
            _assert_identical(a[key], b[key])
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and (a.dtype, a.shape) == (b.dtype, b.shape)
        if a.dtype == object:
            for x, y in zip(a, b):
                _assert_identical(x, y)
        else:
            np.testing.assert_array_equal(a, b)
    else:
        assert type(a) is type(b) and a == b


def test_restarting_sync_step_equals_its_envs_one_env_vector_envs_merged():
    """Each env in a one-env gymnasium vector env, their batches of one concatenated and their infos merged env by env:
    what the restarting vector env returns, infos' dtypes and key order included."""
    n = 4
    ours = RestartingVectorEnv([Talkative] * n, "sync")
    ones = [gym.vector.SyncVectorEnv([Talkative], autoreset_mode=AutoresetMode.SAME_STEP) for _ in range(n)]
    merger = gym.vector.SyncVectorEnv([Talkative] * n)  # only its _add_info, for n envs
    _assert_identical(ours.reset(seed=list(range(n)))[0], np.concatenate([v.reset(seed=[i])[0] for i, v in
                                                                          enumerate(ones)]))  # fmt: skip
    rng = np.random.default_rng(1)
    for _ in range(60):
        actions = rng.integers(3, size=n)
        got = ours.step(actions)
        parts = [v.step(actions[i : i + 1]) for i, v in enumerate(ones)]
        want_info: dict = {}
        for i, part in enumerate(parts):
            want_info = merger._add_info(want_info, env_info(part[4]), i)
        want = [np.concatenate([p[k] for p in parts]) for k in range(4)]
        for a, b in zip(got, [*want, want_info]):
            _assert_identical(a, b)
    for v in (ours, merger, *ones):
        v.close()


class ModeProbe:
    """A policy that records whether it acts in inference mode."""

    def __init__(self) -> None:
        self.modes: list[bool] = []

    def collect_action(self, obs, env_step):
        self.modes.append(torch.is_inference_mode_enabled())
        return np.zeros(len(obs), dtype=np.int64), {"value": np.zeros(len(obs), np.float32)}

    def to_env_action(self, action):
        return action


def test_collector_acts_in_inference_mode_and_fills_its_rollout():
    venv = make_vec_env({"id": "CartPole-v1"}, 2, "sync", training=True)
    policy = ModeProbe()
    col = Collector(venv, policy, seeds=[0, 1])
    try:
        first = col.collect(3, env_step=0)
        second = col.collect(3, env_step=6)
        assert policy.modes == [True] * 6 and not torch.is_inference_mode_enabled()
        assert first["obs"].shape == (3, 2, 4) and first["obs"].dtype == np.float32
        np.testing.assert_array_equal(first["obs"][1:], first["next_obs"][:-1])
        np.testing.assert_array_equal(second["obs"][0], first["last_obs"])
        assert not np.shares_memory(first["obs"], second["obs"])
    finally:
        col.close()


def test_restarting_sync_env_that_crashes_mid_autoreset_is_restarted():
    """An env whose reset raises after the step that ended its episode: the step is a crash (reset observation of the
    new env, reward 0, no episode end), as when its one-env vector env raised."""

    class ResetFails(gym.Env):
        observation_space = gym.spaces.Box(0, 10, (1,), np.float32)
        action_space = gym.spaces.Discrete(2)
        lives = 0

        def __init__(self) -> None:
            type(self).lives += 1
            self.resets = 0

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            self.resets += 1
            if self.resets == 2 and type(self).lives == 1:
                raise RuntimeError("reset failed")
            self.t = 0
            return np.array([0.0], np.float32), {}

        def step(self, action):
            self.t += 1
            return np.array([self.t], np.float32), 1.0, self.t >= 2, False, {}

    venv = RestartingVectorEnv([functools.partial(ResetFails)], "sync", max_restarts=2)
    venv.reset(seed=[0])
    assert venv.step(np.array([0]))[0].tolist() == [[1.0]]
    obs, reward, terminated, truncated, info = venv.step(np.array([0]))  # ends the episode; the autoreset raises
    assert (obs.tolist(), reward.tolist(), terminated.tolist(), truncated.tolist()) == ([[0.0]], [0.0], [False],
                                                                                      [False])  # fmt: skip
    assert info["_env_restart"].tolist() == [True] and "final_obs" not in info and venv.restarts == 1
    venv.close()
