"""Collector envs that crash are recreated: the broken episode is dropped, the rank goes on, and too many
restarts of one env in the window are one error naming it."""

from __future__ import annotations

import functools
import os
import signal
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from ding_dist.envs import make_vec_env
from ding_dist.envs.restarting import EnvCrashError, RestartingVectorEnv
from ding_dist.worker import Collector

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


class Counting(gym.Env):
    """Observation: the step within the episode; reward 1 per step; episodes of ``length`` steps; the
    ``fail_at``-th step of each instance's life raises."""

    observation_space = gym.spaces.Box(0, 100, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, length: int = 4, fail_at: int | None = None) -> None:
        self.length, self.fail_at, self.steps, self.t = length, fail_at, 0, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0], np.float32), {}

    def step(self, action):
        self.steps += 1
        if self.steps == self.fail_at:
            raise ValueError(f"boom at step {self.steps}")
        self.t += 1
        return np.array([self.t], np.float32), 1.0, self.t >= self.length, False, {}


class ZeroPolicy:
    def collect_action(self, obs, env_step):
        return np.zeros(len(obs), dtype=np.int64), {"value": np.full(len(obs), 7.0, np.float32)}

    def to_env_action(self, action):
        return action


def _venv(manager: str, max_restarts: int = 10) -> RestartingVectorEnv:
    fns = [functools.partial(Counting, length=10, fail_at=3), functools.partial(Counting, length=4)]
    return RestartingVectorEnv(fns, manager, max_restarts=max_restarts, restart_window_s=60)


@pytest.mark.parametrize("manager", ["sync", "async"])
def test_env_raising_on_chosen_steps_is_recreated_and_its_episode_dropped(manager):
    venv = _venv(manager)
    col = Collector(venv, ZeroPolicy(), seeds=[0, 1])
    try:
        ro = col.collect(8, env_step=0)
        # env 0 raises on the 3rd step of every instance: crashes at rows 2, 4 and 6; each crashed slot holds the new
        # env's first real step, and the last real step before each crash ends as truncated
        assert venv.restarts == 3 and col.restarts == 3
        assert ro["obs"][:, 0, 0].tolist() == [0, 1, 0, 1, 0, 1, 0, 1]
        assert ro["next_obs"][:, 0, 0].tolist() == [1, 2, 1, 2, 1, 2, 1, 2]
        assert ro["truncated"][:, 0].tolist() == [False, True, False, True, False, True, False, False]
        assert not ro["terminated"][:, 0].any()
        assert ro["reward"][:, 0].tolist() == [1.0] * 8 and ro["value"][:, 0].tolist() == [7.0] * 8
        # env 1 never crashes: its 4-step episodes are the only returns counted
        assert ro["obs"][:, 1, 0].tolist() == [0, 1, 2, 3, 0, 1, 2, 3]
        assert col.pop_episodes() == ([4.0, 4.0], [4, 4])
    finally:
        col.close()


def test_too_many_restarts_is_one_error_naming_the_env_and_its_exception():
    col = Collector(_venv("sync", max_restarts=2), ZeroPolicy(), seeds=[0, 1])
    needle = r"collector env 0 of rank 0 crashed 3 times within 60 s .*ValueError: boom at step 3"
    with pytest.raises(EnvCrashError, match=needle):
        col.collect(8, env_step=0)
    col.close()


def test_killed_async_worker_is_recreated():
    venv = RestartingVectorEnv([functools.partial(Counting, length=4)] * 2, "async", max_restarts=1)
    col = Collector(venv, ZeroPolicy(), seeds=[0, 1])
    try:
        col.collect(1, env_step=0)
        old = venv.subs[1].processes[0]
        os.kill(old.pid, signal.SIGKILL)
        old.join(5)
        ro = col.collect(2, env_step=0)
        assert venv.restarts == 1 and venv.subs[1].processes[0].pid != old.pid
        # env 1 was at step 1 of an episode: the crashed row is the new env's first step; its dropped 1-step
        # episode (already handed out in the first rollout) is not counted as a return
        assert ro["obs"][:, 1, 0].tolist() == [0, 1] and ro["next_obs"][:, 1, 0].tolist() == [1, 2]
        assert ro["obs"][:, 0, 0].tolist() == [1, 2]  # env 0 went on
        assert col.pop_episodes() == ([], [])
    finally:
        col.close()


