"""Rainbow: factorized noisy layers, the noise of an update, and a learn step recomputed independently."""

from __future__ import annotations

import copy
from pathlib import Path

import gymnasium as gym
import pytest
import torch

from ding_dist.entry import pipeline
from ding_dist.entry.pipeline import load_config
from ding_dist.policy import get_policy_cls
from ding_dist.policy.losses import categorical_projection
from ding_dist.policy.networks import NoisyLinear
from ding_dist.policy.rainbow import RainbowPolicy
from ding_dist.policy.rng import step_generator

REPO = Path(__file__).resolve().parents[2]
DING_FILE = REPO / "tests" / "config" / "ding_files" / "cartpole_rainbow_ding_config.py"
OBS, ACT = gym.spaces.Box(-1.0, 1.0, (3,)), gym.spaces.Discrete(2)


def test_noisy_linear_uses_factorized_noise():
    torch.manual_seed(0)
    layer = NoisyLinear(3, 2, sigma0=0.5)
    torch.testing.assert_close(layer.weight_sigma, torch.full((2, 3), 0.5 / 3**0.5))
    e = torch.randn(5, generator=torch.Generator().manual_seed(7))
    layer.sample_noise(torch.Generator().manual_seed(7))
    f = e.sign() * e.abs().sqrt()  # f(e_in) = f(e[:3]), f(e_out) = f(e[3:])
    x = torch.randn(4, 3)
    weight = layer.weight_mu + layer.weight_sigma * torch.outer(f[3:], f[:3])
    torch.testing.assert_close(layer(x), x @ weight.T + layer.bias_mu + layer.bias_sigma * f[3:])
    layer.clear_noise()
    torch.testing.assert_close(layer(x), x @ layer.weight_mu.T + layer.bias_mu)


def test_learn_step_is_c51s_weighted_loss_under_the_update_noise_and_acting_uses_the_mean_network():
    torch.manual_seed(0)
    cfg = RainbowPolicy.default_config()
    cfg.device = "cpu"
    cfg.model.update(hidden_sizes=[8], n_atom=5, v_min=-2.0, v_max=2.0)
    cfg.learn.update(grad_clip_norm=None)
    policy = RainbowPolicy(cfg, OBS, ACT)
    assert get_policy_cls("rainbow") is RainbowPolicy
    assert sum(isinstance(m, NoisyLinear) for m in policy.model.modules()) == 4  # the dueling head's layers
    g = torch.Generator().manual_seed(1)
    batch = {
        "obs": torch.randn(4, 3, generator=g),
        "next_obs": torch.randn(4, 3, generator=g),
        "action": torch.tensor([0, 1, 1, 0]),
        "reward": torch.tensor([1.0, -0.5, 2.0, 0.0]),
        "discount": torch.tensor([0.9, 0.9, 0.0, 0.81]),
        "weight": torch.tensor([0.5, 1.0, 2.0, 1.5]),  # importance weights: priority_IS_weight is on by default
    }
    online, target_net = copy.deepcopy(policy.model), copy.deepcopy(policy.target_model)
    noise = step_generator(policy.noise_seed, 0)
    with torch.no_grad():
        online.sample_noise(noise)
        target_net.sample_noise(noise)
        a_star = online(batch["next_obs"]).argmax(-1)
        next_probs = target_net(batch["next_obs"], full=True).softmax(-1)[torch.arange(4), a_star]
        target = categorical_projection(next_probs, batch["reward"], batch["discount"], online.support)
        online.sample_noise(noise)
        log_p = online(batch["obs"], full=True).log_softmax(-1)[torch.arange(4), batch["action"]]
        cross_entropy = -(target * log_p).sum(-1)
    stats = policy.learn(batch)
    assert stats["loss"].item() == pytest.approx((batch["weight"] * cross_entropy).mean().item(), rel=1e-5)
    torch.testing.assert_close(stats["priority"], cross_entropy)  # the new priorities: unweighted, per sample
    for net in (policy.model, policy.target_model):
        assert all(float(m.weight_eps.abs().sum()) == 0.0 for m in net.modules() if isinstance(m, NoisyLinear))
    obs = torch.randn(6, 3)
    mean_net = copy.deepcopy(policy.model)
    torch.testing.assert_close(torch.as_tensor(policy.eval_action(obs.numpy())), mean_net(obs).argmax(-1))


def test_di_engine_cartpole_rainbow_file_gets_di_engines_meaning():
    cfg = load_config(DING_FILE)  # as it is: prioritized replay with importance weights
    p = cfg.policy
    assert (cfg.create_config.policy.type, p.model.n_atom, p.model.hidden_sizes) == ("rainbow", 51, [128, 128, 64])
    assert (p.discount_factor, p.nstep, p.learn.update_per_collect, p.learn.target_update_freq) == (0.97, 3, 3, 100)
    # learning_starts: a batch (DI-engine 0.5.3's Rainbow has no random_collect_size); the file's eps
    assert (p.learn.learning_starts, p.other.eps.start, p.other.eps.end) == (64, 0.95, 0.1)
    assert (p.priority, p.priority_IS_weight, p.other.replay_buffer.alpha) == (True, True, 0.6)  # DI-engine's
    shipped = load_config(REPO / "configs" / "cartpole_rainbow_config.py")
    assert (shipped.create_config.policy.type, shipped.policy.nstep) == ("rainbow", 3)


@pytest.mark.quality
@pytest.mark.timeout(1800)  # minutes of training: more than the suite's 300 s on a busy machine
def test_shipped_rainbow_config_reaches_475(tmp_path):
    config = str(REPO / "configs" / "cartpole_rainbow_config.py")
    result = pipeline.train(config, exp_dir=tmp_path, max_env_steps=60_000)
    assert result["stopped_by"] == "stop_value", result["eval_history"]
