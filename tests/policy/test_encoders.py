"""Encoder choice from the observation space: Nature-CNN on uint8 images for DQN and PPO, MLPs otherwise."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from ding_dist.policy.dqn import DQNPolicy
from ding_dist.policy.encoders import NatureCNN, is_image_space, obs_tensor
from ding_dist.policy.ppo import ActorCritic, ImageActorCritic, PPOPolicy

IMAGE = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
VECTOR = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
ACTIONS = gym.spaces.Discrete(6)


def _dqn(obs_space, **learn):
    cfg = DQNPolicy.default_config()
    cfg.device = "cpu"
    cfg.model.hidden_sizes = [512]  # Nature DQN: the CNN's 512-unit layer, then the head
    cfg.learn.update(learn)
    return DQNPolicy(cfg, obs_space, ACTIONS)


def _ppo(obs_space):
    cfg = PPOPolicy.default_config()
    cfg.device = "cpu"
    cfg.learn.update(epoch_per_collect=1, batch_size=8)
    return PPOPolicy(cfg, obs_space, ACTIONS)


def test_image_space_detection():
    assert is_image_space(IMAGE)
    assert not is_image_space(VECTOR)
    assert not is_image_space(gym.spaces.Box(0.0, 1.0, (4, 84, 84), np.float32))  # not uint8
    assert not is_image_space(gym.spaces.Box(0, 255, (128,), np.uint8))  # Atari RAM: a vector
    assert obs_tensor(np.zeros((2, 4, 84, 84), np.uint8), IMAGE, "cpu").dtype == torch.uint8
    assert obs_tensor(np.zeros((2, 4), np.float64), VECTOR, "cpu").dtype == torch.float32


def test_nature_cnn_scales_uint8_by_255_inside_forward():
    cnn = NatureCNN((4, 84, 84))
    x = torch.randint(0, 256, (3, 4, 84, 84), dtype=torch.uint8)
    out = cnn(x)
    assert out.shape == (3, 512) and out.dtype == torch.float32
    expected = cnn.fc(cnn.convs(x.float() / 255.0))
    torch.testing.assert_close(out, expected)
    assert sum(p.numel() for p in cnn.parameters()) == 1_684_128  # 4x84x84 Nature-CNN with the 512 layer


def test_dqn_uses_the_cnn_on_images_and_the_mlp_otherwise():
    image_policy = _dqn(IMAGE)
    assert isinstance(image_policy.model.body[0], NatureCNN) and len(image_policy.model.body) == 1
    assert image_policy.model.head.in_features == 512
    cfg = DQNPolicy.default_config()
    cfg.device = "cpu"
    mlp_policy = DQNPolicy(cfg, VECTOR, ACTIONS)
    assert not any(isinstance(m, NatureCNN) for m in mlp_policy.model.modules())


def test_dqn_learns_on_uint8_image_batches():
    policy = _dqn(IMAGE, learning_rate=1e-3)
    rng = np.random.default_rng(0)
    obs = rng.integers(0, 256, (16, 4, 84, 84), dtype=np.uint8)
    actions, _ = policy.collect_action(obs, env_step=10**6)
    assert actions.shape == (16,)
    batch = {
        "obs": torch.from_numpy(obs),
        "action": torch.from_numpy(actions),
        "reward": torch.ones(16),
        "next_obs": torch.from_numpy(obs),
        "discount": torch.zeros(16),
    }
    assert batch["obs"].dtype == torch.uint8
    losses = [float(policy.learn(batch)["loss"]) for _ in range(30)]
    assert losses[-1] < 0.5 * losses[0]  # regress Q(s, a) to the reward 1


def test_ppo_uses_a_shared_cnn_trunk_on_images_and_learns_from_a_uint8_rollout():
    policy = _ppo(IMAGE)
    assert isinstance(policy.model, ImageActorCritic)
    assert isinstance(_ppo(VECTOR).model, ActorCritic)
    rng = np.random.default_rng(0)
    T, N = 8, 2
    obs = rng.integers(0, 256, (T, N, 4, 84, 84), dtype=np.uint8)
    actions, extras = zip(*(policy.collect_action(o, 0) for o in obs))
    rollout = {
        "obs": obs,
        "action": np.stack(actions),
        "reward": rng.normal(size=(T, N)).astype(np.float32),
        "next_obs": obs,
        "terminated": np.zeros((T, N), bool),
        "truncated": np.zeros((T, N), bool),
        "logp": np.stack([e["logp"] for e in extras]),
        "value": np.stack([e["value"] for e in extras]),
        "last_obs": obs[-1],
    }
    before = [p.detach().clone() for p in policy.model.parameters()]
    stats = policy.learn(rollout)
    assert np.isfinite(float(stats["loss"]))
    assert any(not torch.equal(b, p) for b, p in zip(before, policy.model.parameters()))
    assert policy.eval_action(obs[0]).shape == (N,)


def test_ppo_rejects_continuous_actions_on_images():
    cfg = PPOPolicy.default_config()
    cfg.device = "cpu"
    with pytest.raises(ValueError, match="Discrete"):
        PPOPolicy(cfg, IMAGE, gym.spaces.Box(-1.0, 1.0, (2,), np.float32))
