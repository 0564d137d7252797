"""Discrete SAC: the expected soft value, the critic, policy and temperature losses of a learn step, by hand."""

from __future__ import annotations

import math
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from ding_dist.entry import pipeline
from ding_dist.entry.pipeline import load_config
from ding_dist.policy import get_policy_cls
from ding_dist.policy.discrete_sac import DiscreteSACPolicy, discrete_policy_loss, expected_soft_value

REPO = Path(__file__).resolve().parents[2]
DING_FILE = REPO / "tests" / "config" / "ding_files" / "cartpole_discrete_sac_ding_config.py"
OBS, ACT = gym.spaces.Box(-1.0, 1.0, (3,)), gym.spaces.Discrete(2)
PI = torch.tensor([0.25, 0.75])
H = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))  # the entropy of PI, 0.5623
Q1, Q2 = torch.tensor([1.0, 2.0]), torch.tensor([1.5, 1.5])  # min: [1.0, 1.5]


def test_expected_soft_value_and_policy_loss_by_hand():
    logits = PI.log().unsqueeze(0)
    q = torch.tensor([[1.0, 2.0]])
    assert expected_soft_value(logits, q, 1.0).item() == pytest.approx(1.75 + H, rel=1e-6)
    assert expected_soft_value(logits, q, 0.0).item() == pytest.approx(1.75, rel=1e-6)
    logits.requires_grad_(True)
    loss = discrete_policy_loss(logits, q, 0.5)
    assert loss.item() == pytest.approx(-(1.75 + 0.5 * H), rel=1e-6)
    loss.backward()  # d/dz_i of sum pi (alpha log pi - q): pi_i * (g_i - sum_j pi_j g_j), g = alpha log pi - q
    g = 0.5 * PI.log() - q[0]
    torch.testing.assert_close(logits.grad[0], PI * (g - (PI * g).sum()))


def _policy() -> DiscreteSACPolicy:
    torch.manual_seed(0)
    cfg = DiscreteSACPolicy.default_config()
    cfg.device = "cpu"
    cfg.model.update(actor_hidden_sizes=[4], critic_hidden_sizes=[4])
    cfg.learn.update(alpha=0.5, learning_rate_q=0.0, learning_rate_alpha=0.01, learning_starts=0)
    policy = DiscreteSACPolicy(cfg, OBS, ACT)
    with torch.no_grad():  # constant outputs whatever the observation: pi = PI, Q_1 = Q1, Q_2 = Q2
        policy.actor.logits.weight.zero_()
        policy.actor.logits.bias.copy_(PI.log())
        for critic in (policy.critic, policy.critic_target):
            for net, bias in ((critic.q1, Q1), (critic.q2, Q2)):
                net[-1].weight.zero_()
                net[-1].bias.copy_(bias)
    return policy


def test_learn_step_by_hand():
    policy = _policy()
    assert get_policy_cls("discrete_sac") is DiscreteSACPolicy
    assert policy.target_entropy == -2.0  # DI-engine's default: -n_actions
    batch = {
        "obs": torch.randn(2, 3),
        "next_obs": torch.randn(2, 3),
        "action": torch.tensor([1, 0]),
        "reward": torch.tensor([1.0, 2.0]),
        "discount": torch.tensor([0.5, 0.0]),  # the second ends in a termination
    }
    next_v = 0.25 * 1.0 + 0.75 * 1.5 + 0.5 * H  # E_pi[min Q - alpha log pi]
    target = [1.0 + 0.5 * next_v, 2.0]
    q1_taken, q2_taken = [2.0, 1.0], [1.5, 1.5]
    critic = sum(((q - y) ** 2 for qs in (q1_taken, q2_taken) for q, y in zip(qs, target))) / 2
    stats = policy.learn(batch)
    assert stats["critic_loss"].item() == pytest.approx(critic, rel=1e-6)
    # learning_rate_q=0: the actor sees the same critics; its loss is E_pi[alpha log pi - min Q]
    assert stats["actor_loss"].item() == pytest.approx(-0.5 * H - 1.375, rel=1e-6)
    assert stats["alpha_loss"].item() == pytest.approx(math.log(0.5) * (H + 2.0), rel=1e-6)
    assert stats["entropy"].item() == pytest.approx(H, rel=1e-6)
    # entropy above the target: Adam's first step lowers log(alpha) by its learning rate
    assert math.log(policy.alpha) == pytest.approx(math.log(0.5) - 0.01, rel=1e-5)


def test_acting_is_uniform_before_learning_starts_then_samples_the_policy():
    policy = _policy()
    policy.cfg.learn.learning_starts = 100
    obs = np.zeros((4000, 3), dtype=np.float32)
    torch.manual_seed(1)
    before, _ = policy.collect_action(obs, env_step=0)
    after, _ = policy.collect_action(obs, env_step=100)
    assert abs(before.mean() - 0.5) < 0.03 and abs(after.mean() - 0.75) < 0.03  # seeded; over 4 std devs
    assert (policy.eval_action(obs[:5]) == 1).all()


def test_di_engine_cartpole_sac_file_gets_di_engines_meaning():
    cfg = load_config(DING_FILE)
    p, lc = cfg.policy, cfg.policy.learn
    assert cfg.create_config.policy.type == "discrete_sac"
    assert (p.model.actor_hidden_sizes, p.model.critic_hidden_sizes) == ([64, 64], [64, 64])
    assert (lc.learning_rate_q, lc.learning_rate_policy, lc.learning_rate_alpha) == (5e-3, 5e-3, 3e-4)
    assert (lc.alpha, lc.auto_alpha, lc.target_theta, lc.update_per_collect, lc.batch_size) == (0.2, False, 0.01, 2, 64)
    assert (lc.learning_starts, p.collect.n_sample, p.discount_factor) == (64, 256, 0.99)
    assert dict(p.other.eps) == {"type": "exp", "start": 0.95, "end": 0.1, "decay": 50000}
    assert p.eval.eval_freq == 25 * 256  # DI-engine's 50 train iters at 2 per collect of 256 env steps
    shipped = load_config(REPO / "configs" / "cartpole_discrete_sac_config.py")
    assert (shipped.create_config.policy.type, shipped.policy.learn.auto_alpha) == ("discrete_sac", True)


def test_di_engine_cartpole_sac_file_trains(tmp_path):
    result = pipeline.train(str(DING_FILE), max_env_steps=512, exp_dir=tmp_path / "r")
    assert (result["env_steps"], result["train_iters"]) == (512, 4)  # 2 collects of 256, 2 updates after each


@pytest.mark.quality
@pytest.mark.timeout(1800)  # minutes of training: more than the suite's 300 s on a busy machine
def test_shipped_discrete_sac_config_reaches_475(tmp_path):
    config = str(REPO / "configs" / "cartpole_discrete_sac_config.py")
    result = pipeline.train(config, exp_dir=tmp_path, max_env_steps=60_000)
    assert result["stopped_by"] == "stop_value", result["eval_history"]
    print(f"reached the threshold in {result['env_steps']} env steps, {result['wall_time_s']:.1f} s")  # for docs/rl.md
