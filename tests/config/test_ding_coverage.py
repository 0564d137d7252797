"""docs/rl.md's table of DI-engine 0.5.3's 32 online-RL classic-control files: what it says is accepted stays
accepted, checked on this project's copies of those files' keys and values (``tests/config/ding_files/``; DI-engine
itself is not installed in CI)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ding_dist.config import load_config
from ding_dist.config.ding import TRANSLATORS
from ding_dist.config.ding import report as ding_report

REPO = Path(__file__).resolve().parents[2]
FILES = Path(__file__).resolve().parent / "ding_files"
SECTION = "### DI-engine's classic-control files"
NAMED = re.compile(r"dizoo/classic_control/(cartpole|pendulum|acrobot)/config/(\w+\.py)")


def _table() -> dict[str, tuple[str, str]]:
    """``{DI-engine file name: (policy type, "accepted" or "refused")}`` from docs/rl.md's coverage table."""
    text = (REPO / "docs" / "rl.md").read_text()
    body = text.split(SECTION, 1)[1].split("\n#", 1)[0]
    rows = {}
    for line in body.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].startswith("`") and cells[0].endswith(".py`"):
            rows[cells[0].strip("`")] = (cells[1].strip("`"), cells[2])
    return rows


def _copies() -> dict[str, Path]:
    """``{DI-engine file name: our copy}`` for every copy whose docstring names one of DI-engine's files."""
    found = {}
    for path in sorted(FILES.glob("*.py")):
        named = NAMED.search(path.read_text().split('"""')[1])
        if named:
            found[named.group(2)] = path
    return found


def test_the_table_lists_the_32_files_once_each():
    rows = _table()
    assert len(rows) == 32
    assert {verdict for _, verdict in rows.values()} <= {"accepted", "refused"}


def test_every_copy_is_a_file_of_the_table():
    assert set(_copies()) - set(_table()) == set()


@pytest.mark.parametrize("name", sorted(n for n, (_, v) in _table().items() if v == "accepted" and n in _copies()))
def test_accepted_files_stay_accepted(name, monkeypatch):
    monkeypatch.setattr(ding_report, "reported", set())
    monkeypatch.delenv(ding_report.REPORTED_ENV, raising=False)
    policy_type, _ = _table()[name]
    cfg = load_config(_copies()[name])  # what ``ding-dist config show`` does: translate, then compile
    assert cfg.create_config.policy.type == policy_type


def test_migration_guide_names_every_policy_a_di_engine_file_may_use():
    """docs/migration_from_ding.md says which DI-engine policy types run: every one the dialect translates."""
    text = (REPO / "docs" / "migration_from_ding.md").read_text()
    section = text.split("## DI-engine config files", 1)[1].split("```", 1)[0]
    named = set(re.findall(r"`([a-z0-9_]+)`", section.split("Offline", 1)[0]))
    assert set(TRANSLATORS) <= named
