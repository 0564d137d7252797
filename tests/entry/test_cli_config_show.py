"""``ding-dist config show CONFIG``: every key of the resolved config with its type, default and meaning."""

from __future__ import annotations

from pathlib import Path

import pytest

from ding_dist.config.describe import KEY_MEANINGS, describe, markdown_table
from ding_dist.entry import cli

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
    assert ppo.meaning == KEY_MEANINGS["ppo:policy.learn.batch_size"]
    assert dqn.meaning == KEY_MEANINGS["policy.learn.batch_size"]
    assert markdown_table([dqn], strip="policy.").splitlines()[2] == (
        "| `learn.batch_size` | 64 | batch per update, global (each rank: batch_size / N) |"
    )
