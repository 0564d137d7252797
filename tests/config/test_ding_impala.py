"""DI-engine's own cartpole_impala_config.py runs on ding_dist's IMPALA: the same V-trace horizon (unroll_len),
clipping, discount and uses of each collected step; DI-engine keys IMPALA cannot honour are one clear error."""

from __future__ import annotations

from pathlib import Path

import pytest

from ding_dist.config import ConfigError
from ding_dist.entry import pipeline
from ding_dist.entry.experiment import load_config

DING_IMPALA = Path(__file__).resolve().parent / "ding_files" / "cartpole_impala_ding_config.py"


def test_di_engine_impala_file_gets_its_meaning():
    cfg = load_config(DING_IMPALA)
    p = cfg.policy
    assert (cfg.env.id, cfg.env.stop_value, cfg.create_config.policy.type) == ("CartPole-v0", 195, "impala")
    assert (p.model.hidden_sizes, p.model.activation) == ([64, 64, 64], "relu")  # VAC: encoder + actor head
    # unroll_len 32 on each of the 8 envs; DI-engine uses each step 4 x 16 / 16 = 4 times: 4 passes here
    assert (p.collect.n_sample, p.learn.epoch_per_collect, p.learn.batch_size) == (256, 4, 256)
    assert (p.collect.discount_factor, p.learn.vtrace_lambda, p.learn.rho_bar, p.learn.c_bar) == (0.9, 0.95, 1.0, 1.0)
    assert (p.learn.learning_rate, p.learn.value_weight, p.learn.entropy_weight) == (0.0005, 0.5, 0.0001)
    assert p.eval.eval_freq == 50 * 256  # 200 train iters at 4 per collect of 256 env steps


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
