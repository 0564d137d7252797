"""Docs, benchmarks and tests speak of the project and its users: no text file of README.md, docs/, benchmarks/ or
tests/ names an issue number (``issue 12``, ``#12``) or the tooling the project was developed with. An upstream
project's issue (``opendilab/DI-engine#665``) or a URL stays allowed."""

from __future__ import annotations

import codecs
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SUFFIXES = {".md", ".py", ".sh", ".txt", ".toml"}
THIS = Path(__file__).resolve()

# "issue 12", "issues 21, 23"; "#12" not glued to a word, a path, a quote or another "#" (so owner/repo#12, URLs'
# fragments, hex colours "#000000" and shell's "$#" are no hits)
ISSUE = re.compile(r"\bissues? \d+|(?<![\w/.#&'\"$-])#\d{1,5}\b", re.I)
WORDS = REPO / "tools" / "tooling_words.txt"  # the words themselves live outside the checked trees, rot13-encoded


def _words(kind: str) -> list[str]:
    """The ``kind: ...`` lines of tools/tooling_words.txt (``pattern``, ``hit`` or ``spare``), decoded."""
    lines = WORDS.read_text(encoding="utf-8").splitlines()
    return [codecs.decode(line.split(": ", 1)[1], "rot13") for line in lines if line.startswith(f"{kind}: ")]


TOOLING = re.compile("|".join(_words("pattern")), re.I)


def text_files() -> list[Path]:
    """The checked files: README.md and the text files under docs/, benchmarks/ and tests/."""
    found = [REPO / "README.md"]
    for top in ("docs", "benchmarks", "tests"):
        found += [p for p in sorted((REPO / top).rglob("*")) if p.suffix in SUFFIXES and p.is_file()]
    return [p for p in found if p.resolve() != THIS and "__pycache__" not in p.parts]


def hits(pattern: re.Pattern[str], files: list[Path]) -> list[str]:
    """``file:line: text`` for every line of ``files`` that ``pattern`` matches.

    Example: ``hits(ISSUE, [Path("notes.md")])`` -> ``["notes.md:3: fixed in issue 12"]`` (paths from the repo).
    """
    out = []
    for path in files:
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if pattern.search(line):
                out.append(f"{path.relative_to(REPO) if path.is_relative_to(REPO) else path}:{number}: {line.strip()}")
    return out


@pytest.mark.parametrize(
    "line, bad",
    [
        ("fixed in issue 12", True),
        ("issues 21, 23 and 25", True),
        ("the bug (#34) is gone", True),
        ("see PR #7", True),
        ("upstream: opendilab/DI-engine#665", False),
        ("https://github.com/opendilab/DI-engine/issues/665#issuecomment-1", False),
        ('color="#000000"', False),
        ("# 12 workers  (a comment)", False),
        ("an issue with 2 ranks", False),
        ("if [ $# -gt 1 ]; then", False),
    ],
)
def test_the_issue_pattern_tells_an_issue_number_from_an_upstream_link(line, bad):
    assert bool(ISSUE.search(line)) == bad


@pytest.mark.parametrize(("line", "bad"), [(line, True) for line in _words("hit")] + [
    (line, False) for line in _words("spare")
])  # fmt: skip
def test_the_tooling_pattern_spares_ordinary_words(line, bad):
    assert bool(TOOLING.search(line)) == bad


def test_the_checked_trees_hold_the_files_that_matter():
    names = {str(p.relative_to(REPO)) for p in text_files()}
    assert {"README.md", "docs/benchmarks.md", "benchmarks/README.md", "tests/conftest.py"} <= names
    assert any(n.startswith("docs/results/") for n in names) and any(n.startswith("benchmarks/gpu/") for n in names)


def test_no_issue_numbers_in_docs_benchmarks_and_tests():
    assert hits(ISSUE, text_files()) == []


def test_no_development_tooling_in_docs_benchmarks_and_tests():
    assert hits(TOOLING, text_files()) == []
