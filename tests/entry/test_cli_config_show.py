"""``ding-dist config show CONFIG``: every key of the resolved config with its type, default and meaning."""

from __future__ import annotations

from pathlib import Path

import pytest

from ding_dist.config.describe import describe, markdown_table
from ding_dist.config.sections import ENV_KEYS
from ding_dist.config.split import SPLIT_KEYS
from ding_dist.entry import cli
from ding_dist.policy import POLICY_REGISTRY, get_policy_cls

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs").glob("*_config.py"))


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.stem)
def test_every_key_of_shipped_configs_has_a_meaning(config, capsys):
    assert cli.main(["config", "show", str(config)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["key", "value", "type", "default", "meaning"]
    assert len(lines) > 20
    undocumented = [line.split()[0] for line in lines[1:] if line.rstrip().endswith(" -")]
    assert undocumented == []


def test_show_marks_overridden_values(capsys):
    ppo = next(p for p in CONFIGS if p.stem == "cartpole_ppo_config")
    assert cli.main(["config", "show", str(ppo), "--set", "policy.learn.clip_ratio=0.3"]) == 0
    (row,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("policy.learn.clip_ratio ")]
    assert row.split()[1:5] == ["*", "0.3", "float", "0.2"]
    assert row.endswith("policy ratio clip")


def test_show_reports_config_mistakes_as_one_line(capsys):
    ppo = next(p for p in CONFIGS if p.stem == "cartpole_ppo_config")
    assert cli.main(["config", "show", str(ppo), "--set", "policy.learn.clip_rato=0.3"]) == 2
    assert "did you mean 'policy.learn.clip_ratio'?" in capsys.readouterr().err


def test_policy_specific_meaning_wins():
    schema = {"policy": {"learn": {"batch_size": 64}}}
    (ppo,) = describe(schema, schema, "ppo")
    (dqn,) = describe(schema, schema, "dqn")
    assert ppo.meaning == get_policy_cls("ppo").keys["learn.batch_size"].meaning
    assert dqn.meaning == get_policy_cls("dqn").keys["learn.batch_size"].meaning
    assert ppo.meaning != dqn.meaning and "minibatch" in ppo.meaning
    assert markdown_table([dqn], strip="policy.").splitlines()[2] == (
        "| `learn.batch_size` | 64 | batch per update, the run's total (each rank: batch_size / N) |"
    )


def test_a_policy_class_s_own_key_meanings_win_over_the_shared_ones():
    schema = {"policy": {"learn": {"batch_size": 64, "my_new_key": 1.0}}}
    rows = describe(schema, schema, "ppo", {"learn.my_new_key": "a new key", "learn.batch_size": "mine"})
    assert [r.meaning for r in rows] == ["mine", "a new key"]
    assert [r.meaning for r in describe(schema, schema, "ppo")] == [
        get_policy_cls("ppo").keys["learn.batch_size"].meaning,
        "",
    ]


def test_markdown_keeps_the_value_column(capsys):
    assert cli.main(["config", "show", "cartpole_ppo", "--markdown", "--set", "env.collector_env_num=4"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == ["| key | value | default | meaning |", "|---|---|---|---|"]
    (row,) = [line for line in lines if line.startswith("| `env.collector_env_num` |")]
    assert row.split(" | ")[1:3] == ["4", "8"]  # the resolved value, then the default


@pytest.mark.parametrize("policy_type", sorted(POLICY_REGISTRY))
def test_every_key_split_over_the_ranks_says_it_is_the_runs_total(policy_type):
    """What N processes share out (SPLIT_KEYS, and the replay capacity) is described as the run's total, never as
    a per-rank size."""
    cls = get_policy_cls(policy_type)
    schema = {"env": ENV_KEYS.defaults(), "policy": cls.default_config()}
    rows = {r.key: r.meaning for r in describe(schema, schema, policy_type, cls.keys)}
    split = [k for k in rows if k in SPLIT_KEYS or k.endswith("replay_buffer_size")]
    assert "env.collector_env_num" in split and "policy.collect.n_sample" in split
    assert {k: rows[k] for k in split if "the run's total" not in rows[k] or "per rank" in rows[k]} == {}
