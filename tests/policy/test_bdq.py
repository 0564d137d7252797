"""BDQ: the branching dueling network, a learn step recomputed by hand (each branch's own double-Q target), bins
onto the Box's bounds, DI-engine's own file."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from ding_dist.entry import pipeline
from ding_dist.entry.pipeline import load_config
from ding_dist.policy import get_policy_cls
from ding_dist.policy.bdq import BDQPolicy

REPO = Path(__file__).resolve().parents[2]
DING_FILE = REPO / "tests" / "config" / "ding_files" / "pendulum_bdq_ding_config.py"
OBS, ACT = (
    gym.spaces.Box(-1.0, 1.0, (3,)),
    gym.spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([2.0, 1.0], np.float32)),
)


def make() -> BDQPolicy:
    torch.manual_seed(0)
    cfg = BDQPolicy.default_config()
    cfg.device = "cpu"
    cfg.model.update(hidden_sizes=[8], action_bins_per_branch=3, head_layer_num=1)
    cfg.learn.update(grad_clip_norm=None)
    policy = BDQPolicy(cfg, OBS, ACT)
    with torch.no_grad():  # a target network that differs from the online one, so a* and its score can disagree
        for p in policy.target_model.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    return policy


def test_network_is_a_shared_value_plus_each_branchs_centred_advantage():
    net = make().model
    obs = torch.randn(4, 3)
    x = net.body(obs) / 3  # 2 branches + 1
    for d in range(2):
        adv = net.advantages[d](x)
        torch.testing.assert_close(net(obs)[:, d], net.value(x) + adv - adv.mean(-1, keepdim=True))
    assert net(obs).shape == (4, 2, 3)


def test_learn_step_uses_each_branchs_own_target():
    policy = make()
    assert get_policy_cls("bdq") is BDQPolicy
    g = torch.Generator().manual_seed(1)
    batch = {
        "obs": torch.randn(3, 3, generator=g),
        "next_obs": torch.randn(3, 3, generator=g),
        "action": torch.tensor([[0.0, 2.0], [1.0, 1.0], [2.0, 0.0]]),  # bin indices per branch
        "reward": torch.tensor([1.0, -0.5, 2.0]),
        "discount": torch.tensor([0.9, 0.9, 0.0]),
    }
    expected = 0.0
    with torch.no_grad():
        for b in range(3):
            q = policy.model(batch["obs"][b : b + 1])[0]
            q_next_online = policy.model(batch["next_obs"][b : b + 1])[0]
            q_next_target = policy.target_model(batch["next_obs"][b : b + 1])[0]
            for d in range(2):
                a_star = int(q_next_online[d].argmax())
                y = float(batch["reward"][b] + batch["discount"][b] * q_next_target[d, a_star])
                expected += (float(q[d, int(batch["action"][b, d])]) - y) ** 2 / 2 / 3
    stats = policy.learn(batch)
    assert stats["loss"].item() == pytest.approx(expected, rel=1e-5)
    assert policy.train_iter == 1


def test_bins_map_evenly_onto_each_dimensions_bounds():
    policy = make()
    bins = np.array([[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]], dtype=np.float32)
    np.testing.assert_allclose(policy.to_env_action(bins), [[-2.0, 0.0], [0.0, 0.5], [2.0, 1.0]])
    actions, _ = policy.collect_action(np.zeros((5, 3), np.float32), env_step=0)
    assert actions.shape == (5, 2) and actions.dtype == np.float32
    assert set(np.unique(actions)) <= {0.0, 1.0, 2.0}
    with pytest.raises(ValueError, match="num_branches=1"):
        cfg = BDQPolicy.default_config()
        cfg.model.num_branches = 1
        BDQPolicy(cfg, OBS, ACT)


def test_di_engine_pendulum_bdq_file_gets_di_engines_meaning():
    cfg = load_config(DING_FILE)
    p = cfg.policy
    assert (cfg.create_config.policy.type, cfg.env.id, cfg.env.stop_value) == ("bdq", "Pendulum-v1", -250)
    assert (p.model.hidden_sizes, p.model.action_bins_per_branch, p.model.head_layer_num) == ([128, 128, 64], 11, 3)
    assert (p.model.num_branches, p.discount_factor, p.nstep, p.learn.learning_rate) == (1, 0.97, 1, 1e-3)
    assert (p.learn.update_per_collect, p.learn.target_update_freq, p.collect.n_sample) == (3, 100, 8)
    assert (p.other.eps.type, p.other.eps.start, p.other.eps.end, p.other.replay_buffer.replay_buffer_size) == (
        "exp",
        0.95,
        0.1,
        20000,
    )
    shipped = load_config(REPO / "configs" / "pendulum_bdq_config.py")
    assert (shipped.create_config.policy.type, shipped.policy.model.action_bins_per_branch) == ("bdq", 11)


@pytest.mark.quality
@pytest.mark.timeout(1800)  # minutes of training
def test_shipped_bdq_config_reaches_minus_250(tmp_path):
    result = pipeline.train(str(REPO / "configs" / "pendulum_bdq_config.py"), exp_dir=tmp_path, max_env_steps=60_000)
    assert result["stopped_by"] == "stop_value", result["eval_history"]
