"""Soft Q-learning: the soft value, the soft target and a learn step, computed by hand; Boltzmann acting."""

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
from ding_dist.policy.sql import SQLPolicy, soft_value, sql_target

REPO = Path(__file__).resolve().parents[2]
DING_FILE = REPO / "tests" / "config" / "ding_files" / "cartpole_sql_ding_config.py"
OBS, ACT = gym.spaces.Box(-1.0, 1.0, (3,)), gym.spaces.Discrete(2)
#: Q-values [0, ln 3]: at alpha 1 the Boltzmann policy is [1/4, 3/4] and the soft value ln 4; at alpha 1/2 it is
#: [1/10, 9/10] and the soft value ln(10) / 2.
Q = torch.tensor([[0.0, math.log(3.0)]])


def _policy(alpha: float) -> SQLPolicy:
    torch.manual_seed(0)
    cfg = SQLPolicy.default_config()
    cfg.device = "cpu"
    cfg.model.update(hidden_sizes=[4], dueling=False)
    cfg.learn.update(alpha=alpha, grad_clip_norm=None)
    cfg.other.eps.update(start=0.0, end=0.0)
    policy = SQLPolicy(cfg, OBS, ACT)
    with torch.no_grad():  # Q-values [0, ln 3] whatever the observation
        for net in (policy.model, policy.target_model):
            net.head.weight.zero_()
            net.head.bias.copy_(Q[0])
    return policy


def test_soft_value_and_target_by_hand():
    assert soft_value(Q, 1.0).item() == pytest.approx(math.log(4.0), rel=1e-6)
    assert soft_value(Q, 0.5).item() == pytest.approx(0.5 * math.log(10.0), rel=1e-6)
    assert soft_value(Q, 0.001).item() == pytest.approx(math.log(3.0), abs=1e-6)  # alpha -> 0: the hard max
    target = sql_target(Q.repeat(2, 1), torch.tensor([1.0, 2.0]), torch.tensor([0.5, 0.0]), 0.5)
    torch.testing.assert_close(target, torch.tensor([1.0 + 0.25 * math.log(10.0), 2.0]))


def test_learn_step_regresses_on_the_soft_target():
    policy = _policy(alpha=0.5)
    assert get_policy_cls("sql") is SQLPolicy
    batch = {
        "obs": torch.randn(2, 3),
        "next_obs": torch.randn(2, 3),
        "action": torch.tensor([1, 0]),
        "reward": torch.tensor([1.0, 2.0]),
        "discount": torch.tensor([0.5, 0.0]),  # the second ends in a termination
    }
    first = (math.log(3.0) - (1.0 + 0.5 * 0.5 * math.log(10.0))) ** 2
    second = (0.0 - 2.0) ** 2
    stats = policy.learn(batch)
    assert stats["loss"].item() == pytest.approx((first + second) / 2, rel=1e-6)
    assert stats["soft_value"].item() == pytest.approx(0.5 * math.log(10.0), rel=1e-6)


def test_acting_samples_the_boltzmann_policy_and_evaluation_takes_the_argmax():
    policy = _policy(alpha=1.0)
    obs = np.zeros((4000, 3), dtype=np.float32)
    torch.manual_seed(1)
    actions, _ = policy.collect_action(obs, env_step=0)
    assert abs(actions.mean() - 0.75) < 0.03  # pi(1) = 3/4 (seeded; 4.4 standard deviations)
    assert (policy.eval_action(obs[:5]) == 1).all()


def test_di_engine_cartpole_sql_file_gets_di_engines_meaning():
    cfg = load_config(DING_FILE)
    p = cfg.policy
    assert (cfg.create_config.policy.type, p.model.dueling, p.model.hidden_sizes) == ("sql", True, [128, 128, 64])
    assert (p.learn.alpha, p.discount_factor, p.nstep, p.learn.learning_rate) == (0.12, 0.97, 1, 0.001)
    assert (p.learn.update_per_collect, p.learn.target_update_freq, p.collect.n_sample) == (3, 100, 8)
    assert p.other.replay_buffer.replay_buffer_size == 20000
    assert p.eval.eval_freq == 17 * 8  # DI-engine's 50 train iters at 3 per collect of 8 env steps
    shipped = load_config(REPO / "configs" / "cartpole_sql_config.py")
    assert (shipped.create_config.policy.type, shipped.policy.learn.alpha) == ("sql", 0.1)


def test_di_engine_cartpole_sql_file_trains(tmp_path):
    result = pipeline.train(str(DING_FILE), max_env_steps=96, exp_dir=tmp_path / "r")
    assert (result["env_steps"], result["train_iters"]) == (96, 15)  # 3 updates after each collect of 8 from 64 on


@pytest.mark.quality
@pytest.mark.timeout(1800)  # minutes of training: more than the suite's 300 s on a busy machine
def test_shipped_sql_config_reaches_475(tmp_path):
    result = pipeline.train(str(REPO / "configs" / "cartpole_sql_config.py"), exp_dir=tmp_path, max_env_steps=60_000)
    assert result["stopped_by"] == "stop_value", result["eval_history"]
    print(f"reached the threshold in {result['env_steps']} env steps, {result['wall_time_s']:.1f} s")  # for docs/rl.md
