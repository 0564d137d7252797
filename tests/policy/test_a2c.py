"""A2C: the loss (advantage, value, entropy terms) against a hand computation, advantage normalization, DI-engine's
own CartPole file, and training to its threshold (quality)."""

from __future__ import annotations

import copy
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch.distributions import Categorical

from ding_dist.entry import pipeline
from ding_dist.entry.pipeline import load_config
from ding_dist.policy import get_policy_cls
from ding_dist.policy.a2c import A2CPolicy

REPO = Path(__file__).resolve().parents[2]
DING_A2C = REPO / "tests" / "config" / "ding_files" / "cartpole_a2c_config.py"
OBS = gym.spaces.Box(-1.0, 1.0, (3,))
ACT = gym.spaces.Discrete(3)
GAMMA, LAM = 0.9, 0.5


def make(**learn) -> A2CPolicy:
    torch.manual_seed(0)
    cfg = A2CPolicy.default_config()
    cfg.model.hidden_sizes = [8]
    cfg.collect.update(discount_factor=GAMMA, gae_lambda=LAM)
    cfg.learn.update(grad_clip_norm=None, value_weight=0.7, entropy_weight=0.2)
    cfg.learn.update(learn)
    return A2CPolicy(cfg, OBS, ACT)


def rollout(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    t, n = 3, 2
    return {
        "obs": rng.uniform(-1, 1, (t, n, 3)).astype(np.float32),
        "next_obs": rng.uniform(-1, 1, (t, n, 3)).astype(np.float32),
        "action": rng.integers(0, 3, (t, n)),
        "logp": np.full((t, n), -1.1, np.float32),
        "value": np.zeros((t, n), np.float32),  # replaced by the network's values below
        "reward": rng.normal(size=(t, n)).astype(np.float32) + 2.0,
        "terminated": np.array([[False, False], [True, False], [False, False]]),
        "truncated": np.zeros((t, n), bool),
        "last_obs": rng.uniform(-1, 1, (n, 3)).astype(np.float32),
    }


def test_registered_with_di_engine_defaults():
    assert get_policy_cls("a2c") is A2CPolicy and A2CPolicy.on_policy
    cfg = A2CPolicy.default_config()
    assert (cfg.collect.discount_factor, cfg.collect.gae_lambda, cfg.learn.entropy_weight) == (0.9, 0.95, 0.01)
    assert (cfg.learn.adv_norm, cfg.learn.grad_clip_norm, cfg.learn.value_weight) == (False, 0.5, 0.5)
    assert "batch_size" not in cfg.learn and "epoch_per_collect" not in cfg.learn


@pytest.mark.parametrize("adv_norm", [False, True])
def test_loss_and_gradient_match_a_hand_computation(adv_norm):
    policy = make(adv_norm=adv_norm)
    r = rollout()
    model = copy.deepcopy(policy.model)
    with torch.no_grad():
        r["value"] = model(torch.as_tensor(r["obs"]))[1].numpy()
        v_last = model(torch.as_tensor(r["last_obs"]))[1].numpy()
    # GAE written out for T = 3: env 0 terminates at t = 1, so its t = 0, 1 deltas do not see t = 2
    v, rew, done = r["value"], r["reward"], r["terminated"].astype(np.float32)
    nxt = np.stack([v[1], v[2], v_last])
    delta = rew + GAMMA * nxt * (1 - done) - v
    adv = np.zeros_like(delta)
    adv[2] = delta[2]
    adv[1] = delta[1] + GAMMA * LAM * (1 - done[1]) * adv[2]
    adv[0] = delta[0] + GAMMA * LAM * (1 - done[0]) * adv[1]
    ret = torch.as_tensor((adv + v).reshape(-1))
    a = torch.as_tensor(adv.reshape(-1))
    if adv_norm:
        a = (a - a.mean()) / (a.std() + 1e-8)
    logits, value = model(torch.as_tensor(r["obs"].reshape(-1, 3)))
    dist = Categorical(logits=logits)
    logp = dist.log_prob(torch.as_tensor(r["action"].reshape(-1)))
    policy_loss = -(logp * a).mean()
    value_loss = ((ret - value) ** 2).mean()  # DI-engine's a2c_error: no half
    loss = policy_loss + 0.7 * value_loss - 0.2 * dist.entropy().mean()
    grads = torch.autograd.grad(loss, list(model.parameters()))

    stats = policy.learn(r)
    assert stats["loss"].item() == pytest.approx(loss.item(), rel=1e-5)
    assert stats["policy_loss"].item() == pytest.approx(policy_loss.item(), rel=1e-5, abs=1e-7)
    assert stats["value_loss"].item() == pytest.approx(value_loss.item(), rel=1e-5)
    for p, g in zip(policy.model.parameters(), grads):
        torch.testing.assert_close(p.grad, g, rtol=1e-5, atol=1e-7)
    assert policy.train_iter == 1  # one step per rollout


def test_gradient_clipping_bounds_the_step():
    policy = make(grad_clip_norm=1e-3)
    policy.learn(rollout())
    norm = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in policy.model.parameters()]))
    assert norm.item() == pytest.approx(1e-3, rel=1e-4)


def test_di_engine_a2c_file_gets_di_engines_meaning():
    cfg = load_config(DING_A2C)
    p = cfg.policy
    assert (cfg.env.id, cfg.env.stop_value, cfg.create_config.policy.type) == ("CartPole-v0", 195, "a2c")
    assert (p.model.hidden_sizes, p.model.activation) == ([128, 128, 64, 64], "relu")
    assert (p.collect.n_sample, p.collect.discount_factor, p.collect.gae_lambda) == (80, 0.9, 0.95)
    assert (p.learn.learning_rate, p.learn.value_weight, p.learn.entropy_weight) == (0.001, 0.5, 0.01)
    assert (p.learn.adv_norm, p.learn.grad_clip_norm) == (False, 0.5)
    assert "batch_size" not in p.learn
    assert p.eval.eval_freq == 4000  # 50 train iters = 50 collects of 80 env steps


def test_di_engine_a2c_file_trains(tmp_path):
    result = pipeline.train(str(DING_A2C), max_env_steps=240, exp_dir=tmp_path / "r")
    assert (result["env_steps"], result["train_iters"]) == (240, 3)  # 3 collects of 80, one step each


@pytest.mark.quality
def test_cartpole_reaches_its_threshold(tmp_path):
    result = pipeline.train(str(REPO / "configs" / "cartpole_a2c_config.py"), exp_dir=tmp_path, max_env_steps=300_000)
    assert result["stopped_by"] == "stop_value", result["eval_history"]
    print(f"reached the threshold in {result['env_steps']} env steps, {result['wall_time_s']:.1f} s")  # for docs/rl.md
