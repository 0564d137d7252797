"""Munchausen DQN: the Munchausen target and a learn step, computed by hand."""

from __future__ import annotations

import math
from pathlib import Path

import gymnasium as gym
import pytest
import torch

from ding_dist.entry import pipeline
from ding_dist.entry.pipeline import load_config
from ding_dist.policy import get_policy_cls
from ding_dist.policy.mdqn import MDQNPolicy, munchausen_target

REPO = Path(__file__).resolve().parents[2]
DING_FILE = REPO / "tests" / "config" / "ding_files" / "cartpole_mdqn_ding_config.py"
OBS, ACT = gym.spaces.Box(-1.0, 1.0, (3,)), gym.spaces.Discrete(2)
#: Q-values [0, ln 3] at temperature 1: pi = softmax = [1/4, 3/4], tau log pi = [-ln 4, ln 3/4], soft value ln 4.
Q = torch.tensor([[0.0, math.log(3.0)]])


@pytest.mark.parametrize(
    ("action", "reward", "discount", "expected"),
    [
        (1, 1.0, 0.5, 1.0 + 0.9 * math.log(0.75) + 0.5 * math.log(4.0)),
        (0, 0.0, 0.5, 0.9 * -1.0 + 0.5 * math.log(4.0)),  # tau log pi(0) = -ln 4 is clipped to -1
        (0, 2.0, 0.0, 2.0 - 0.9),  # a termination: no soft value of the next state
    ],
)
def test_munchausen_target_by_hand(action, reward, discount, expected):
    target = munchausen_target(
        Q, Q, torch.tensor([action]), torch.tensor([reward]), torch.tensor([discount]), tau=1.0, alpha=0.9
    )
    assert target.item() == pytest.approx(expected, rel=1e-6)


def test_munchausen_target_by_hand_at_tau_one_half_on_two_rows():
    """tau != 1 (q / tau is not q * tau) and two different rows (the log-sum-exp stays per row)."""
    q = torch.tensor([[0.0, math.log(3.0)], [1.0, 1.0]])
    # row 0: softmax(q / 0.5) = [1/10, 9/10]; row 1: [1/2, 1/2]; tau log pi = 0.5 * log pi
    bonus0 = 0.9 * 0.5 * math.log(0.9)  # action 1 of row 0 (above the clip at -1)
    soft0 = 0.1 * (0.0 - 0.5 * math.log(0.1)) + 0.9 * (math.log(3.0) - 0.5 * math.log(0.9))
    bonus1 = 0.9 * 0.5 * math.log(0.5)  # action 0 of row 1
    soft1 = 1.0 - 0.5 * math.log(0.5)
    target = munchausen_target(
        q, q, torch.tensor([1, 0]), torch.tensor([1.0, 0.0]), torch.tensor([0.5, 0.25]), tau=0.5, alpha=0.9
    )
    assert target.tolist() == pytest.approx([1.0 + bonus0 + 0.5 * soft0, bonus1 + 0.25 * soft1], rel=1e-6)


def test_munchausen_target_at_a_small_temperature_is_the_hard_max():
    q = torch.tensor([[1.0, 2.0]])
    target = munchausen_target(q, q, torch.tensor([1]), torch.tensor([0.0]), torch.tensor([1.0]), tau=0.01, alpha=0.9)
    assert target.item() == pytest.approx(2.0, abs=1e-6)  # greedy action: log pi = 0; next value: max Q


def test_learn_step_regresses_on_the_munchausen_target():
    torch.manual_seed(0)
    cfg = MDQNPolicy.default_config()
    cfg.device = "cpu"
    cfg.model.update(hidden_sizes=[4], dueling=False)
    cfg.update(entropy_tau=1.0, m_alpha=0.9)
    cfg.learn.update(grad_clip_norm=None)
    policy = MDQNPolicy(cfg, OBS, ACT)
    assert get_policy_cls("mdqn") is MDQNPolicy
    assert policy.optimizer.defaults["eps"] == 0.0003125  # DI-engine's MDQN Adam epsilon
    with torch.no_grad():  # Q-values [0, ln 3] whatever the observation
        for net in (policy.model, policy.target_model):
            net.head.weight.zero_()
            net.head.bias.copy_(Q[0])
    batch = {
        "obs": torch.randn(2, 3),
        "next_obs": torch.randn(2, 3),
        "action": torch.tensor([1, 0]),
        "reward": torch.tensor([1.0, 2.0]),
        "discount": torch.tensor([0.5, 0.0]),
    }
    first = (math.log(3.0) - (1.0 + 0.9 * math.log(0.75) + 0.5 * math.log(4.0))) ** 2
    second = (0.0 - (2.0 - 0.9)) ** 2
    stats = policy.learn(batch)
    assert stats["loss"].item() == pytest.approx((first + second) / 2, rel=1e-6)
    with pytest.raises(ValueError, match="nstep must be 1"):
        MDQNPolicy({**cfg, "nstep": 3}, OBS, ACT)


def test_di_engine_cartpole_mdqn_file_gets_di_engines_meaning():
    cfg = load_config(DING_FILE)  # accepted as it is: DI-engine's MDQN file asks for no prioritized replay
    p = cfg.policy
    assert (cfg.create_config.policy.type, p.model.dueling, p.model.hidden_sizes) == ("mdqn", True, [128, 128, 64])
    assert (p.entropy_tau, p.m_alpha, p.discount_factor, p.nstep) == (0.03, 0.9, 0.97, 1)
    assert (p.learn.update_per_collect, p.learn.target_update_freq, p.collect.n_sample) == (5, 100, 8)
    assert p.eval.eval_freq == 8 * 8  # DI-engine's 40 train iters at 5 per collect of 8 env steps
    shipped = load_config(REPO / "configs" / "cartpole_mdqn_config.py")
    assert (shipped.create_config.policy.type, shipped.policy.entropy_tau) == ("mdqn", 0.03)


@pytest.mark.quality
@pytest.mark.timeout(1800)  # minutes of training: more than the suite's 300 s on a busy machine
def test_shipped_mdqn_config_reaches_475(tmp_path):
    result = pipeline.train(str(REPO / "configs" / "cartpole_mdqn_config.py"), exp_dir=tmp_path, max_env_steps=60_000)
    assert result["stopped_by"] == "stop_value", result["eval_history"]
