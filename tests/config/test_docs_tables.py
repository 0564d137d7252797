"""docs/rl.md's key tables are generated from ding_dist.config.describe.KEY_MEANINGS and stay current."""

from __future__ import annotations

import json
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


def test_migration_guide_coverage_tables_are_generated_and_current():
    """docs/migration_from_ding.md's DI-engine file tables are tools/ding_coverage.py's rendering of
    docs/ding_coverage.json (the sweep's results), not hand-written."""
    import importlib.util

    repo = RL_MD.parents[1]
    spec = importlib.util.spec_from_file_location("ding_coverage", repo / "tools" / "ding_coverage.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    text = (repo / "docs" / "migration_from_ding.md").read_text()
    for name in ("summary", "files"):
        assert f"<!-- ding-coverage:{name} -->" in text
    data = json.loads((repo / "docs" / "ding_coverage.json").read_text())
    assert tool.render(text, data) == text, "stale docs/migration_from_ding.md: python tools/ding_coverage.py --render"
