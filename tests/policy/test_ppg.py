"""PPG (off-policy): the auxiliary step's joint loss (value distillation + KL) and value step against a hand
computation, the phases' schedule, and training to its threshold (quality)."""

from __future__ import annotations

import copy
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from ding_dist.entry import pipeline
from ding_dist.policy import get_policy_cls
from ding_dist.policy.ppg import PPGOffPolicy
from tests.policy import reference

REPO = Path(__file__).resolve().parents[2]
OBS = gym.spaces.Box(-1.0, 1.0, (3,))
ACT = gym.spaces.Discrete(3)


def make(**learn) -> PPGOffPolicy:
    torch.manual_seed(0)
    cfg = PPGOffPolicy.default_config()
    cfg.model.hidden_sizes = [8]
    cfg.learn.update(batch_size=4, update_per_collect=3, aux_freq=2, aux_train_epoch=2, aux_bc_weight=0.7)
    cfg.learn.update(learn)
    cfg.other.replay_buffer.policy.replay_buffer_size = 8
    return PPGOffPolicy(cfg, OBS, ACT)


def test_registered_with_di_engine_defaults():
    assert get_policy_cls("ppg_offpolicy") is PPGOffPolicy
    cfg = PPGOffPolicy.default_config()
    assert (cfg.learn.aux_freq, cfg.learn.aux_train_epoch, cfg.learn.aux_bc_weight) == (5, 6, 1.0)
    assert cfg.other.replay_buffer.policy.replay_buffer_size == cfg.other.replay_buffer.value.replay_buffer_size == 1000
    with pytest.raises(ValueError, match="Discrete"):
        PPGOffPolicy(cfg, OBS, gym.spaces.Box(-1.0, 1.0, (2,)))


def test_aux_step_matches_a_hand_computation():
    policy = make(clip_ratio=0.1)
    g = torch.Generator().manual_seed(1)
    batch = {
        "obs": torch.rand(5, 3, generator=g) * 2 - 1,
        "value": torch.randn(5, generator=g),
        "adv": torch.randn(5, generator=g),
        "old_logits": torch.randn(5, 3, generator=g),
    }
    net = copy.deepcopy(policy.model)
    ret = batch["adv"] + batch["value"]
    h = net.policy.trunk(batch["obs"])
    logits, aux_v = net.policy.pi(h), net.policy.aux_v(h).squeeze(-1)
    aux_clip = batch["value"] + (aux_v - batch["value"]).clamp(-0.1, 0.1)
    aux_loss = 0.5 * torch.max((aux_v - ret) ** 2, (aux_clip - ret) ** 2).mean()
    p_old = torch.softmax(batch["old_logits"], -1)
    kl = (p_old * (p_old.log() - torch.log_softmax(logits, -1))).sum(-1).mean()
    grads = torch.autograd.grad(aux_loss + 0.7 * kl, list(net.policy.parameters()))
    v = net.value(batch["obs"]).squeeze(-1)
    v_clip = batch["value"] + (v - batch["value"]).clamp(-0.1, 0.1)
    value_loss = 0.5 * torch.max((v - ret) ** 2, (v_clip - ret) ** 2).mean()
    value_grads = torch.autograd.grad(value_loss, list(net.value.parameters()))

    stats = policy.aux_step(batch)
    assert stats["loss"].item() == pytest.approx(aux_loss.item(), rel=1e-5)
    assert stats["kl"].item() == pytest.approx(kl.item(), rel=1e-5)
    assert stats["value_loss"].item() == pytest.approx(value_loss.item(), rel=1e-5)
    for p, grad in zip(policy.model.policy.parameters(), grads):
        torch.testing.assert_close(p.grad, grad, rtol=1e-5, atol=1e-7)
    for p, grad in zip(policy.model.value.parameters(), value_grads):
        torch.testing.assert_close(p.grad, grad, rtol=1e-5, atol=1e-7)


ADV = torch.tensor([12.0, -7.0, 3.0, -4.0, 9.0, 0.5, -2.0, 8.0])  # std 6.4, mean 2.4: normalizing changes it


