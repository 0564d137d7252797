"""IMPALA: V-trace against hand-computed values, and the policy's updates on a real rollout."""

from __future__ import annotations

import math

import pytest
import torch

from ding_dist.envs import env_seeds, make_vec_env
from ding_dist.policy import IMPALAPolicy, get_policy_cls
from ding_dist.policy.impala import vtrace
from ding_dist.worker import Collector


def _ones(t: int = 3) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return torch.ones(t, 1), torch.full((t, 1), 0.9), torch.zeros(t, 1)  # reward, discount, value


def test_vtrace_on_policy_gives_discounted_returns():
    reward, discount, value = _ones()
    vs, adv = vtrace(torch.zeros(3, 1), reward, discount, value, torch.zeros(1))
    assert vs[:, 0].tolist() == pytest.approx([1 + 0.9 + 0.81, 1 + 0.9, 1.0])
    assert adv[:, 0].tolist() == pytest.approx([1 + 0.9 * 1.9, 1 + 0.9 * 1.0, 1.0])
    vs, _ = vtrace(torch.zeros(3, 1), reward, discount, value, torch.full((1,), 10.0))  # bootstrap from V(x_T)
    assert vs[2, 0].item() == pytest.approx(1 + 0.9 * 10)


def test_vtrace_truncates_and_weights_off_policy_steps():
    reward, discount, value = _ones(2)
    half = torch.full((2, 1), math.log(0.5))  # pi / mu = 0.5: rho = 0.5, c = 0.5
    vs, adv = vtrace(half, reward, discount, value, torch.zeros(1))
    assert vs[:, 0].tolist() == pytest.approx([0.5 + 0.9 * 0.5 * 0.5, 0.5])
    assert adv[:, 0].tolist() == pytest.approx([0.5 * (1 + 0.9 * 0.5), 0.5])
    big = torch.full((2, 1), math.log(4.0))  # pi / mu = 4 is truncated to rho_bar = c_bar = 1: on-policy values
    assert vtrace(big, reward, discount, value, torch.zeros(1))[0][:, 0].tolist() == pytest.approx([1.9, 1.0])
    cut = torch.tensor([[0.0], [0.9]])  # step 0 ended its episode: nothing flows back across it
    assert vtrace(torch.zeros(2, 1), reward, cut, value, torch.zeros(1))[0][:, 0].tolist() == pytest.approx([1, 1])


def test_impala_learns_from_a_rollout_in_whole_env_columns():
    assert get_policy_cls("impala") is IMPALAPolicy and IMPALAPolicy.on_policy
    venv = make_vec_env({"id": "CartPole-v1"}, 4)
    cfg = IMPALAPolicy.default_config()
    cfg.learn.update(epoch_per_collect=1, batch_size=64)  # one minibatch: the whole 16 x 4 rollout
    torch.manual_seed(0)
    policy = IMPALAPolicy(cfg, venv.single_observation_space, venv.single_action_space)
    rollout = Collector(venv, policy, env_seeds(0, 0, "collector", 4)).collect(16, 0)
    venv.close()
    before = [p.detach().clone() for p in policy.model.parameters()]
    first = policy.learn(rollout)  # it acts with the policy that collected the rollout: pi / mu = 1
    assert first["rho_mean"].item() == pytest.approx(1.0, abs=1e-5) and policy.train_iter == 1
    assert any(not torch.equal(a, b) for a, b in zip(before, policy.model.parameters()))
    policy.cfg.learn.update(epoch_per_collect=3, batch_size=32)  # 16 steps x 2 env columns per minibatch
    stats = policy.learn(rollout)
    assert policy.train_iter == 1 + 3 * 2  # 3 epochs x (4 env columns / 2 per minibatch)
    assert set(stats) == {"loss", "policy_loss", "value_loss", "entropy", "rho_mean"}
    assert all(torch.isfinite(v) for v in stats.values())
    assert stats["rho_mean"].item() != pytest.approx(1.0, abs=1e-5)  # now off-policy: the weights moved
