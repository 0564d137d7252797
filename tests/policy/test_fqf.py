"""FQF: the proposed fractions, the width-weighted Q-values, a learn step recomputed by loops (quantile Huber loss at
the midpoints, the W1 fraction loss, the entropy term), which parameters each loss trains, DI-engine's own file."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import pytest
import torch

from ding_dist.entry import pipeline
from ding_dist.entry.pipeline import load_config
from ding_dist.policy import get_policy_cls
from ding_dist.policy.fqf import FQFPolicy, fraction_loss
from ding_dist.policy.losses import quantile_huber_loss

REPO = Path(__file__).resolve().parents[2]
DING_FILE = REPO / "tests" / "config" / "ding_files" / "cartpole_fqf_ding_config.py"
OBS, ACT = gym.spaces.Box(-1.0, 1.0, (3,)), gym.spaces.Discrete(2)
N = 4


def make(**learn) -> FQFPolicy:
    torch.manual_seed(0)
    cfg = FQFPolicy.default_config()
    cfg.device = "cpu"
    cfg.model.update(hidden_sizes=[8], head_hidden_sizes=[8], num_quantiles=N, quantile_embedding_size=6)
    cfg.learn.update({"grad_clip_norm": None, "learning_rate": 1e-3, "learning_rate_fraction": 1e-3, **learn})
    policy = FQFPolicy(cfg, OBS, ACT)
    with torch.no_grad():  # fractions far from uniform, so each term of the losses matters
        policy.model.fraction.weight.normal_(0.0, 1.0)
    policy.target_model.load_state_dict(policy.model.state_dict())
    return policy


def _batch() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return {
        "obs": torch.randn(3, 3, generator=g),
        "next_obs": torch.randn(3, 3, generator=g),
        "action": torch.tensor([0, 1, 1]),
        "reward": torch.tensor([1.0, -0.5, 2.0]),
        "discount": torch.tensor([0.9, 0.9, 0.0]),
    }


def test_fractions_are_the_cumulative_proposal_and_q_weights_quantiles_by_width():
    net = make().model
    obs = torch.randn(2, 3)
    tau, tau_hat, values, inner, entropy = net(obs, full=True)
    p = torch.softmax(net.fraction(net.body(obs)), dim=-1)
    torch.testing.assert_close(tau, torch.cat([torch.zeros(2, 1), p.cumsum(-1)], dim=-1))
    torch.testing.assert_close(tau_hat, (tau[:, :-1] + tau[:, 1:]) / 2)
    torch.testing.assert_close(values, net.quantile_values(net.body(obs), tau_hat))
    torch.testing.assert_close(inner, net.quantile_values(net.body(obs), tau[:, 1:-1]))
    torch.testing.assert_close(entropy, -(p * p.log()).sum(-1))
    torch.testing.assert_close(net(obs), ((tau[:, 1:] - tau[:, :-1]).unsqueeze(-1) * values).sum(1))


@pytest.mark.parametrize("ent_coef", [0.0, 0.5])
def test_learn_step_is_the_quantile_loss_plus_the_w1_fraction_loss(ent_coef):
    policy = make(ent_coef=ent_coef)
    assert get_policy_cls("fqf") is FQFPolicy
    batch = _batch()
    expected_q, expected_f = 0.0, 0.0
    with torch.no_grad():
        for b in range(3):
            a, o, o2 = int(batch["action"][b]), batch["obs"][b : b + 1], batch["next_obs"][b : b + 1]
            a_star = int(policy.model(o2).argmax())
            z_next = policy.target_model(o2, full=True)[2][0, :, a_star]  # at the target's own fractions
            tau, tau_hat, values, inner, entropy = policy.model(o, full=True)
            z, z_inner = values[0, :, a], inner[0, :, a]
            for i in range(N):
                for j in range(N):
                    d = float(batch["reward"][b] + batch["discount"][b] * z_next[j] - z[i])
                    huber = 0.5 * d * d if abs(d) <= 1.0 else abs(d) - 0.5
                    expected_q += abs(float(tau_hat[0, i]) - (d < 0)) * huber / N / 3
            for i in range(1, N):  # dW1/dtau_i = 2 F(tau_i) - F(tau_hat_(i-1)) - F(tau_hat_i)
                grad = 2 * float(z_inner[i - 1]) - float(z[i - 1]) - float(z[i])
                expected_f += grad * float(tau[0, i]) / 3
            expected_f -= ent_coef * float(entropy[0]) / 3
    stats = policy.learn(batch)
    assert stats["fraction_loss"].item() == pytest.approx(expected_f, rel=1e-5, abs=1e-7)
    assert stats["loss"].item() == pytest.approx(expected_q + expected_f, rel=1e-5)
    assert policy.train_iter == 1


def test_fraction_loss_trains_the_proposal_only_and_the_quantile_loss_the_rest():
    net, rows = make().model, torch.arange(3)
    tau, tau_hat, values, inner, _ = net(_batch()["obs"], full=True)
    taken, taken_inner = values[rows, :, _batch()["action"]], inner[rows, :, _batch()["action"]]
    names = [name for name, _ in net.named_parameters()]
    for loss, trained in (
        (fraction_loss(tau, taken, taken_inner).sum(), "fraction."),
        (quantile_huber_loss(taken, torch.zeros(3, N), tau_hat).sum(), ""),
    ):
        grads = torch.autograd.grad(loss, list(net.parameters()), retain_graph=True, allow_unused=True)
        for name, grad in zip(names, grads):
            in_proposal = name.startswith("fraction.")
            assert (grad is not None and grad.abs().sum() > 0) == (in_proposal == (trained == "fraction.")), name
    for frozen in ("learning_rate", "learning_rate_fraction"):  # each parameter group has its own rate
        policy = make(**{frozen: 0.0})
        before = {k: v.clone() for k, v in policy.model.state_dict().items()}
        policy.learn(_batch())
        for key, value in policy.model.state_dict().items():
            moved = not torch.equal(value, before[key])
            assert moved == (key.startswith("fraction.") == (frozen == "learning_rate")), (frozen, key)


def test_di_engine_cartpole_fqf_file_gets_di_engines_meaning():
    cfg = load_config(DING_FILE)
    p = cfg.policy
    assert cfg.create_config.policy.type == "fqf"
    assert (p.model.hidden_sizes, p.model.head_hidden_sizes) == ([128, 128, 64], [64])
    assert (p.model.num_quantiles, p.model.quantile_embedding_size) == (32, 64)
    assert (p.learn.learning_rate, p.learn.learning_rate_fraction, p.learn.ent_coef) == (1e-4, 1e-4, 0)
    assert (p.priority, p.priority_IS_weight, p.learn.kappa) == (True, False, 1.0)
    assert (p.discount_factor, p.learn.update_per_collect, p.collect.n_sample, p.eval.eval_freq) == (0.97, 3, 80, 1120)
    shipped = load_config(REPO / "configs" / "cartpole_fqf_config.py")
    assert (shipped.create_config.policy.type, shipped.policy.model.num_quantiles) == ("fqf", 32)


@pytest.mark.quality
@pytest.mark.timeout(1800)  # minutes of training
def test_shipped_fqf_config_reaches_475(tmp_path):
    result = pipeline.train(str(REPO / "configs" / "cartpole_fqf_config.py"), exp_dir=tmp_path, max_env_steps=60_000)
    assert result["stopped_by"] == "stop_value", result["eval_history"]
