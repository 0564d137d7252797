"""QR-DQN: the quantile Huber loss on 2 quantiles and a learn step, both computed by hand."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import pytest
import torch

from ding_dist.entry import pipeline
from ding_dist.entry.pipeline import load_config
from ding_dist.policy import get_policy_cls
from ding_dist.policy.losses import quantile_huber_loss
from ding_dist.policy.qrdqn import QRDQNPolicy

REPO = Path(__file__).resolve().parents[2]
DING_FILE = REPO / "tests" / "config" / "ding_files" / "cartpole_qrdqn_ding_config.py"
OBS, ACT = gym.spaces.Box(-1.0, 1.0, (3,)), gym.spaces.Discrete(2)
TAU = torch.tensor([0.25, 0.75])


@pytest.mark.parametrize(
    ("kappa", "expected", "grad"),
    [
        # tau 0.25: deltas 0.5 (Huber 0.125) and 3 (2.5), weight 0.25 each -> mean (0.03125 + 0.625) / 2
        # tau 0.75: deltas -0.5 (0.125, weight 0.25) and 2 (1.5, weight 0.75) -> mean (0.03125 + 1.125) / 2
        # d/d pred_i = -mean_j w_ij Huber'(delta_ij) / kappa; the target gets no gradient
        (1.0, 0.328125 + 0.578125, [-(0.25 * 0.5 + 0.25 * 1.0) / 2, (0.25 * 0.5 - 0.75 * 1.0) / 2]),
        # kappa 2: Huber(3) = 2 * (3 - 1) = 4, Huber(2) = 2, the rest quadratic; all divided by 2
        (2.0, (0.03125 + 1.0) / 4 + (0.03125 + 1.5) / 4, [-(0.125 + 0.5) / 4, (0.125 - 1.5) / 4]),
    ],
)
def test_quantile_huber_loss_on_two_quantiles_by_hand(kappa, expected, grad):
    pred, target = torch.tensor([[0.0, 1.0]], requires_grad=True), torch.tensor([[0.5, 3.0]])
    loss = quantile_huber_loss(pred, target, TAU, kappa)
    assert loss.shape == (1,)
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    loss.sum().backward()
    torch.testing.assert_close(pred.grad, torch.tensor([grad]))


def test_learn_step_on_constant_quantiles_by_hand():
    torch.manual_seed(0)
    cfg = QRDQNPolicy.default_config()
    cfg.device = "cpu"
    cfg.model.update(hidden_sizes=[4], num_quantiles=2)
    cfg.learn.update(grad_clip_norm=None)
    policy = QRDQNPolicy(cfg, OBS, ACT)
    assert get_policy_cls("qrdqn") is QRDQNPolicy
    torch.testing.assert_close(policy.tau, TAU)
    with torch.no_grad():  # quantiles independent of the observation: action 0 [0, 1], action 1 [1, 3] (greedy)
        for net in (policy.model, policy.target_model):
            net.head.weight.zero_()
            net.head.bias.copy_(torch.tensor([0.0, 1.0, 1.0, 3.0]))
    batch = {
        "obs": torch.randn(2, 3),
        "next_obs": torch.randn(2, 3),
        "action": torch.tensor([0, 1]),
        "reward": torch.tensor([0.0, 2.0]),
        "discount": torch.tensor([0.5, 0.0]),
    }
    # sample 0: pred [0, 1], target 0.5 * [1, 3] = [0.5, 1.5]:
    #   tau 0.25: (0.25 * 0.125 + 0.25 * 1.0) / 2; tau 0.75: (0.25 * 0.125 + 0.75 * 0.125) / 2
    # sample 1 (terminated): pred [1, 3], target [2, 2]: each quantile 0.25 * Huber(1) = 0.125
    first = (0.03125 + 0.25) / 2 + (0.03125 + 0.09375) / 2
    stats = policy.learn(batch)
    assert stats["loss"].item() == pytest.approx((first + 0.25) / 2, rel=1e-6)
    assert stats["q_mean"].item() == pytest.approx((0.5 + 2.0) / 2, rel=1e-6)


def test_di_engine_cartpole_qrdqn_file_gets_di_engines_meaning():
    cfg = load_config(DING_FILE)  # as it is: DI-engine's file asks for prioritized replay
    p = cfg.policy
    assert (p.priority, p.priority_IS_weight) == (True, False)  # DI-engine's default: no importance weights
    assert (cfg.create_config.policy.type, p.model.num_quantiles) == ("qrdqn", 64)
    assert p.model.hidden_sizes == [128, 128, 64, 64]  # the encoder, then the head's hidden layer
    assert (p.learn.kappa, p.discount_factor, p.nstep, p.learn.update_per_collect) == (1.0, 0.97, 3, 3)
    assert p.eval.eval_freq == 34 * 80  # DI-engine's 100 train iters at 3 per collect of 80 env steps
    shipped = load_config(REPO / "configs" / "cartpole_qrdqn_config.py")
    assert shipped.create_config.policy.type == "qrdqn"


@pytest.mark.quality
@pytest.mark.timeout(1800)  # minutes of training: more than the suite's 300 s on a busy machine
def test_shipped_qrdqn_config_reaches_475(tmp_path):
    result = pipeline.train(str(REPO / "configs" / "cartpole_qrdqn_config.py"), exp_dir=tmp_path, max_env_steps=60_000)
    assert result["stopped_by"] == "stop_value", result["eval_history"]
