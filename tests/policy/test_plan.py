"""The plan: the run's totals and each rank's share, computed once (``split_plan`` and a policy's own)."""

import gymnasium as gym
import numpy as np
import pytest
from easydict import EasyDict

import ding_dist as dd
from ding_dist.config import ConfigError
from ding_dist.config.split import split_config, split_plan
from ding_dist.policy.sqn import SQNPolicy
from ding_dist.utils.plan import Plan

FULL = {
    "env": {"collector_env_num": 8},
    "policy": {"learn": {"batch_size": 96}, "collect": {"n_sample": 48, "n_episode": 6}},
}


def test_a_full_config_gives_totals_and_shares():
    plan = Plan.of(FULL, ranks=2)
    assert (plan.batch, plan.n_sample, plan.n_episode, plan.envs) == (96, 48, 6, 8)
    assert (plan.rank_batch, plan.rank_n_sample, plan.rank_n_episode, plan.rank_envs) == (48, 24, 3, 4)


def test_a_policy_config_has_no_envs_and_none_stays_none():
    plan = Plan.of({"learn": {"batch_size": None}, "collect": {"n_sample": 30}}, ranks=3)
    assert (plan.batch, plan.rank_batch, plan.rank_n_sample, plan.envs, plan.rank_envs) == (None, None, 10, None, None)


def test_the_shares_are_those_split_config_writes():
    for ranks in (1, 2):
        part, plan = split_config(EasyDict(FULL), ranks), split_plan(FULL, ranks)
        assert part.policy.learn.batch_size == plan.rank_batch
        assert part.policy.collect.n_sample == plan.rank_n_sample
        assert part.policy.collect.n_episode == plan.rank_n_episode
        assert part.env.collector_env_num == plan.rank_envs
    assert FULL["policy"]["learn"]["batch_size"] == 96  # split_plan leaves the config as it was


def test_a_total_the_ranks_cannot_share_is_refused():
    with pytest.raises(ValueError, match=r"policy.learn.batch_size=96 cannot be split over 5 processes"):
        Plan.of(FULL, ranks=5)
    with pytest.raises(ConfigError, match=r"--set policy.learn.batch_size=95 or 100.*--learners 1 or 2"):
        split_plan(FULL, 5, "--learners")
    with pytest.raises(ValueError, match="ranks must be an int >= 1, got 0"):
        Plan(ranks=0)
    with pytest.raises(ValueError, match=r"policy.collect.n_sample must be an int >= 1 or None, got 2.5"):
        Plan(n_sample=2.5)


def _sqn_share() -> list[float]:
    cfg = SQNPolicy.default_config()
    cfg.device = "cpu"
    cfg.collect.n_sample = 16  # the run's total: 8 per rank on 2 ranks
    cfg.learn.update(learning_starts=0, update_per_collect=4)
    cfg.other.eps.decay = 5000
    policy = SQNPolicy(cfg, gym.spaces.Box(-1, 1, (3,), np.float32), gym.spaces.Discrete(2))
    return [policy.plan.ranks, policy.plan.rank_n_sample] + [policy.policy_share(s) for s in (0, 400, 2000)]


def test_sqn_schedule_follows_global_env_steps_on_any_number_of_ranks(run_ranks):
    """Before the plan, a rank's policy held its share of ``n_sample`` and SQN counted N times the updates."""
    one = _sqn_share()
    two = run_ranks(_sqn_share, 2)
    # by hand: updates = env_step * 4 / 16; share = 1 / (5000 - updates)
    assert one == [1, 16, 1 / 5000, 1 / 4900, 1 / 4500]
    assert two[0] == two[1] == [2, 8, 1 / 5000, 1 / 4900, 1 / 4500]
    assert dd.get_world_size() == 1
