"""ACER: Retrace targets, truncated importance sampling with bias correction and the trust-region projection
against hand computations, the rollout's chunks, and training to its threshold (quality)."""

from __future__ import annotations

import copy
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from ding_dist.entry import pipeline
from ding_dist.policy import get_policy_cls
from ding_dist.policy.acer import ACERPolicy, retrace_targets, trust_region_gradient

REPO = Path(__file__).resolve().parents[2]
OBS = gym.spaces.Box(-1.0, 1.0, (3,))
ACT = gym.spaces.Discrete(3)
GAMMA = 0.8


def make(**learn) -> ACERPolicy:
    torch.manual_seed(0)
    cfg = ACERPolicy.default_config()
    cfg.model.hidden_sizes = [8]
    cfg.learn.update(unroll_len=3, batch_size=2, update_per_collect=1, discount_factor=GAMMA, entropy_weight=0.3)
    cfg.learn.update(c_clip_ratio=1.5, target_theta=0.5)
    cfg.learn.update(learn)
    return ACERPolicy(cfg, OBS, ACT)


def test_registered_with_di_engine_defaults():
    assert get_policy_cls("acer") is ACERPolicy and ACERPolicy.on_policy
    cfg = ACERPolicy.default_config()
    assert (cfg.learn.unroll_len, cfg.learn.update_per_collect, cfg.learn.batch_size) == (32, 4, 16)
    assert (cfg.learn.c_clip_ratio, cfg.learn.trust_region, cfg.learn.trust_region_value) == (10.0, True, 1.0)
    assert (cfg.learn.discount_factor, cfg.learn.entropy_weight, cfg.learn.target_theta) == (0.9, 1e-4, 0.01)


def test_retrace_targets_match_a_hand_computation():
    # one chunk of 4 steps: a truncation after step 1 (bootstraps V(final obs)), a termination at step 2
    q = torch.tensor([1.0, 2.0, 3.0, 4.0])[:, None]
    v = torch.tensor([0.5, 1.5, 2.5, 3.5])[:, None]
    r = torch.tensor([1.0, -1.0, 2.0, 0.5])[:, None]
    rho = torch.tensor([2.0, 2.5, 0.25, 3.0])[:, None]
    terminated = torch.tensor([False, False, True, False])[:, None]
    cut = torch.tensor([False, True, False, True])[:, None]
    v_next = torch.tensor([9.0, 7.0, 9.0, 6.0])[:, None]  # V(next obs); read only where cut
    got = retrace_targets(q, v, r, rho, terminated, cut, v_next, GAMMA)
    ret3 = 0.5 + GAMMA * 6.0  # chunk end: bootstraps V(next obs)
    ret2 = 2.0  # terminated: no bootstrap
    ret1 = -1.0 + GAMMA * 7.0  # truncated: V(final obs), not step 2
    ret0 = 1.0 + GAMMA * (min(1.0, 2.5) * (ret1 - 2.0) + 1.5)  # the trace through step 1: c = min(1, rho_1)
    torch.testing.assert_close(got[:, 0], torch.tensor([ret0, ret1, ret2, ret3]))


def test_trust_region_projects_only_beyond_delta():
    g, k = torch.tensor([[1.0, 2.0], [0.1, 0.0]]), torch.tensor([[0.5, 0.5], [0.5, 0.5]])
    got = trust_region_gradient(g, k, delta=0.5)
    scale = (1.5 - 0.5) / 0.5  # row 0: k.g = 1.5 > delta; row 1: k.g = 0.05 < delta, unchanged
    torch.testing.assert_close(got, torch.tensor([[1.0 - scale * 0.5, 2.0 - scale * 0.5], [0.1, 0.0]]))


