"""SQN: a learn step recomputed by hand (the twin Q losses on the soft value of min Q_target's Boltzmann policy, the
temperature's loss), the Polyak target, DI-engine's acting rule in env steps, DI-engine's own file."""

from __future__ import annotations

import math
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from ding_dist.entry import pipeline
from ding_dist.entry.pipeline import load_config
from ding_dist.policy import get_policy_cls
from ding_dist.policy.sqn import SQNPolicy

REPO = Path(__file__).resolve().parents[2]
DING_FILE = REPO / "tests" / "config" / "ding_files" / "cartpole_sqn_ding_config.py"
OBS, ACT = gym.spaces.Box(-1.0, 1.0, (3,)), gym.spaces.Discrete(2)


def make() -> SQNPolicy:
    torch.manual_seed(0)
    cfg = SQNPolicy.default_config()
    cfg.device = "cpu"
    cfg.model.update(hidden_sizes=[8])
    cfg.learn.update(alpha=0.5, target_entropy=0.3, learning_rate_alpha=0.1, target_theta=0.25)
    return SQNPolicy(cfg, OBS, ACT)


def test_learn_step_is_the_twin_soft_q_loss_and_the_temperature_loss():
    policy = make()
    assert get_policy_cls("sqn") is SQNPolicy
    g = torch.Generator().manual_seed(1)
    batch = {
        "obs": torch.randn(3, 3, generator=g),
        "next_obs": torch.randn(3, 3, generator=g),
        "action": torch.tensor([0, 1, 1]),
        "reward": torch.tensor([1.0, -0.5, 2.0]),
        "discount": torch.tensor([0.9, 0.9, 0.0]),
    }
    expected_q, entropies = 0.0, []
    target_before = {k: v.clone() for k, v in policy.target_model.state_dict().items()}
    with torch.no_grad():
        for b in range(3):
            qa, qb = policy.target_model(batch["next_obs"][b : b + 1], full=True)
            q_next = [min(float(qa[0, k]), float(qb[0, k])) for k in range(2)]
            z = sum(math.exp(q / 0.5) for q in q_next)
            pi = [math.exp(q / 0.5) / z for q in q_next]
            v = sum(p * (q - 0.5 * math.log(p)) for p, q in zip(pi, q_next))
            y = float(batch["reward"][b]) + float(batch["discount"][b]) * v
            q1, q2 = policy.model(batch["obs"][b : b + 1], full=True)
            a = int(batch["action"][b])
            expected_q += ((float(q1[0, a]) - y) ** 2 + (float(q2[0, a]) - y) ** 2) / 3
            entropies.append(-sum(p * math.log(p) for p in pi))
    stats = policy.learn(batch)
    assert stats["loss"].item() == pytest.approx(expected_q, rel=1e-5)
    mean_gap = sum(entropies) / 3 - 0.3
    assert stats["alpha_loss"].item() == pytest.approx(math.log(0.5) * mean_gap, rel=1e-5)
    assert stats["alpha"].item() == pytest.approx(0.5)
    # Adam's first step moves log_alpha by the learning rate against the sign of its gradient, mean_gap
    assert policy.log_alpha.value.item() == pytest.approx(math.log(0.5) - 0.1 * math.copysign(1.0, mean_gap), rel=1e-4)
    for key, value in policy.target_model.state_dict().items():  # Polyak: 0.75 old + 0.25 new
        torch.testing.assert_close(value, 0.75 * target_before[key] + 0.25 * policy.model.state_dict()[key])


def test_acting_follows_di_engines_rule_in_env_steps():
    policy = make()  # learning_starts 1000, 16 updates per 16 env steps, eps.decay 2000
    assert policy.policy_share(0) == pytest.approx(1 / 2000)
    assert policy.policy_share(1000 + 500) == pytest.approx(1 / 1500)  # 500 updates done
    assert policy.policy_share(1000 + 1000) == 0.999
    torch.manual_seed(0)
    actions, _ = policy.collect_action(np.zeros((2000, 3), np.float32), env_step=0)
    assert 0.4 < actions.mean() < 0.6  # (almost) all uniform
    with torch.no_grad():
        policy.model.q1.head.value[-1].bias.zero_()
        policy.model.q1.head.advantage[-1].bias.copy_(torch.tensor([0.0, 5.0]))
        policy.model.q1.head.advantage[-1].weight.zero_()
    actions, _ = policy.collect_action(np.zeros((2000, 3), np.float32), env_step=10_000)
    assert actions.mean() > 0.99  # softmax(Q / 0.5) puts all but e^-10 on action 1