def test_collector_envs_of_make_vec_env_restart_with_the_config_limits():
    cfg = {"entry_point": Counting, "env_kwargs": {"length": 4}, "max_restarts": 1, "restart_window_s": 9.5}
    venv = make_vec_env(cfg, 2, "sync", training=True)
    assert isinstance(venv, RestartingVectorEnv) and (venv.max_restarts, venv.restart_window_s) == (1, 9.5)
    venv.close()
    assert not isinstance(make_vec_env(cfg, 2, "sync"), RestartingVectorEnv)  # evaluation envs: plain gymnasium


def crashing_cartpole(fail_at: int) -> gym.Env:
    """CartPole whose every instance raises on the ``fail_at``-th step of its life."""

    class Crashing(gym.Wrapper):
        steps = 0

        def step(self, action):
            self.steps += 1
            if self.steps == fail_at:
                raise RuntimeError("simulator lost")
            return self.env.step(action)

    return Crashing(gym.make("CartPole-v1"))


def test_a_run_with_crashing_envs_goes_on_and_logs_env_restarts(tmp_path):
    from ding_dist.config import read_config
    from ding_dist.entry import train
    from ding_dist.utils import read_metrics

    main, create = read_config(f"{CONFIGS}/cartpole_dqn_config.py")
    main.env.update(id=None, entry_point=f"{__name__}:crashing_cartpole", env_kwargs={"fail_at": 17},
                    max_episode_steps=10, collector_env_num=2, evaluator_env_num=1, n_evaluator_episode=1,
                    max_restarts=100)  # fmt: skip
    main.policy.model.hidden_sizes = [16]
    main.policy.learn.update(update_per_collect=1, learning_starts=64, batch_size=16)
    main.policy.collect.n_sample = 32
    main.policy.other.update(log_freq=128)
    result = train((main, create), seed=0, exp_dir=tmp_path, max_env_steps=256)
    assert result["env_steps"] == 256
    # each env's instance crashes on its 17th step: at rows 16, 32, 48, ... of every env (the new instance's first
    # step fills the crashed row)
    records = [r for r in read_metrics(tmp_path / "tb" / "metrics.jsonl") if "env/restarts" in r]
    assert [(r["step"], r["env/restarts"]) for r in records] == [(128, 6), (256, 14)]


class Guarded:
    """Counting env 0 crashes on the 5th step of each instance's life, mid-way through its second 3-step episode."""

    @staticmethod
    def venv() -> RestartingVectorEnv:
        fns = [functools.partial(Counting, length=3, fail_at=5), functools.partial(Counting, length=3)]
        return RestartingVectorEnv(fns, "sync", max_restarts=3, restart_window_s=60, role="evaluator")


class ZeroEval:
    def eval_action(self, obs):
        return np.zeros(len(obs), dtype=np.int64)


def test_a_crashing_evaluation_env_is_recreated_and_its_episode_not_counted():
    from ding_dist.worker import Evaluator

    venv = Guarded.venv()
    ev = Evaluator(venv, ZeroEval(), n_episode=6, seeds=[0, 1])
    result = ev.evaluate()
    # env 0: each instance runs one 3-step episode, then a broken one (step 4, crash at 5), dropped: 2 restarts
    assert result["returns"] == [3.0] * 6 and result["lengths"] == [3] * 6 and ev.restarts == venv.restarts == 2
    venv.close()
    venv = Guarded.venv()
    venv.max_restarts = 0  # the same limit as collector envs: one error naming the evaluation env
    with pytest.raises(EnvCrashError, match=r"evaluator env 0 of rank 0 crashed 1 times"):
        Evaluator(venv, ZeroEval(), n_episode=6, seeds=[0, 1]).evaluate()
    venv.close()


