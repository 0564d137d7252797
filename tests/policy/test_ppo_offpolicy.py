"""Off-policy PPO: GAE once at collection into the replay ring, the clipped step on a replayed batch against a
hand computation, the ring, and training to its threshold (quality)."""

from __future__ import annotations

import copy
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch.distributions import Categorical

from ding_dist.entry import pipeline
from ding_dist.policy import get_policy_cls
from ding_dist.policy.ppo import compute_gae
from ding_dist.policy.ppo_offpolicy import PPOOffPolicy, SampleRing
from tests.policy import reference

REPO = Path(__file__).resolve().parents[2]
OBS = gym.spaces.Box(-1.0, 1.0, (3,))
ACT = gym.spaces.Discrete(3)


def make(**learn) -> PPOOffPolicy:
    torch.manual_seed(0)
    cfg = PPOOffPolicy.default_config()
    cfg.model.hidden_sizes = [8]
    cfg.collect.update(discount_factor=0.9, gae_lambda=0.5)
    cfg.learn.update(grad_clip_norm=None, value_weight=0.7, entropy_weight=0.2, batch_size=5, update_per_collect=3)
    cfg.learn.update(learn)
    cfg.other.replay_buffer.replay_buffer_size = 10
    return PPOOffPolicy(cfg, OBS, ACT)


