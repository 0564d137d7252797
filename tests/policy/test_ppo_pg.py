"""PPO-PG: the clipped loss on Monte-Carlo returns against a hand computation, the episodes' log-probs kept across
rollouts, DI-engine's own CartPole file (its meaning, a short run), training to a threshold (quality)."""

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
from ding_dist.policy.ppo_pg import PPOPGPolicy

REPO = Path(__file__).resolve().parents[2]
DING_PPOPG = REPO / "tests" / "config" / "ding_files" / "cartpole_ppopg_config.py"
OBS = gym.spaces.Box(-1.0, 1.0, (3,))
ACT = gym.spaces.Discrete(3)


def test_registered_with_di_engine_defaults():
    assert get_policy_cls("ppo_pg") is PPOPGPolicy and PPOPGPolicy.on_policy
    cfg = PPOPGPolicy.default_config()
    learn = (cfg.learn.epoch_per_collect, cfg.learn.batch_size, cfg.learn.learning_rate, cfg.learn.clip_ratio)
    assert learn == (10, 64, 3e-4, 0.2)
    assert (cfg.learn.entropy_weight, cfg.learn.grad_clip_norm, cfg.collect.discount_factor) == (0.0, 0.5, 0.99)
    policy = PPOPGPolicy(cfg, OBS, ACT)  # ppo_param_init: orthogonal weights (gain 1), zero biases
    first = policy.model.net[0]
    torch.testing.assert_close(first.weight.T @ first.weight, torch.eye(3), atol=1e-5, rtol=0)  # [128, 3] columns
    assert not first.bias.any()


def test_an_episode_across_two_rollouts_gets_the_hand_computed_clipped_loss():
    torch.manual_seed(0)
    cfg = PPOPGPolicy.default_config()
    cfg.model.hidden_sizes = [8]
    cfg.collect.update(n_episode=1, discount_factor=0.5)
    cfg.learn.update(epoch_per_collect=1, batch_size=64, entropy_weight=0.3, grad_clip_norm=None)
    policy = PPOPGPolicy(cfg, OBS, ACT)
    model = copy.deepcopy(policy.model)
    rng = np.random.default_rng(0)
    obs = rng.uniform(-1, 1, (6, 1, 3)).astype(np.float32)
    action = np.array([[0], [2], [1], [1], [0]])
    reward = np.array([[1.0], [2.0], [0.0], [3.0], [1.0]], np.float32)
    with torch.no_grad():  # old log-probs off the current ones, so that some ratios leave [0.8, 1.2]
        now = Categorical(logits=model(torch.as_tensor(obs[:5, 0]))).log_prob(torch.as_tensor(action[:, 0]))
    old = (now + torch.tensor([0.5, -0.5, 0.0, 0.1, -0.1])).numpy()[:, None]
    done = np.array([[False], [False], [False], [False], [True]])

    def part(s: slice) -> dict:
        return {"obs": obs[s], "next_obs": obs[s.start + 1 : s.stop + 1], "action": action[s], "reward": reward[s],
                "logp": old[s], "terminated": done[s], "truncated": np.zeros_like(done[s])}  # fmt: skip

    policy.learn(part(slice(0, 3)))  # the episode is still open: no update
    assert policy.train_iter == 0 and all(p.grad is None for p in policy.model.parameters())
    stats = policy.learn(part(slice(3, 5)))  # it ends: one epoch, one minibatch of its 5 steps
    assert policy.train_iter == 1

    g = torch.tensor([1 + 0.5 * 2 + 0.25 * 0 + 0.125 * 3 + 0.0625 * 1, 2 + 0.5 * 0 + 0.25 * 3 + 0.125 * 1,
                      0 + 0.5 * 3 + 0.25 * 1, 3 + 0.5 * 1, 1.0])  # fmt: skip
    dist = Categorical(logits=model(torch.as_tensor(obs[:5, 0])))
    ratio = (dist.log_prob(torch.as_tensor(action[:, 0])) - torch.as_tensor(old[:, 0])).exp()
    surrogate = torch.min(ratio * g, ratio.clamp(0.8, 1.2) * g)  # all returns > 0: the 1.65 ratio is clipped
    loss = -surrogate.mean() - 0.3 * dist.entropy().mean()
    grads = torch.autograd.grad(loss, list(model.parameters()))
    assert stats["loss"].item() == pytest.approx(loss.item(), rel=1e-5)
    assert stats["clip_frac"].item() == pytest.approx(2 / 5)  # exp(0.5) and exp(-0.5) leave the range
    assert stats["return_mean"].item() == pytest.approx(g.mean().item(), rel=1e-6)
    for p, grad in zip(policy.model.parameters(), grads):
        torch.testing.assert_close(p.grad, grad, rtol=1e-5, atol=1e-7)


def test_di_engine_ppopg_file_gets_di_engines_meaning():
    cfg = load_config(DING_PPOPG)
    p = cfg.policy
    assert (cfg.env.id, cfg.create_config.policy.type) == ("CartPole-v0", "ppo_pg")
    assert (p.model.hidden_sizes, p.collect.n_episode, p.collect.discount_factor) == ([128, 128, 64, 64], 160, 0.9)
    assert (p.learn.epoch_per_collect, p.learn.batch_size, p.learn.learning_rate) == (1, 64, 0.001)
    assert (p.learn.entropy_weight, p.learn.clip_ratio, p.learn.grad_clip_norm) == (0.01, 0.2, 0.5)
    assert (p.collect.n_sample, p.eval.eval_freq) == (128, 6400)  # 100 minibatches of 64, 1 epoch: 50 rollouts


def test_di_engine_ppopg_file_trains(tmp_path):
    result = pipeline.train(
        str(DING_PPOPG), max_env_steps=384, exp_dir=tmp_path / "r", overrides=["policy.collect.n_episode=2"]
    )
    assert result["env_steps"] == 384 and result["train_iters"] >= 1


@pytest.mark.quality
@pytest.mark.timeout(1800)
def test_cartpole_reaches_its_threshold(tmp_path):
    result = pipeline.train(
        str(REPO / "configs" / "cartpole_ppo_pg_config.py"), exp_dir=tmp_path, max_env_steps=500_000
    )
    assert result["stopped_by"] == "stop_value", result["eval_history"]
    print(f"reached the threshold in {result['env_steps']} env steps, {result['wall_time_s']:.1f} s")  # for docs/rl.md
