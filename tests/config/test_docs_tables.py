"""docs/rl.md's key tables are generated from the policies' key declarations and stay current."""

from __future__ import annotations

import json
from pathlib import Path

from ding_dist.config.describe import render_docs

RL_MD = Path(__file__).resolve().parents[2] / "docs" / "rl.md"


def test_rl_md_key_tables_are_generated_and_current():
    text = RL_MD.read_text()
    for name in ("shared", "dqn", "ppo"):
        assert f"<!-- keys:{name} -->" in text
    assert render_docs(text) == text, "docs/rl.md is stale: python -m ding_dist.config.describe --write docs/rl.md"


def test_config_keys_md_tables_every_policy_and_is_current():
    from ding_dist.policy import POLICY_REGISTRY

    text = (RL_MD.parent / "config_keys.md").read_text()
    classes = {cls: name for name, cls in POLICY_REGISTRY.items() if f"<!-- keys:{name} -->" in text}
    assert set(classes) == set(POLICY_REGISTRY.values())  # one table per policy class
    assert render_docs(text) == text, (
        "docs/config_keys.md is stale: python -m ding_dist.config.describe --write docs/config_keys.md"
    )
    assert [r for r in text.splitlines() if r.startswith("| `") and r.endswith("| - |")] == []


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


def test_generated_rows_have_as_many_cells_as_their_header():
    """A "|" inside a meaning (|TD error|) is escaped, else the row gets a column too many."""
    import re

    checked, wrong = 0, []
    for page in ("rl.md", "config_keys.md", "actor_learner.md"):
        header_cells = None
        for line in (RL_MD.parent / page).read_text().splitlines():
            cells = len(re.findall(r"(?<!\\)\|", line)) - 1
            if line.startswith("| key |"):
                header_cells = cells
            elif not line.startswith("|"):
                header_cells = None  # the end of a table
            elif line.startswith("| `") and header_cells is not None:
                checked += 1
                wrong += [f"{page}: {line}"] * (cells != header_cells)
    assert wrong == []
    assert checked > 500  # every policy's table and the run's sections
