"""IQN: the implicit quantile network, the fractions of an update, and a learn step recomputed independently."""

from __future__ import annotations

import math
from pathlib import Path

import gymnasium as gym
import pytest
import torch

from ding_dist.entry import pipeline
from ding_dist.entry.pipeline import load_config
from ding_dist.policy import get_policy_cls
from ding_dist.policy.iqn import IQNPolicy
from ding_dist.policy.rng import step_generator

REPO = Path(__file__).resolve().parents[2]
DING_FILE = REPO / "tests" / "config" / "ding_files" / "cartpole_iqn_ding_config.py"
OBS, ACT = gym.spaces.Box(-1.0, 1.0, (3,)), gym.spaces.Discrete(2)


def make() -> IQNPolicy:
    torch.manual_seed(0)
    cfg = IQNPolicy.default_config()
    cfg.device = "cpu"
    cfg.model.update(hidden_sizes=[8], head_hidden_sizes=[8], num_quantiles=4, quantile_embedding_size=6)
    cfg.learn.update(grad_clip_norm=None)
    return IQNPolicy(cfg, OBS, ACT)


def test_network_multiplies_features_by_the_cosine_embedding_of_each_fraction():
    net = make().model
    obs, tau = torch.randn(2, 3), torch.tensor([[0.1, 0.5, 0.9], [0.2, 0.3, 0.4]])
    cosines = torch.cos(math.pi * torch.arange(6.0) * tau.unsqueeze(-1))  # [2, 3, 6]
    expected = net.head(net.body(obs).unsqueeze(1) * torch.relu(net.embed[0](cosines)))
    torch.testing.assert_close(net(obs, tau), expected)
    assert net(obs, tau).shape == (2, 3, 2)
    midpoints = torch.tensor([0.125, 0.375, 0.625, 0.875]).expand(2, 4)
    torch.testing.assert_close(net(obs), net(obs, midpoints).mean(dim=1))  # acting: evenly spaced fractions


def test_fractions_come_from_the_update_number():
    policy = make()
    tau, tau_next = policy.draw_fractions(5)
    drawn = torch.rand(2, 5, 4, generator=step_generator(policy.quantile_seed, 0))
    torch.testing.assert_close((tau, tau_next), (drawn[0], drawn[1]))
    policy.train_iter = 1
    assert not torch.equal(policy.draw_fractions(5)[0], tau)


def test_learn_step_is_the_quantile_huber_loss_at_the_drawn_fractions():
    policy = make()
    assert get_policy_cls("iqn") is IQNPolicy
    g = torch.Generator().manual_seed(1)
    batch = {
        "obs": torch.randn(3, 3, generator=g),
        "next_obs": torch.randn(3, 3, generator=g),
        "action": torch.tensor([0, 1, 1]),
        "reward": torch.tensor([1.0, -0.5, 2.0]),
        "discount": torch.tensor([0.9, 0.9, 0.0]),
    }
    tau, tau_next = policy.draw_fractions(3)
    with torch.no_grad():
        expected = 0.0
        for b in range(3):
            a_star = int(policy.model(batch["next_obs"][b : b + 1]).argmax())
            z_next = policy.target_model(batch["next_obs"][b : b + 1], tau_next[b : b + 1])[0, :, a_star]
            z = policy.model(batch["obs"][b : b + 1], tau[b : b + 1])[0, :, int(batch["action"][b])]
            for i in range(4):
                for j in range(4):
                    d = float(batch["reward"][b] + batch["discount"][b] * z_next[j] - z[i])
                    huber = 0.5 * d * d if abs(d) <= 1.0 else abs(d) - 0.5
                    expected += abs(float(tau[b, i]) - (d < 0)) * huber / 4 / 3
    stats = policy.learn(batch)
    assert stats["loss"].item() == pytest.approx(expected, rel=1e-5)
    assert policy.train_iter == 1


def test_di_engine_cartpole_iqn_file_gets_di_engines_meaning():
    cfg = load_config(DING_FILE)  # as it is: DI-engine's file asks for prioritized replay
    p = cfg.policy
    assert (p.priority, p.priority_IS_weight) == (True, False)  # DI-engine's default: no importance weights
    assert (cfg.create_config.policy.type, p.model.head_hidden_sizes) == ("iqn", [64])
    assert p.model.hidden_sizes == [128, 128, 64]  # the encoder; the product with the embedding follows it
    assert (p.model.num_quantiles, p.model.quantile_embedding_size, p.learn.kappa) == (32, 128, 1.0)
    assert (p.discount_factor, p.nstep, p.learn.update_per_collect, p.collect.n_sample) == (0.97, 3, 3, 80)
    shipped = load_config(REPO / "configs" / "cartpole_iqn_config.py")
    assert (shipped.create_config.policy.type, shipped.policy.model.quantile_embedding_size) == ("iqn", 64)


@pytest.mark.quality
@pytest.mark.timeout(1800)  # minutes of training: more than the suite's 300 s on a busy machine
def test_shipped_iqn_config_reaches_475(tmp_path):
    result = pipeline.train(str(REPO / "configs" / "cartpole_iqn_config.py"), exp_dir=tmp_path, max_env_steps=60_000)
    assert result["stopped_by"] == "stop_value", result["eval_history"]