def rollout(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    t, n = 3, 2
    return {
        "obs": rng.uniform(-1, 1, (t, n, 3)).astype(np.float32),
        "next_obs": rng.uniform(-1, 1, (t, n, 3)).astype(np.float32),
        "action": rng.integers(0, 3, (t, n)),
        "logp": rng.uniform(-2, -0.5, (t, n)).astype(np.float32),
        "value": rng.normal(size=(t, n)).astype(np.float32),
        "reward": rng.normal(size=(t, n)).astype(np.float32) + 2.0,
        "terminated": np.array([[False, False], [True, False], [False, False]]),
        "truncated": np.zeros((t, n), bool),
        "last_obs": rng.uniform(-1, 1, (n, 3)).astype(np.float32),
    }


def test_registered_with_di_engine_defaults():
    assert get_policy_cls("ppo_offpolicy") is PPOOffPolicy and PPOOffPolicy.on_policy
    cfg = PPOOffPolicy.default_config()
    assert (cfg.learn.update_per_collect, cfg.learn.learning_rate, cfg.learn.entropy_weight) == (5, 1e-3, 0.01)
    assert (cfg.learn.clip_ratio, cfg.learn.value_clip_ratio, cfg.learn.adv_norm) == (0.2, 0.2, False)
    assert cfg.other.replay_buffer.replay_buffer_size == 10000 and "preempt" not in cfg.collect


def test_learn_stores_gae_of_the_collecting_values_and_replays_it():
    policy = make()
    r = rollout()
    before = copy.deepcopy(policy.model)
    stats = policy.learn(r)
    assert policy.train_iter == 3 and len(policy.replay) == 6 and stats["loss"].shape == ()
    # GAE with the rollout's own values and the collecting network's bootstrap, computed once, stored as is
    with torch.no_grad():
        v_last = before(torch.as_tensor(r["last_obs"]))[1].numpy()
    nxt = np.concatenate([r["value"][1:], v_last[None]])
    adv, _ = compute_gae(r["reward"], r["value"], nxt, r["terminated"], 0.9, 0.5)
    stored = policy.replay._data
    np.testing.assert_allclose(stored["adv"][:6].numpy(), adv.reshape(-1), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(stored["logp"][:6].numpy(), r["logp"].reshape(-1))
    policy.learn(rollout(1))  # 12 samples into a ring of 10: the oldest 2 are overwritten
    assert len(policy.replay) == 10 and policy.train_iter == 6
    np.testing.assert_allclose(stored["adv"][2:6].numpy(), adv.reshape(-1)[2:], rtol=1e-5, atol=1e-6)


def _replay_batch(n: int = 8) -> dict[str, torch.Tensor]:
    """A replayed batch whose advantages have std > 5 and mean 2.4, and whose stored log-probabilities put the
    ratio to the (near-uniform) network outside ``[0.9, 1.1]`` on both sides."""
    g = torch.Generator().manual_seed(3)
    return {
        "obs": torch.rand(n, 3, generator=g) * 2 - 1,
        "action": torch.randint(0, 3, (n,), generator=g),
        "logp": torch.linspace(-2.5, -0.2, n)[torch.randperm(n, generator=g)],
        "value": torch.randn(n, generator=g),
        "adv": torch.tensor([12.0, -7.0, 3.0, -4.0, 9.0, 0.5, -2.0, 8.0]),
    }


@pytest.mark.parametrize("adv_norm, value_clip", [(False, 0.1), (True, 0.1), (False, None)])
def test_update_matches_a_hand_computation(adv_norm, value_clip):
    """One replayed step against the loss written out per sample: the ratio to the stored log-probabilities,
    the clipped surrogate on (normalized) advantages, ``0.5 * max`` of the clipped and unclipped value errors (or
    ``0.5 * (v - R)^2`` without the clip) against ``R = V_old + A`` (the raw advantage), value and entropy weights."""
    policy = make(clip_ratio=0.1, value_clip_ratio=value_clip, adv_norm=adv_norm)
    batch = _replay_batch()
    raw = batch["adv"].double().numpy()
    assert raw.std() > 5 and abs(raw.mean()) > 1  # the normalization's division and mean both matter
    a = reference.normalized(raw) if adv_norm else raw
    model = copy.deepcopy(policy.model)
    logits, v = model(batch["obs"])
    dist = Categorical(logits=logits)
    ratio = (dist.log_prob(batch["action"]) - batch["logp"]).exp()
    assert ratio.min() < 0.9 and ratio.max() > 1.1  # the clip is active on both sides
    old_v, ret = batch["value"], batch["adv"] + batch["value"]
    policy_terms, value_terms, clip_binds = [], [], []
    for i in range(len(a)):
        policy_terms.append(torch.max(-float(a[i]) * ratio[i], -float(a[i]) * ratio[i].clamp(0.9, 1.1)))
        v_clip = old_v[i] + (v[i] - old_v[i]).clamp(-0.1, 0.1)
        clip_binds.append(bool((v_clip - ret[i]) ** 2 > (v[i] - ret[i]) ** 2))
        unclipped = (v[i] - ret[i]) ** 2
        value_terms.append(0.5 * (unclipped if value_clip is None else torch.max(unclipped, (v_clip - ret[i]) ** 2)))
    assert any(clip_binds) and not all(clip_binds)  # the value clip binds on some samples only
    policy_loss, value_loss = torch.stack(policy_terms).mean(), torch.stack(value_terms).mean()
    entropy = dist.entropy().mean()
    loss = policy_loss + 0.7 * value_loss - 0.2 * entropy
    expected = torch.autograd.grad(loss, list(model.parameters()))

    stats = policy.update(batch)
    for key, want in (("loss", loss), ("policy_loss", policy_loss), ("value_loss", value_loss), ("entropy", entropy)):
        assert stats[key].item() == pytest.approx(want.item(), rel=1e-5, abs=1e-6), key
    assert stats["clip_frac"].item() == pytest.approx(((ratio - 1).abs() > 0.1).float().mean().item())
    reference.assert_grads_close(policy.model, expected)


def test_sample_ring_draws_only_what_it_holds():
    ring = SampleRing(4)
    with pytest.raises(ValueError, match="empty"):
        ring.sample(1)
    ring.add({"x": torch.tensor([1.0, 2.0, 3.0])})
    assert set(ring.sample(50)["x"].tolist()) == {1.0, 2.0, 3.0}
    ring.add({"x": torch.tensor([4.0, 5.0])})  # 5 overwrites 1
    assert set(ring.sample(200)["x"].tolist()) == {2.0, 3.0, 4.0, 5.0}


@pytest.mark.quality
@pytest.mark.timeout(1800)
def test_cartpole_reaches_its_threshold(tmp_path):
    config = REPO / "configs" / "cartpole_ppo_offpolicy_config.py"
    result = pipeline.train(str(config), exp_dir=tmp_path, max_env_steps=200_000)
    assert result["stopped_by"] == "stop_value", result["eval_history"]
    print(f"reached the threshold in {result['env_steps']} env steps, {result['wall_time_s']:.1f} s")  # docs/rl.md


def test_sample_ring_allocates_as_it_fills_and_wraps_as_a_ring():
    """Rows are allocated as samples arrive (a replay DI-engine sizes for 1000 Atari trajectories costs what it
    holds); the contents are those of a ring of the full capacity, checked against a list kept by hand."""
    ring, by_hand, capacity = SampleRing(300), [], 300
    for start in range(0, 400, 50):  # 8 adds of 50: the last two overwrite the oldest 100
        ring.add({"x": torch.arange(start, start + 50, dtype=torch.float32)})
        by_hand = (by_hand + list(range(start, start + 50)))[-capacity:]
        if start == 0:
            assert len(ring._data["x"]) == 64  # the first allocation, not 300 rows
    assert len(ring) == capacity and len(ring._data["x"]) == capacity
    assert sorted(ring._data["x"].tolist()) == sorted(by_hand)
    assert ring._data["x"][:100].tolist() == list(range(300, 400))  # rows 0-99 overwritten in ring order
