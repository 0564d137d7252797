"""DI-engine's own cartpole_impala_config.py runs on ding_dist's IMPALA: the same V-trace horizon (unroll_len),
clipping, discount and uses of each collected step; DI-engine keys IMPALA cannot honour are one clear error."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from ding_dist.config import ConfigError, load_config, read_config
from ding_dist.config.ding import NO_CLIP, translate_ding_config
from ding_dist.entry import pipeline
from ding_dist.policy import IMPALAPolicy

DING_IMPALA = Path(__file__).resolve().parent / "ding_files" / "cartpole_impala_ding_config.py"


def test_di_engine_impala_file_gets_its_meaning():
    cfg = load_config(DING_IMPALA)
    p = cfg.policy
    assert (cfg.env.id, cfg.env.stop_value, cfg.create_config.policy.type) == ("CartPole-v0", 195, "impala")
    assert (p.model.hidden_sizes, p.model.activation) == ([64, 64, 64], "relu")  # VAC: encoder + actor head
    # unroll_len 32 on each of the 8 envs; DI-engine uses each step 4 x 16 / 16 = 4 times: 4 passes here
    assert (p.collect.n_sample, p.learn.epoch_per_collect, p.learn.batch_size) == (256, 4, 256)
    assert (p.collect.discount_factor, p.learn.vtrace_lambda, p.learn.rho_bar, p.learn.c_bar) == (0.9, 0.95, 1.0, 1.0)
    # DI-engine's value_weight=0.5 weighs the MSE; ours weighs 0.5 * MSE: twice the weight, the same critic loss
    assert (p.learn.learning_rate, p.learn.value_weight, p.learn.entropy_weight) == (0.0005, 1.0, 0.0001)
    assert p.eval.eval_freq == 50 * 256  # 200 train iters at 4 per collect of 256 env steps


@pytest.mark.parametrize("value_weight", [0.5, 0.3])
def test_di_engine_impala_file_trains_its_critic_with_di_engines_weight(value_weight):
    """DI-engine 0.5.3 (ding/rl_utils/vtrace.py, ding/policy/impala.py): ``total = policy_loss + value_weight *
    mean((V - v_s)^2) - entropy_weight * entropy``; the translated file's loss is that sum, for its own weight."""
    cfg = load_config(DING_IMPALA, overrides=[f"policy.learn.value_weight={value_weight}"])
    cfg.policy.learn.update(epoch_per_collect=1, batch_size=4 * 3)  # one update on the whole [4, 3] rollout
    torch.manual_seed(0)
    policy = IMPALAPolicy(cfg.policy, gym.spaces.Box(-1.0, 1.0, (4,), np.float32), gym.spaces.Discrete(2))
    rng = np.random.default_rng(0)
    rollout = {
        "obs": rng.uniform(-1, 1, (4, 3, 4)).astype(np.float32),
        "next_obs": rng.uniform(-1, 1, (4, 3, 4)).astype(np.float32),
        "last_obs": rng.uniform(-1, 1, (3, 4)).astype(np.float32),
        "action": rng.integers(0, 2, (4, 3)),
        "logp": np.log(rng.uniform(0.2, 0.8, (4, 3))).astype(np.float32),
        "reward": rng.normal(3.0, 2.0, (4, 3)).astype(np.float32),  # targets far from V: a large MSE
        "terminated": np.zeros((4, 3), bool),
        "truncated": np.zeros((4, 3), bool),
    }
    stats = policy.learn(rollout)
    mse = 2 * stats["value_loss"].item()  # the stat is 0.5 * MSE (tests/policy/test_impala.py checks it by hand)
    di_engine_total = stats["policy_loss"].item() + value_weight * mse - 1e-4 * stats["entropy"].item()
    assert mse > 1.0 and stats["loss"].item() == pytest.approx(di_engine_total, rel=1e-6)
    main, create = read_config(DING_IMPALA)
    main.policy.learn.value_weight = value_weight
    *_, report = translate_ding_config(main, create, (), DING_IMPALA.name)
    (line,) = [text for text in report.of("converted") if text.startswith("policy.learn.value_weight")]
    assert line.startswith(f"policy.learn.value_weight={value_weight} -> policy.learn.value_weight={2 * value_weight}")


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("policy.learn.rho_pg_clip_ratio", 2.0, "rho_pg_clip_ratio' = 2.0 cannot be honoured"),
        ("policy.learn.unroll_len", 16, "one V-trace horizon here"),
        ("policy.collect.discount_factor", 0.99, "one discount here"),
    ],
)
def test_what_impala_cannot_honour_is_refused(key, value, message):
    with pytest.raises(ConfigError, match=message):
        load_config(DING_IMPALA, overrides=[f"{key}={value}"])


def test_di_engine_impala_file_trains(tmp_path):
    result = pipeline.train(str(DING_IMPALA), max_env_steps=512, exp_dir=tmp_path / "r")
    assert (result["env_steps"], result["train_iters"]) == (512, 2 * 4)  # 2 rollouts of 256, 4 passes each


def test_di_engine_0_5_3_layout_names_the_horizon_at_the_policy_top(tmp_path):
    """DI-engine 0.5.3's file sets ``policy.unroll_len=8`` (no collect/learn unroll_len): the same horizon here."""
    text = DING_IMPALA.read_text()
    edits = (("            unroll_len=32,\n", ""), ("        nstep=1,\n", "        nstep=1,\n        unroll_len=8,\n"))
    for old, new in edits:
        assert old in text
        text = text.replace(old, new)
    (tmp_path / "impala_053_config.py").write_text(text)
    p = load_config(tmp_path / "impala_053_config.py").policy
    # unroll_len 8 on each of the 8 envs; each step used 4 x 16 / 16 = 4 times; minibatches of 16 x 8 steps
    assert (p.collect.n_sample, p.learn.epoch_per_collect, p.learn.batch_size) == (64, 4, 64)


@pytest.mark.parametrize(
    ("overrides", "clip_norm"),
    [
        ([], NO_CLIP),  # DI-engine's IMPALA default grad_clip_type=None: its Adam clips nothing
        (["policy.learn.grad_clip_type='clip_norm'"], 0.5),  # DI-engine's default clip_value
        (["policy.learn.grad_clip_type='clip_norm'", "policy.learn.clip_value=5"], 5),  # pong_impala_config.py's
    ],
)
def test_di_engine_impala_gradient_clipping_is_its_optimizers(overrides, clip_norm):
    assert load_config(DING_IMPALA, overrides=overrides).policy.learn.grad_clip_norm == clip_norm


def test_impala_clipping_other_than_by_norm_is_refused():
    with pytest.raises(ConfigError, match="'policy.learn.grad_clip_type' = 'clip_value' cannot be honoured"):
        load_config(DING_IMPALA, overrides=["policy.learn.grad_clip_type='clip_value'"])


def test_impala_random_collect_size_is_accepted_with_a_report_line():
    main, create = read_config(DING_IMPALA)
    main.policy.random_collect_size = 256  # lunarlander_impala_config.py's
    *_, report = translate_ding_config(main, create, (), DING_IMPALA.name)
    (line,) = [text for text in report.of("ignored") if text.startswith("policy.random_collect_size")]
    assert "training starts from the policy's own first rollout" in line