def test_di_engine_cartpole_sqn_file_gets_di_engines_meaning():
    cfg = load_config(DING_FILE)
    p = cfg.policy
    assert cfg.create_config.policy.type == "sqn"
    assert (p.model.hidden_sizes, p.model.dueling) == ([64, 64], True)
    assert (p.learn.learning_rate, p.learn.learning_rate_alpha, p.learn.alpha, p.learn.target_entropy) == (
        1e-3,
        1e-3,
        0.2,
        0.2,
    )
    assert (p.learn.target_theta, p.discount_factor, p.nstep, p.other.eps.decay) == (0.005, 0.99, 1, 2000)
    assert (p.learn.update_per_collect, p.collect.n_sample, p.eval.eval_freq) == (8, 16, 2000)
    shipped = load_config(REPO / "configs" / "cartpole_sqn_config.py")
    assert (shipped.create_config.policy.type, shipped.policy.learn.target_theta) == ("sqn", 0.05)


@pytest.mark.quality
@pytest.mark.timeout(1800)  # minutes of training
def test_shipped_sqn_config_reaches_475(tmp_path):
    result = pipeline.train(str(REPO / "configs" / "cartpole_sqn_config.py"), exp_dir=tmp_path, max_env_steps=60_000)
    assert result["stopped_by"] == "stop_value", result["eval_history"]


@pytest.mark.parametrize("dueling", [True, False])
def test_twin_q_ensemble_computes_two_separate_networks(dueling):
    from ding_dist.policy.networks import AtomQNetwork
    from ding_dist.policy.sqn import TwinQNetwork

    space = gym.spaces.Box(-1.0, 1.0, (5,))
    torch.manual_seed(3)
    separate = [AtomQNetwork(space, 4, 1, [16, 8], dueling) for _ in range(2)]  # drawn as the twin draws them
    torch.manual_seed(3)
    twin = TwinQNetwork(space, 4, [16, 8], dueling)
    assert twin.q is not None and len(list(twin.parameters())) == len(list(separate[0].parameters()))
    obs = torch.randn(7, 5, generator=torch.Generator().manual_seed(0))
    q1, q2 = twin(obs, full=True)
    torch.testing.assert_close(q1, separate[0](obs), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(q2, separate[1](obs), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(twin(obs), separate[0](obs), rtol=1e-6, atol=1e-6)  # acting: the first only
    (q1.sum() + 2 * q2.sum()).backward()
    (separate[0](obs).sum() + 2 * separate[1](obs).sum()).backward()
    grad = twin.q.body[0].weight.grad
    torch.testing.assert_close(grad[1], separate[1].body[0].weight.grad, rtol=1e-5, atol=1e-6)
    # the former layout (two networks, q1.* and q2.*) loads into the ensemble
    fresh = TwinQNetwork(space, 4, [16, 8], dueling)
    old = {f"q{i + 1}.{k}": v for i, net in enumerate(separate) for k, v in net.state_dict().items()}
    fresh.load_state_dict(old)
    torch.testing.assert_close(fresh(obs, full=True)[1], separate[1](obs), rtol=1e-6, atol=1e-6)
    with torch.no_grad():  # a member view edits the ensemble in place
        fresh.q2.body[0].bias.add_(1.0)
    assert not torch.allclose(fresh(obs, full=True)[1], separate[1](obs))


def test_twin_q_on_images_stays_two_networks():
    from ding_dist.policy.sqn import TwinQNetwork

    twin = TwinQNetwork(gym.spaces.Box(0, 1, (10, 10, 4), np.uint8), 3, [32])
    assert twin.q is None and {k.split(".")[0] for k in twin.state_dict()} == {"q1", "q2"}
    q1, q2 = twin(torch.zeros(2, 10, 10, 4, dtype=torch.uint8), full=True)
    assert q1.shape == q2.shape == (2, 3)
