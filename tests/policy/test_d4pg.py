"""D4PG: a learn step against a hand computation (the projected n-step target distribution, the weighted
cross-entropy and its priorities, the actor on the critic's mean), DI-engine's own file, training (quality)."""

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
from ding_dist.policy.d4pg import D4PGPolicy

REPO = Path(__file__).resolve().parents[2]
DING_FILE = REPO / "tests" / "config" / "ding_files" / "pendulum_d4pg_ding_config.py"
OBS = gym.spaces.Box(-1.0, 1.0, (3,))
ACT = gym.spaces.Box(np.array([-2.0], np.float32), np.array([2.0], np.float32))
ATOMS = [-2.0, -1.0, 0.0, 1.0, 2.0]


def make() -> D4PGPolicy:
    torch.manual_seed(0)
    cfg = D4PGPolicy.default_config()
    cfg.device = "cpu"
    cfg.model.update(actor_hidden_sizes=[8], critic_hidden_sizes=[8], n_atom=5, v_min=-2.0, v_max=2.0)
    cfg.learn.update(learning_rate_critic=1e-2, learning_rate_actor=1e-2)
    return D4PGPolicy(cfg, OBS, ACT)


def _project(probs: list[float], r: float, d: float) -> list[float]:
    """C51's projection, atom by atom: each shifted atom splits its mass between its two neighbours."""
    out = [0.0] * 5
    for z, p in zip(ATOMS, probs):
        b = (min(max(r + d * z, -2.0), 2.0) + 2.0) / 1.0
        lo, hi = math.floor(b), math.ceil(b)
        if lo == hi:
            out[lo] += p
        else:
            out[lo] += p * (hi - b)
            out[hi] += p * (b - lo)
    return out


def test_learn_step_is_the_weighted_cross_entropy_with_the_projected_n_step_target():
    policy = make()
    assert get_policy_cls("d4pg") is D4PGPolicy
    g = torch.Generator().manual_seed(1)
    gamma = 0.9
    steps = [[0.3, -0.2, 0.5], [1.0, 0.1, -0.4], [0.2, 0.7, 0.0]]  # three rewards per sample
    batch = {
        "obs": torch.randn(3, 3, generator=g),
        "next_obs": torch.randn(3, 3, generator=g),  # the state 3 steps later
        "action": torch.tensor([[-0.5], [0.2], [0.9]]),
        "reward": torch.tensor([sum(gamma**i * r for i, r in enumerate(rs)) for rs in steps]),
        "discount": torch.tensor([gamma**3, gamma**3, 0.0]),  # the last one terminated within its 3 steps
        "weight": torch.tensor([0.5, 1.0, 1.5]),
    }
    losses = []
    with torch.no_grad():
        for b in range(3):
            a_next = policy.actor_target(batch["next_obs"][b : b + 1])
            probs = policy.critic_target(batch["next_obs"][b : b + 1], a_next).softmax(-1)[0].tolist()
            target = _project(probs, float(batch["reward"][b]), float(batch["discount"][b]))
            assert sum(target) == pytest.approx(1.0)
            log_p = policy.critic(batch["obs"][b : b + 1], batch["action"][b : b + 1]).log_softmax(-1)[0].tolist()
            losses.append(-sum(t * lp for t, lp in zip(target, log_p)))
    stats = policy.learn(batch)
    torch.testing.assert_close(stats["priority"], torch.tensor(losses), rtol=1e-5, atol=1e-6)
    weighted = sum(w * x for w, x in zip([0.5, 1.0, 1.5], losses)) / 3
    assert stats["critic_loss"].item() == pytest.approx(weighted, rel=1e-5)
    assert policy.train_iter == 1


def test_actor_loss_is_minus_the_critics_mean_at_the_actors_action():
    policy = make()
    policy.cfg.learn.learning_rate_critic = 0.0
    for group in policy.critic_optimizer.param_groups:
        group["lr"] = 0.0  # the critic stays as it is, so its mean can be computed before the step
    obs = torch.randn(4, 3)
    with torch.no_grad():
        probs = policy.critic(obs, policy.actor(obs)).softmax(-1)
        expected = -(probs * torch.tensor(ATOMS)).sum(-1).mean().item()
    batch = {"obs": obs, "next_obs": obs, "action": torch.zeros(4, 1), "reward": torch.zeros(4)}
    stats = policy.learn({**batch, "discount": torch.zeros(4), "weight": torch.ones(4)})
    assert stats["actor_loss"].item() == pytest.approx(expected, rel=1e-5)


def test_di_engine_pendulum_d4pg_file_gets_di_engines_meaning():
    cfg = load_config(DING_FILE)
    p = cfg.policy
    assert (cfg.create_config.policy.type, cfg.env.id, cfg.env.stop_value) == ("d4pg", "Pendulum-v1", -250)
    assert (p.model.n_atom, p.model.v_min, p.model.v_max, p.model.twin_critic) == (51, -100, 100, False)
    assert (p.nstep, p.discount_factor) == (3, 0.99)  # DI-engine's D4PG reads learn.discount_factor, not 0.995
    assert (p.priority, p.priority_IS_weight, p.learn.actor_update_freq, p.learn.noise) == (True, True, 1, False)
    assert (p.learn.update_per_collect, p.learn.batch_size, p.collect.n_sample) == (2, 128, 48)
    assert (p.learn.learning_starts, p.eval.eval_freq, p.other.replay_buffer.replay_buffer_size) == (800, 2400, 20000)
    shipped = load_config(REPO / "configs" / "pendulum_d4pg_config.py")
    assert (shipped.create_config.policy.type, shipped.policy.model.n_atom) == ("d4pg", 51)


@pytest.mark.quality
@pytest.mark.timeout(1800)  # minutes of training
def test_shipped_d4pg_config_reaches_minus_200(tmp_path):
    result = pipeline.train(str(REPO / "configs" / "pendulum_d4pg_config.py"), exp_dir=tmp_path, max_env_steps=40_000)
    assert result["stopped_by"] == "stop_value", result["eval_history"]