def _batch(seed: int = 2) -> dict[str, torch.Tensor]:
    """Eight replayed samples; the stored log-probabilities put the ratio to the (near-uniform) policy outside
    ``[0.9, 1.1]`` on both sides."""
    g = torch.Generator().manual_seed(seed)
    return {
        "obs": torch.rand(8, 3, generator=g) * 2 - 1,
        "action": torch.randint(0, 3, (8,), generator=g),
        "logp": torch.linspace(-2.5, -0.2, 8)[torch.randperm(8, generator=g)],
        "value": torch.randn(8, generator=g),
        "adv": ADV.clone(),
    }


def _clipped_value_loss_by_hand(v: torch.Tensor, v_old: torch.Tensor, ret: torch.Tensor, clip: float) -> torch.Tensor:
    terms, binds = [], []
    for i in range(len(v)):
        v_clip = v_old[i] + (v[i] - v_old[i]).clamp(-clip, clip)
        terms.append(0.5 * torch.max((v[i] - ret[i]) ** 2, (v_clip - ret[i]) ** 2))
        binds.append(bool((v_clip - ret[i]) ** 2 > (v[i] - ret[i]) ** 2))
    assert any(binds) and not all(binds)  # the clip binds on some samples only
    return torch.stack(terms).mean()


def _grads_of(loss: torch.Tensor, module: torch.nn.Module) -> list[torch.Tensor]:
    got = torch.autograd.grad(loss, list(module.parameters()), allow_unused=True)
    return [torch.zeros_like(p) if g is None else g for p, g in zip(module.parameters(), got)]


@pytest.mark.parametrize("adv_norm", [False, True])
def test_policy_step_matches_a_hand_computation(adv_norm):
    """The policy phase's step per sample: the ratio to the stored log-probabilities, the clipped surrogate on the
    (normalized) advantages, minus ``entropy_weight * H``; gradients on the policy network (none on its value head)."""
    policy = make(clip_ratio=0.1, entropy_weight=0.3, adv_norm=adv_norm)
    batch = _batch()
    a = reference.normalized(ADV.double().numpy()) if adv_norm else ADV.double().numpy()
    net = copy.deepcopy(policy.model)
    dist = torch.distributions.Categorical(logits=net.policy(batch["obs"])[0])
    ratio = (dist.log_prob(batch["action"]) - batch["logp"]).exp()
    assert ratio.min() < 0.9 and ratio.max() > 1.1  # the clip is active on both sides
    terms = [torch.max(-float(a[i]) * ratio[i], -float(a[i]) * ratio[i].clamp(0.9, 1.1)) for i in range(8)]
    policy_loss, entropy = torch.stack(terms).mean(), dist.entropy().mean()
    expected = _grads_of(policy_loss - 0.3 * entropy, net.policy)

    stats = policy.policy_step(batch)
    assert stats["policy_loss"].item() == pytest.approx(policy_loss.item(), rel=1e-5, abs=1e-6)
    assert stats["entropy"].item() == pytest.approx(entropy.item(), rel=1e-6)
    reference.assert_grads_close(policy.model.policy, expected)


def test_value_step_matches_a_hand_computation():
    """The policy phase's value step: ``value_weight * 0.5 * max((V - R)^2, (V_clip - R)^2)`` against
    ``R = V_old + A`` on the value network."""
    policy = make(clip_ratio=0.1, value_weight=0.7)
    batch = _batch()
    net = copy.deepcopy(policy.model)
    v = net.value(batch["obs"]).squeeze(-1)
    loss = 0.7 * _clipped_value_loss_by_hand(v, batch["value"], ADV + batch["value"], 0.1)
    expected = _grads_of(loss, net.value)

    stats = policy.value_step(batch)
    assert stats["value_loss"].item() == pytest.approx(loss.item(), rel=1e-5)
    reference.assert_grads_close(policy.model.value, expected)


