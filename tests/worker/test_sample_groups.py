"""Double-buffered sampling (``env.sample_groups``): each env's trajectory equals the one-group sampler's."""

from __future__ import annotations

import functools
import logging

import gymnasium as gym
import numpy as np
import pytest

from ding_dist.envs import env_seeds, make_vec_env
from ding_dist.envs.grouped import GroupedVectorEnv
from ding_dist.envs.restarting import RestartingVectorEnv
from ding_dist.worker import Collector
from tests.envs.test_restarting import Counting


class Greedy:
    """A fixed greedy CartPole policy of its observation (episodes of 8 to 30 steps), with an extra per env that
    depends on its observation."""

    def collect_action(self, obs, env_step):
        return (obs[:, 2] + 0.5 * obs[:, 1] < 0).astype(np.int64), {"value": obs.sum(1).astype(np.float32)}

    def to_env_action(self, action):
        return action


class Recurrent(Greedy):
    recurrent = True


class Zero(Greedy):
    """Action 0 for the one-dimensional Counting envs."""

    def collect_action(self, obs, env_step):
        return np.zeros(len(obs), dtype=np.int64), {"value": obs[:, 0] * 2}


class Cut:
    """A preemption that stops every rollout after 5 vector steps; records the calls it gets."""

    def __init__(self) -> None:
        self.calls: list = []

    def begin(self):
        self.calls.append("begin")

    def preempted(self, done, n_steps):
        self.calls.append(done)
        return done >= 5

    def finished(self):
        self.calls.append("finished")


def _rollouts(venv, policy=None, seeds=None, cut=None, lengths=(37, 23)):
    col = Collector(venv, policy or Greedy(), seeds if seeds is not None else env_seeds(0, 0, "collector", 4))
    try:
        outs = [col.collect(n, env_step=0) for n in lengths] + [col.collect(8, env_step=60, preemption=cut)]
        return outs, col.pop_episodes(), col.groups, col.restarts
    finally:
        col.close()


def _assert_same(a, b):
    (ra, ea, _, _), (rb, eb, _, _) = a, b
    for x, y in zip(ra, rb):
        assert sorted(x) == sorted(y)
        for key in x:
            np.testing.assert_array_equal(x[key], y[key], err_msg=key)
    assert ea == eb


# ("sync", 0): plain SyncVectorEnv groups (no step_async); ("async", 5): the collector default, its workers step
# while the policy acts (gymnasium's own AsyncVectorEnv, max_restarts=0, takes the same step_async path)
@pytest.mark.parametrize("manager,max_restarts", [("sync", 5), ("sync", 0), ("async", 5)])
def test_two_groups_give_each_env_the_one_group_trajectory(manager, max_restarts):
    runs = {}
    for groups in (1, 2):
        cfg = {"id": "CartPole-v1", "sample_groups": groups, "max_restarts": max_restarts}
        cut = Cut()
        runs[groups] = (*_rollouts(make_vec_env(cfg, 4, manager, training=True), cut=cut), cut.calls)
    one, two = runs[1], runs[2]
    assert one[2] == 1 and two[2] == 2  # the second one really ran double-buffered
    _assert_same(one[:4], two[:4])
    returns = one[1][0]
    assert len(returns) > 4 and one[0][0]["terminated"].any()  # episodes ended inside rollouts (final_obs used)
    assert [len(r["reward"]) for r in two[0]] == [37, 23, 5] and two[4] == one[4] == ["begin", 0, 1, 2, 3, 4, 5]


@pytest.mark.parametrize("manager", ["sync", "async"])
def test_crashed_env_in_the_second_group_restarts_as_with_one_group(manager):
    fns = [functools.partial(Counting, length=5), functools.partial(Counting, length=4)] * 2
    fns[3] = functools.partial(Counting, length=10, fail_at=5)  # env 3 (group 1, its env 1) crashes every 4 steps

    def restarting(part):
        return RestartingVectorEnv(part, manager, max_restarts=50, restart_window_s=60)

    one = _rollouts(restarting(fns), Zero(), seeds=[0, 1, 2, 3], lengths=(5,))
    two = _rollouts(GroupedVectorEnv([restarting(fns[:2]), restarting(fns[2:])]), Zero(), [0, 1, 2, 3], lengths=(5,))
    assert two[2] == 2 and one[3] == two[3] == 3  # restarts of env 3 over 5 + 8 steps: rows 4, 8 and 12
    _assert_same(one, two)
    assert two[0][0]["truncated"][:, 3].tolist() == [False, False, False, True, False]  # a dropped episode's end


class Scored(Counting):
    metadata = {"ding_dist.episode_statistics": True}  # the collector logs info["episode"] (the game's score)


def _scored(length):  # the game scores 1 per step; the agent's reward is 0.5 per step
    return gym.wrappers.TransformReward(gym.wrappers.RecordEpisodeStatistics(Scored(length)), lambda r: r / 2)


def test_game_statistics_of_each_group_are_counted_as_with_one_group():
    fns = [functools.partial(_scored, n) for n in (3, 4, 5, 6)]

    def restarting(part):
        return RestartingVectorEnv(part, "sync", max_restarts=5, restart_window_s=60)

    one = _rollouts(restarting(fns), Zero(), seeds=[0, 1, 2, 3], lengths=(7,))
    two = _rollouts(GroupedVectorEnv([restarting(fns[:2]), restarting(fns[2:])]), Zero(), [0, 1, 2, 3], lengths=(7,))
    assert two[2] == 2
    _assert_same(one, two)
    returns, lengths = two[1]
    assert returns == [float(n) for n in lengths] and sorted(lengths) == [3] * 5 + [4] * 3 + [5] * 3 + [6] * 2


def test_recurrent_policy_and_bad_group_counts(caplog):
    with caplog.at_level(logging.INFO, logger="ding_dist.worker.collector"):
        grouped = _rollouts(make_vec_env({"id": "CartPole-v1", "sample_groups": 2}, 4, training=True), Recurrent())
    assert grouped[2] == 1 and "a recurrent policy acts on all envs at once" in caplog.text
    _assert_same(grouped, _rollouts(make_vec_env({"id": "CartPole-v1"}, 4, training=True), Recurrent()))
    with pytest.raises(ValueError, match=r"env.sample_groups=3 must divide the collector envs of each rank \(4\)"):
        make_vec_env({"id": "CartPole-v1", "sample_groups": 3}, 4, training=True)
    with pytest.raises(ValueError, match="env.sample_groups must be an int >= 1, got 0"):
        make_vec_env({"id": "CartPole-v1", "sample_groups": 0}, 4, training=True)
