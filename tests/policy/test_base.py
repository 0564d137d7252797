"""Shared policy helpers: mlp, target updates, space checks, state_dict round trips."""

from __future__ import annotations

import gymnasium as gym
import pytest
import torch

from ding_dist.policy import POLICY_REGISTRY, DQNPolicy, PPOPolicy, get_policy_cls, register_policy
from ding_dist.policy.base import action_info, hard_update, mlp, obs_dim, soft_update

OBS = gym.spaces.Box(-1.0, 1.0, (4,))


def test_mlp_shapes_and_activation_placement():
    net = mlp([4, 8, 3], "tanh")
    assert [type(m).__name__ for m in net] == ["Linear", "Tanh", "Linear"]
    assert [type(m).__name__ for m in mlp([4, 8], "relu", out_activation=True)] == ["Linear", "ReLU"]
    with pytest.raises(ValueError, match="activation"):
        mlp([4, 2], "swish")


def test_soft_and_hard_update():
    torch.manual_seed(0)
    src, dst = mlp([3, 2]), mlp([3, 2])
    before = [p.clone() for p in dst.parameters()]
    soft_update(dst, src, 0.25)
    for b, d, s in zip(before, dst.parameters(), src.parameters()):
        torch.testing.assert_close(d, 0.75 * b + 0.25 * s)
    hard_update(dst, src)
    for d, s in zip(dst.parameters(), src.parameters()):
        assert torch.equal(d, s)
    with pytest.raises(ValueError, match="tau"):
        soft_update(dst, src, 0.0)


def test_space_helpers():
    assert obs_dim(gym.spaces.Box(0, 1, (2, 3))) == 6
    assert action_info(gym.spaces.Discrete(5)) == (True, 5)
    assert action_info(gym.spaces.Box(-1, 1, (2,))) == (False, 2)
    with pytest.raises(ValueError, match="Discrete observation"):
        obs_dim(gym.spaces.Discrete(3))
    with pytest.raises(ValueError, match="DQN needs a Discrete"):
        DQNPolicy(DQNPolicy.default_config(), OBS, gym.spaces.Box(-1, 1, (2,)))


@pytest.mark.parametrize("cls", [DQNPolicy, PPOPolicy])
def test_state_dict_round_trip(cls):
    torch.manual_seed(0)
    a = cls(cls.default_config(), OBS, gym.spaces.Discrete(2))
    torch.manual_seed(1)
    b = cls(cls.default_config(), OBS, gym.spaces.Discrete(2))
    a.train_iter = 17
    b.load_state_dict(a.state_dict())
    assert b.train_iter == 17
    for pa, pb in zip(a.model.parameters(), b.model.parameters()):
        assert torch.equal(pa, pb)
    with pytest.raises(KeyError, match="optimizer"):
        b.load_state_dict({k: v for k, v in a.state_dict().items() if k != "optimizer"})


def test_registry():
    assert POLICY_REGISTRY["dqn"] is DQNPolicy and get_policy_cls("ppo") is PPOPolicy
    assert DQNPolicy.on_policy is False and PPOPolicy.on_policy is True
    with pytest.raises(ValueError, match=r"'dqnn'.*registered"):
        get_policy_cls("dqnn")
    with pytest.raises(TypeError, match="subclass"):
        register_policy("bad", object)