def test_aux_phase_distills_against_the_logits_frozen_at_its_start():
    """Two epochs of one minibatch: every auxiliary step gets the policy's logits from before the phase, and its KL
    is ``KL(pi_old || pi)`` against them, written out in float64 (0 on the first step, not on the second, where the
    policy has moved); the phase reports the steps' mean. (The step's own loss: test_aux_step_matches_...)"""
    policy = make(clip_ratio=0.1, batch_size=8, aux_train_epoch=2, aux_bc_weight=0.7, learning_rate=0.05)
    reference.perturb(policy.model.policy, scale=0.5, seed=4)  # logits far from uniform: freezing them matters
    batch = _batch()
    policy.kept = [{k: batch[k] for k in ("obs", "value", "adv")}]
    before = copy.deepcopy(policy.model.policy)
    calls, aux_step = [], policy.aux_step

    def recorded(b):  # the real step, with the policy's logits just before it
        with torch.no_grad():
            now = policy.model.policy(b["obs"])[0].double().numpy()
        out = aux_step(b)
        calls.append((b, now, out))
        return out

    policy.aux_step = recorded
    stats = policy.aux_phase()
    assert len(calls) == 2 and policy.kept == []
    kls = []
    for b, now, out in calls:
        with torch.no_grad():
            frozen = before(b["obs"])[0]
        torch.testing.assert_close(b["old_logits"], frozen)
        old = frozen.double().numpy()
        kl = 0.0
        for i in range(len(old)):
            p_old = np.exp(old[i] - old[i].max()) / np.exp(old[i] - old[i].max()).sum()
            log_p = now[i] - now[i].max() - np.log(np.exp(now[i] - now[i].max()).sum())
            kl += sum(p_old[k] * (np.log(p_old[k]) - log_p[k]) for k in range(3)) / len(old)
        assert out["kl"].item() == pytest.approx(kl, rel=1e-4, abs=1e-7)
        kls.append(kl)
    assert abs(kls[0]) < 1e-6 and kls[1] > 1e-3  # the second step's KL is against the frozen, not the moved, policy
    for key in ("loss", "kl", "value_loss"):
        assert stats[key].item() == pytest.approx(sum(out[key].item() for *_, out in calls) / 2, rel=1e-6), key


def _rollout(t: int = 4, n: int = 2) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "obs": rng.uniform(-1, 1, (t, n, 3)).astype(np.float32),
        "next_obs": rng.uniform(-1, 1, (t, n, 3)).astype(np.float32),
        "action": rng.integers(0, 3, (t, n)),
        "logp": np.full((t, n), -1.1, np.float32),
        "value": rng.normal(size=(t, n)).astype(np.float32),
        "reward": rng.normal(size=(t, n)).astype(np.float32),
        "terminated": np.zeros((t, n), bool),
        "truncated": np.zeros((t, n), bool),
        "last_obs": rng.uniform(-1, 1, (n, 3)).astype(np.float32),
    }


def test_policy_step_moves_the_policy_head_only():
    policy = make()
    g = torch.Generator().manual_seed(2)
    batch = {"obs": torch.rand(4, 3, generator=g), "action": torch.tensor([0, 1, 2, 1]), "logp": torch.full((4,), -1.1),
             "adv": torch.randn(4, generator=g)}  # fmt: skip
    before = copy.deepcopy(policy.model)
    policy.policy_step(batch)
    assert all(
        torch.equal(a, b) for a, b in zip(before.policy.aux_v.parameters(), policy.model.policy.aux_v.parameters())
    )
    assert all(torch.equal(a, b) for a, b in zip(before.value.parameters(), policy.model.value.parameters()))
    assert not torch.equal(before.policy.pi.weight, policy.model.policy.pi.weight)


def test_auxiliary_phase_every_aux_freq_steps_on_the_kept_batches():
    policy = make()
    stats = policy.learn(_rollout())  # steps 1-3; the auxiliary phase after step 2 on the 2 value batches kept
    assert policy.train_iter == 3 and len(policy.kept) == 1 and "aux_kl" in stats
    stats = policy.learn(_rollout())  # steps 4 (phase on 2 kept) to 6 (phase on 2 kept)
    assert policy.train_iter == 6 and policy.kept == [] and "aux_kl" in stats
    assert (len(policy.replay), len(policy.value_replay)) == (8, 16)  # each rollout's 8 samples; rings of 8, 1000


@pytest.mark.quality
@pytest.mark.timeout(1800)
def test_cartpole_reaches_its_threshold(tmp_path):
    result = pipeline.train(str(REPO / "configs" / "cartpole_ppg_config.py"), exp_dir=tmp_path, max_env_steps=300_000)
    assert result["stopped_by"] == "stop_value", result["eval_history"]
    print(f"reached the threshold in {result['env_steps']} env steps, {result['wall_time_s']:.1f} s")  # docs/rl.md
