"""DQN: epsilon schedule, acting, the double-DQN target, target-network updates, learning."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from ding_dist.policy.dqn import DQNPolicy, QNetwork, epsilon_schedule

OBS, ACT = gym.spaces.Box(-1.0, 1.0, (3,)), gym.spaces.Discrete(4)


def make(**learn) -> DQNPolicy:
    torch.manual_seed(0)
    cfg = DQNPolicy.default_config()
    cfg.model.hidden_sizes = [16]
    cfg.learn.update(learn)
    return DQNPolicy(cfg, OBS, ACT)


def batch(n=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return {
        "obs": torch.randn(n, 3, generator=g),
        "action": torch.randint(0, 4, (n,), generator=g),
        "reward": torch.randn(n, generator=g),
        "next_obs": torch.randn(n, 3, generator=g),
        "discount": torch.where(torch.rand(n, generator=g) < 0.2, 0.0, 0.99),
    }


def test_epsilon_schedule():
    assert epsilon_schedule("linear", 1.0, 0.1, 100, 0) == 1.0
    assert epsilon_schedule("linear", 1.0, 0.1, 100, 50) == pytest.approx(0.55)
    assert epsilon_schedule("linear", 1.0, 0.1, 100, 10_000) == pytest.approx(0.1)
    assert epsilon_schedule("exp", 1.0, 0.1, 100, 100) == pytest.approx(0.1 + 0.9 / np.e)
    with pytest.raises(ValueError, match="'cosine'"):
        epsilon_schedule("cosine", 1, 0, 1, 0)


def test_collect_action_greedy_after_decay_and_random_before():
    policy = make()
    obs = np.random.default_rng(0).normal(size=(500, 3)).astype(np.float32)
    greedy = policy.eval_action(obs)
    late, extras = policy.collect_action(obs, env_step=10**9)  # eps = end = 0.05
    assert extras == {}
    assert 0.9 < (late == greedy).mean() < 1.0
    early, _ = policy.collect_action(obs, env_step=0)  # eps = 1: uniform over 4 actions
    assert set(early.tolist()) == {0, 1, 2, 3}
    assert 0.15 < (early == greedy).mean() < 0.4


def test_learn_loss_is_huber_on_double_dqn_target():
    policy = make(target_update_freq=1000)
    b = batch()
    with torch.no_grad():  # independent computation of the target and loss before the update
        online, target_net = policy.model, policy.target_model
        a_star = online(b["next_obs"]).argmax(1)
        y = b["reward"] + b["discount"] * target_net(b["next_obs"])[torch.arange(32), a_star]
        q = online(b["obs"])[torch.arange(32), b["action"]]
        expected = F.smooth_l1_loss(q, y).item()
    stats = policy.learn(b)
    assert stats["loss"] == pytest.approx(expected, rel=1e-5)
    assert stats["q_mean"] == pytest.approx(q.mean().item(), rel=1e-5)
    assert policy.train_iter == 1


def test_learning_reduces_td_error_on_fixed_batch():
    policy = make(target_update_freq=10**6, learning_rate=1e-2)
    b = batch()
    first = policy.learn(b)["loss"]
    for _ in range(200):
        last = policy.learn(b)["loss"]
    assert last < 0.2 * first


def test_hard_target_update_every_k_and_soft_update():
    policy = make(target_update_freq=3)
    for i in range(1, 4):
        policy.learn(batch(seed=i))
        same = all(torch.equal(a, b) for a, b in zip(policy.model.parameters(), policy.target_model.parameters()))
        assert same == (i == 3)
    soft = make(target_theta=0.5)
    before = [p.clone() for p in soft.target_model.parameters()]
    soft.learn(batch())
    for b0, t, o in zip(before, soft.target_model.parameters(), soft.model.parameters()):
        torch.testing.assert_close(t, 0.5 * b0 + 0.5 * o)


def test_dueling_head_is_value_plus_centered_advantage():
    torch.manual_seed(0)
    net = QNetwork(3, 4, [8], dueling=True)
    x = torch.randn(5, 3)
    h = net.body(x)
    adv = net.advantage(h)
    torch.testing.assert_close(net(x), net.value(h) + adv - adv.mean(-1, keepdim=True))
    with pytest.raises(ValueError, match="hidden"):
        QNetwork(3, 4, [])