def _batch(seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    b, length = 2, 3
    probs = torch.softmax(torch.randn(b, length, 3, generator=g) * 2, -1)
    return {
        "obs": torch.rand(b, length, 3, generator=g) * 2 - 1,
        "next_obs": torch.rand(b, length, 3, generator=g) * 2 - 1,
        "action": torch.randint(0, 3, (b, length), generator=g),
        "reward": torch.randn(b, length, generator=g),
        "terminated": torch.tensor([[False, True, False], [False, False, False]]),
        "truncated": torch.tensor([[False, False, False], [True, False, False]]),
        "probs": probs,
    }


@pytest.mark.parametrize("delta", [None, 1e-3])
def test_update_matches_a_hand_computation(delta):
    policy = make(trust_region=delta is not None, trust_region_value=delta or 1.0)
    batch = _batch()
    actor, critic, avg = copy.deepcopy(policy.actor), copy.deepcopy(policy.critic), copy.deepcopy(policy.avg_actor)
    b = {k: v.transpose(0, 1) for k, v in batch.items()}
    a = b["action"].unsqueeze(-1)
    log_pi = torch.log_softmax(actor(b["obs"]), -1)
    q = critic(b["obs"])
    pi, qd = log_pi.exp().detach(), q.detach()
    v = (pi * qd).sum(-1)
    rho = pi / b["probs"]
    with torch.no_grad():
        v_next = (torch.softmax(actor(b["next_obs"]), -1) * critic(b["next_obs"])).sum(-1)
    cut = b["truncated"].clone()
    cut[-1] = True
    rho_a = rho.gather(-1, a).squeeze(-1)
    q_ret = retrace_targets(qd.gather(-1, a).squeeze(-1), v, b["reward"], rho_a, b["terminated"], cut, v_next, GAMMA)
    truncated_is = rho_a.clamp(max=1.5) * (q_ret - v) * log_pi.gather(-1, a).squeeze(-1)
    correction = ((1 - 1.5 / rho).clamp(min=0) * pi * (qd - v[..., None]) * log_pi).sum(-1)
    entropy = -(log_pi.exp() * log_pi).sum(-1)
    actor_loss = (-(truncated_is + correction) - 0.3 * entropy).mean()
    g = torch.autograd.grad(actor_loss, log_pi, retain_graph=True)[0]
    if delta is not None:  # g - max(0, (k.g - delta) / |k|^2) k, k: the average policy's probabilities
        k = torch.softmax(avg(b["obs"]), -1)
        g = g - (((k * g).sum(-1, keepdim=True) - delta) / (k * k).sum(-1, keepdim=True)).clamp(min=0) * k
        assert not torch.allclose(g, torch.autograd.grad(actor_loss, log_pi, retain_graph=True)[0])  # it projects
    actor_grads = torch.autograd.grad(log_pi, list(actor.parameters()), g)
    critic_loss = 0.5 * ((q_ret - q.gather(-1, a).squeeze(-1)) ** 2).mean()
    critic_grads = torch.autograd.grad(critic_loss, list(critic.parameters()))

    stats = policy.update(batch)
    assert stats["actor_loss"].item() == pytest.approx(actor_loss.item(), rel=1e-5)
    assert stats["critic_loss"].item() == pytest.approx(critic_loss.item(), rel=1e-5)
    for p, grad in zip(policy.actor.parameters(), actor_grads):
        torch.testing.assert_close(p.grad, grad, rtol=1e-5, atol=1e-7)
    for p, grad in zip(policy.critic.parameters(), critic_grads):
        torch.testing.assert_close(p.grad, grad, rtol=1e-5, atol=1e-7)
    for p_avg, p_old, p_new in zip(policy.avg_actor.parameters(), avg.parameters(), policy.actor.parameters()):
        torch.testing.assert_close(p_avg, 0.5 * p_old + 0.5 * p_new)  # target_theta = 0.5


def test_learn_cuts_each_env_rollout_into_chunks():
    policy = make()
    rng = np.random.default_rng(0)
    t, n = 6, 2
    rollout = {
        "obs": rng.uniform(-1, 1, (t, n, 3)).astype(np.float32),
        "next_obs": rng.uniform(-1, 1, (t, n, 3)).astype(np.float32),
        "action": rng.integers(0, 3, (t, n)),
        "reward": rng.normal(size=(t, n)).astype(np.float32),
        "terminated": np.zeros((t, n), bool),
        "truncated": np.zeros((t, n), bool),
        "probs": np.full((t, n, 3), 1 / 3, np.float32),
    }
    policy.learn(rollout)
    assert len(policy.replay) == 4 and policy.train_iter == 1
    stored = policy.replay._data["obs"]
    for chunk, (k, env) in enumerate([(0, 0), (0, 1), (1, 0), (1, 1)]):  # chunk k of env: steps 3k .. 3k + 2
        np.testing.assert_array_equal(stored[chunk].numpy(), rollout["obs"][3 * k : 3 * k + 3, env])
    with pytest.raises(ValueError, match="unroll_len=3"):
        policy.learn({k: v[:4] for k, v in rollout.items()})


@pytest.mark.quality
@pytest.mark.timeout(1800)
def test_cartpole_reaches_its_threshold(tmp_path):
    result = pipeline.train(str(REPO / "configs" / "cartpole_acer_config.py"), exp_dir=tmp_path, max_env_steps=300_000)
    assert result["stopped_by"] == "stop_value", result["eval_history"]
    print(f"reached the threshold in {result['env_steps']} env steps, {result['wall_time_s']:.1f} s")  # docs/rl.md