def _crashing_actor_learner(exp_dir: str) -> dict:
    from ding_dist.config import read_config
    from ding_dist.entry import train

    main, create = read_config(f"{CONFIGS}/cartpole_apex_dqn_config.py")  # prioritized, the epsilon ladder
    main.env.update(id=None, entry_point=f"{__name__}:crashing_cartpole", env_kwargs={"fail_at": 17},
                    max_episode_steps=10, collector_env_num=2, evaluator_env_num=1, n_evaluator_episode=3,
                    max_restarts=100)  # fmt: skip
    main.policy.model.hidden_sizes = [16]
    main.policy.learn.update(update_per_collect=1, learning_starts=64, batch_size=16)
    main.policy.collect.n_sample = 32
    main.policy.other.update(log_freq=64)
    main.actor_learner = dict(actors=1, learners=1)
    return train((main, create), seed=0, exp_dir=exp_dir, max_env_steps=128)


def test_an_apex_run_logs_its_actors_env_restarts_and_replay_and_guards_its_evaluation_envs(run_ranks, tmp_path):
    from ding_dist.utils import read_metrics

    learner, actor = run_ranks(_crashing_actor_learner, 2, str(tmp_path))
    # the final evaluation's 3 episodes of at most 10 steps pass the eval env's 17th step: it crashed, was recreated
    assert (learner["env_steps"], learner["stopped_by"], actor["role"]) == (128, "max_env_steps", "actor")
    # the actor's 2 envs crash at rows 16, 32, 48 (as one process): its count travels in the chunk headers
    records = [r for r in read_metrics(tmp_path / "tb" / "metrics.jsonl") if "env/restarts" in r]
    assert [(r["step"], r["env/restarts"]) for r in records] == [(64, 2), (128, 6)]
    # Ape-X's view: the one actor's epsilon (the ladder's base), the replay, its priorities and sampled ages
    assert [(r["replay/size"], r["actors/epsilon/rank1"]) for r in records] == [(64, 0.4), (128, 0.4)]
    for r in records:
        assert 0 < r["replay/priority_mean"] <= r["replay/priority_max"] and 0 <= r["replay/sample_age"] < 128
        assert 0 <= r["lag/mean"] <= r["lag/max"]


class SeedLengths(gym.Env):
    """Episodes of 5-14 steps, the length drawn at reset from the env's seed; reward 1 per step. Each step raises
    with probability ``crash_p`` (drawn from a generator of the test's, not the env's: the crash is not part of the
    episode), so long episodes are cut more often than short ones."""

    observation_space = gym.spaces.Box(0, 100, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)
    crashes = np.random.default_rng(0)

    def __init__(self, crash_p: float = 0.0) -> None:
        self.crash_p = crash_p

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.length = 0, int(self.np_random.integers(5, 15))
        return np.array([0.0], np.float32), {}

    def step(self, action):
        if self.crash_p and self.crashes.random() < self.crash_p:
            raise ValueError("boom")
        self.t += 1
        return np.array([self.t], np.float32), 1.0, self.t >= self.length, False, {}


def test_an_evaluation_with_crashing_envs_counts_the_episodes_of_one_without_crashes(caplog):
    """Dropping the episodes crashes cut short would favour short ones (long episodes meet more crashes): the mean
    of these 60 episodes was 8.83 with crashes, 9.67 without. Each is run again from its seed instead: the same
    episodes, the same mean (9.52 both)."""
    from ding_dist.worker import Evaluator

    def evaluate(crash_p: float) -> tuple[dict, int]:
        fns = [functools.partial(SeedLengths, crash_p)] * 2
        venv = RestartingVectorEnv(fns, "sync", max_restarts=1000, restart_window_s=60, role="evaluator")
        try:
            result = Evaluator(venv, ZeroEval(), n_episode=60, seeds=[3, 4]).evaluate()
            return result, venv.restarts
        finally:
            venv.close()

    planned, none = evaluate(0.0)
    with caplog.at_level("WARNING"):
        crashed, restarts = evaluate(0.1)
    assert none == 0 and restarts > 20
    assert sorted(crashed["returns"]) == sorted(planned["returns"]) and len(planned["returns"]) == 60
    assert crashed["mean_return"] == pytest.approx(planned["mean_return"])
    assert sorted(crashed["lengths"]) == sorted(planned["lengths"])
    lines = [r.getMessage() for r in caplog.records]
    assert f"evaluation: {restarts} episode(s) cut short by an env crash were run again from their start" in lines[-1]
    assert "evaluator env 0 crashed (ValueError: boom); recreated it, its episode runs again from its start" in lines
