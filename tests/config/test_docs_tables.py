"""docs/rl.md's key tables are generated from ding_dist.config.describe.KEY_MEANINGS and stay current."""

from __future__ import annotations

from pathlib import Path

from ding_dist.config.describe import render_docs

RL_MD = Path(__file__).resolve().parents[2] / "docs" / "rl.md"


def test_rl_md_key_tables_are_generated_and_current():
    text = RL_MD.read_text()
    for name in ("shared", "dqn", "ppo"):
        assert f"<!-- keys:{name} -->" in text
    assert render_docs(text) == text, (
        "docs/rl.md is stale: python -c \"from ding_dist.config.describe import write_docs; write_docs('docs/rl.md')\""
    )


def test_rl_md_has_no_undocumented_key():
    rows = [line for line in RL_MD.read_text().splitlines() if line.startswith("| `")]
    assert rows
    assert [r for r in rows if r.endswith("| - |")] == []
