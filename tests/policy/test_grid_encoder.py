"""MinAtar's 0/1 grids (C, 10, 10): the MinAtar network for PPO, DQN and the zoo's trunk, chosen from the space."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from ding_dist.data.frame_replay import is_frame_stack_space, replay_buffer_for
from ding_dist.data.replay import ReplayBuffer
from ding_dist.policy.dqn import DQNPolicy
from ding_dist.policy.encoders import MinAtarCNN, NatureCNN, conv_encoder, is_grid_space, is_image_space, obs_tensor
from ding_dist.policy.networks import trunk
from ding_dist.policy.ppo import ImageActorCritic, PPOPolicy

GRID = gym.spaces.Box(0, 1, (4, 10, 10), np.uint8)
ACTIONS = gym.spaces.Discrete(3)


def test_grid_space_detection_and_dtype():
    assert is_grid_space(GRID) and not is_image_space(GRID)
    assert is_grid_space(gym.spaces.Box(0, 1, (6, 10, 10), np.bool_))
    assert not is_grid_space(gym.spaces.Box(0, 255, (4, 84, 84), np.uint8))  # an image
    assert not is_grid_space(gym.spaces.Box(0, 255, (4, 10, 10), np.uint8))  # not 0/1
    assert not is_grid_space(gym.spaces.Box(0.0, 1.0, (4, 10, 10), np.float32))  # not uint8/bool
    assert not is_frame_stack_space(GRID)  # channels are object kinds, not shifted frames
    assert type(replay_buffer_for(GRID, 16, num_envs=1)) is ReplayBuffer
    assert obs_tensor(np.ones((2, 4, 10, 10), np.uint8), GRID, "cpu").dtype == torch.uint8
    with pytest.raises(ValueError, match="no convolutional encoder"):
        conv_encoder(gym.spaces.Box(-1, 1, (4,)))


def test_minatar_cnn_by_hand():
    cnn = MinAtarCNN((4, 10, 10))
    assert isinstance(conv_encoder(GRID), MinAtarCNN) and isinstance(
        conv_encoder(gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)), NatureCNN
    )
    x = torch.randint(0, 2, (3, 4, 10, 10), dtype=torch.uint8)
    conv, fc = cnn.conv[0], cnn.fc[0]
    # the 3x3 convolution written out, unscaled 0/1 inputs
    xf = x.float().numpy()
    w, b = conv.weight.detach().numpy(), conv.bias.detach().numpy()
    out = np.zeros((3, 16, 8, 8), np.float32)
    for i in range(8):
        for j in range(8):
            out[:, :, i, j] = np.einsum("bchw,ochw->bo", xf[:, :, i : i + 3, j : j + 3], w) + b
    h = np.maximum(out, 0).reshape(3, -1) @ fc.weight.detach().numpy().T + fc.bias.detach().numpy()
    np.testing.assert_allclose(cnn(x).detach().numpy(), np.maximum(h, 0), rtol=1e-5, atol=1e-5)
    assert sum(p.numel() for p in cnn.parameters()) == 16 * 4 * 9 + 16 + 1024 * 128 + 128


def test_ppo_dqn_and_the_zoo_trunk_pick_the_minatar_network_and_learn():
    cfg = PPOPolicy.default_config()
    cfg.device = "cpu"
    ppo = PPOPolicy(cfg, GRID, ACTIONS)
    assert isinstance(ppo.model, ImageActorCritic) and isinstance(ppo.model.trunk, MinAtarCNN)
    assert ppo.model.actor.in_features == 128
    cfg = DQNPolicy.default_config()
    cfg.device = "cpu"
    cfg.model.hidden_sizes = [128]
    dqn = DQNPolicy(cfg, GRID, ACTIONS)
    assert isinstance(dqn.model.body[0], MinAtarCNN) and dqn.model.head.in_features == 128
    body, width = trunk(GRID, [64, 32])
    assert isinstance(body[0], MinAtarCNN) and body[0].out_features == 64 and width == 32

    obs = np.random.default_rng(0).integers(0, 2, (16, 4, 10, 10), dtype=np.uint8)
    actions, _ = dqn.collect_action(obs, env_step=10**6)
    batch = {"obs": torch.from_numpy(obs), "action": torch.from_numpy(actions), "reward": torch.ones(16),
             "next_obs": torch.from_numpy(obs), "discount": torch.zeros(16)}  # fmt: skip
    losses = [float(dqn.learn(batch)["loss"]) for _ in range(30)]
    assert losses[-1] < 0.5 * losses[0]


def test_conv_channels_shape_image_encoders_and_are_refused_on_grids():
    image = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
    cnn = conv_encoder(image, channels=[8, 16, 24])
    assert [c.out_channels for c in cnn.convs if isinstance(c, torch.nn.Conv2d)] == [8, 16, 24]
    policy_cfg = DQNPolicy.default_config()
    policy_cfg.model.update(hidden_sizes=[32], conv_channels=[8, 16, 24])
    dqn = DQNPolicy(policy_cfg, image, ACTIONS)
    assert [c.out_channels for c in dqn.model.modules() if isinstance(c, torch.nn.Conv2d)] == [8, 16, 24]
    with pytest.raises(ValueError, match=r"model.conv_channels=\[8, 16, 24\] is for image observations"):
        conv_encoder(GRID, channels=[8, 16, 24])
