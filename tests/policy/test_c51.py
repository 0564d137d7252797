"""C51: the categorical projection on a 3-atom support and a learn step, both computed by hand."""

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
from ding_dist.policy.c51 import C51Policy
from ding_dist.policy.losses import categorical_projection

REPO = Path(__file__).resolve().parents[2]
DING_FILE = REPO / "tests" / "config" / "ding_files" / "cartpole_c51_ding_config.py"
OBS, ACT = gym.spaces.Box(-1.0, 1.0, (3,)), gym.spaces.Discrete(2)
SUPPORT = torch.tensor([-1.0, 0.0, 1.0])
#: Next-state probabilities of the greedy action (mean 0.25): the same rows for every case below.
NEXT = torch.tensor([0.25, 0.25, 0.5])


@pytest.mark.parametrize(
    ("reward", "discount", "expected"),
    [
        # atoms 0.5 + 0.5 z = [0, 0.5, 1]: 0 on atom 1; 0.5 split half-half between atoms 1 and 2; 1 on atom 2
        (0.5, 0.5, [0.0, 0.25 + 0.125, 0.125 + 0.5]),
        # atoms -0.25 + z = [-1.25 -> -1, -0.25, 0.75]: -0.25 gives 1/4 to atom 0 and 3/4 to atom 1, 0.75 likewise
        (-0.25, 1.0, [0.25 + 0.0625, 0.1875 + 0.125, 0.375]),
        (2.0, 0.0, [0.0, 0.0, 1.0]),  # a termination: all the mass on the reward, clipped to v_max
        (-0.5, 0.0, [0.5, 0.5, 0.0]),
    ],
)
def test_categorical_projection_by_hand(reward, discount, expected):
    out = categorical_projection(NEXT.expand(1, 3), torch.tensor([reward]), torch.tensor([discount]), SUPPORT)
    torch.testing.assert_close(out, torch.tensor([expected]))


def _constant_policy() -> C51Policy:
    """A 3-atom C51 on [-1, 1] whose logits do not depend on the observation: action 0 uniform, action 1
    ``[1/4, 1/4, 1/2]`` (the greedy one, Q = 0.25)."""
    torch.manual_seed(0)
    cfg = C51Policy.default_config()
    cfg.device = "cpu"
    cfg.model.update(hidden_sizes=[4], n_atom=3, v_min=-1.0, v_max=1.0)
    cfg.learn.update(grad_clip_norm=None, target_update_freq=1000)
    policy = C51Policy(cfg, OBS, ACT)
    with torch.no_grad():
        for net in (policy.model, policy.target_model):
            net.head.weight.zero_()
            net.head.bias.copy_(torch.tensor([0.0, 0.0, 0.0, 0.0, 0.0, math.log(2.0)]))
    return policy


def test_learn_step_is_the_cross_entropy_with_the_projected_target():
    policy = _constant_policy()
    assert get_policy_cls("c51") is C51Policy
    batch = {
        "obs": torch.randn(3, 3),
        "next_obs": torch.randn(3, 3),
        "action": torch.tensor([1, 0, 0]),
        "reward": torch.tensor([0.5, 2.0, -0.25]),
        "discount": torch.tensor([0.5, 0.0, 1.0]),
    }
    # targets from the test above; predictions [1/4, 1/4, 1/2] (action 1) and [1/3, 1/3, 1/3] (action 0)
    first = -(0.375 * math.log(0.25) + 0.625 * math.log(0.5))  # = 11/8 ln 2
    expected = (first + math.log(3.0) + math.log(3.0)) / 3
    q_mean = (0.25 + 0.0 + 0.0) / 3
    np.testing.assert_allclose(policy.eval_action(np.zeros((2, 3), np.float32)), [1, 1])
    stats = policy.learn(batch)
    assert stats["loss"].item() == pytest.approx(expected, rel=1e-6)
    assert stats["q_mean"].item() == pytest.approx(q_mean, rel=1e-6)
    assert policy.train_iter == 1
    # the step moved the online head and left the target network as it was (no copy before 1000 updates)
    assert policy.model.head.bias[5].item() != pytest.approx(math.log(2.0))
    assert policy.target_model.head.bias[5].item() == pytest.approx(math.log(2.0))


def test_di_engine_cartpole_c51_file_gets_di_engines_meaning():
    cfg = load_config(DING_FILE)  # as it is: DI-engine's file asks for prioritized replay
    p = cfg.policy
    assert (p.priority, p.priority_IS_weight) == (True, False)  # DI-engine's default: no importance weights
    assert (cfg.create_config.policy.type, cfg.env.id, cfg.env.stop_value) == ("c51", "CartPole-v0", 195)
    assert (p.model.n_atom, p.model.v_min, p.model.v_max, p.model.hidden_sizes) == (51, -10, 10, [128, 128, 64, 64])
    assert (p.discount_factor, p.nstep, p.learn.update_per_collect, p.learn.target_update_freq) == (0.97, 3, 3, 100)
    assert (p.collect.n_sample, p.learn.learning_starts, p.other.replay_buffer.replay_buffer_size) == (80, 64, 20000)
    assert (p.other.eps.type, p.other.eps.start, p.other.eps.end, p.other.eps.decay) == ("exp", 0.95, 0.1, 10000)
    assert p.eval.eval_freq == 334 * 80  # DI-engine's 1000 train iters at 3 per collect of 80 env steps
    shipped = load_config(REPO / "configs" / "cartpole_c51_config.py")
    assert (shipped.create_config.policy.type, shipped.policy.model.v_max) == ("c51", 100.0)


@pytest.mark.quality
@pytest.mark.timeout(1800)  # minutes of training: more than the suite's 300 s on a busy machine
def test_shipped_c51_config_reaches_475(tmp_path):
    result = pipeline.train(str(REPO / "configs" / "cartpole_c51_config.py"), exp_dir=tmp_path, max_env_steps=60_000)
    assert result["stopped_by"] == "stop_value", result["eval_history"]
