"""Every relative link of README.md, docs/ (with docs/results/) and the benchmarks' READMEs reaches a file of the
repo, and every anchor a heading there (GitHub's heading ids: lower case, punctuation dropped, spaces as hyphens,
``-1``, ``-2`` for repeats)."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [
    REPO / "README.md",
    *sorted((REPO / "docs").glob("*.md")),
    *sorted((REPO / "docs" / "results").glob("*.md")),
    *sorted((REPO / "benchmarks").glob("**/README.md")),
]
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|!\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)


def _text(page: Path) -> str:
    """The page without its fenced code blocks (a ``[x](y)`` in code is no link) and inline code spans."""
    return re.sub(r"`[^`\n]*`", "``", FENCE.sub("", page.read_text(encoding="utf-8")))


def slug(heading: str) -> str:
    """GitHub's id of a heading's text.

    Example: ``slug("2a. Localhost (both ranks on one machine)") == "2a-localhost-both-ranks-on-one-machine"``
    """
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading: its text
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The ids of ``page``'s headings, repeats numbered as GitHub numbers them."""
    seen: Counter[str] = Counter()
    found = set()
    for heading in HEADING.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
        base = slug(heading)
        found.add(base if not seen[base] else f"{base}-{seen[base]}")
        seen[base] += 1
    found |= set(re.findall(r"<a\s+(?:name|id)=\"([^\"]+)\"", page.read_text(encoding="utf-8")))
    return found


def _links(page: Path) -> list[str]:
    return [a or b for a, b in LINK.findall(_text(page))]


def test_slugs_follow_github():
    assert slug("2a. Localhost (both ranks on one machine)") == "2a-localhost-both-ranks-on-one-machine"
    assert slug("Busy machines: more processes than cores") == "busy-machines-more-processes-than-cores"
    assert slug("`--nproc N` and `ding-dist`") == "--nproc-n-and-ding-dist"
    assert slug("DI-engine's classic-control files") == "di-engines-classic-control-files"


def test_pages_have_links_to_check():
    total = sum(len(_links(p)) for p in PAGES)
    assert total > 50 and any("#" in link for p in PAGES for link in _links(p))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_and_anchor_resolves(page):
    broken = []
    for link in _links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", link):  # https:, mailto:: not checked here (no network)
            continue
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.exists():
            broken.append(f"{link}: no file {target.relative_to(REPO) if target.is_relative_to(REPO) else target}")
        elif anchor and target.suffix == ".md" and anchor not in anchors(target):
            broken.append(f"{link}: no heading #{anchor} in {target.relative_to(REPO)}")
    assert broken == []


def test_reproduce_commands_name_no_path_of_the_machine_they_ran_on():
    """Commands in the docs use paths relative to the repo (venvs named by what they hold), not the measuring
    machine's work folder, clone or home."""
    machine = re.compile(r"(?<![\w.~])/(?:work|home|root|Users)/\S*|/tmp/\S*venv\S*")
    found = [f"{p.relative_to(REPO)}: {m}" for p in PAGES for m in machine.findall(p.read_text(encoding="utf-8"))]
    assert found == []


def test_the_benchmarks_index_links_every_results_page():
    """docs/benchmarks.md is the index of docs/results/: each page is linked from it, and each link reaches one."""
    linked = {link.partition("#")[0] for link in _links(REPO / "docs" / "benchmarks.md")}
    pages = {f"results/{p.name}" for p in (REPO / "docs" / "results").glob("*.md")}
    assert len(pages) >= 4 and pages <= linked


def test_the_path_of_a_run_names_every_file_of_ding_dist_entry():
    """docs/contributing.md's "path of a run" names each module of ``ding_dist/entry/`` (``a.py`` or
    ``loops/{a,b}.py``), so a new module there comes with its place on the path."""
    text = (REPO / "docs" / "contributing.md").read_text(encoding="utf-8")
    block = text.split("## The path of a run", 1)[1].split("```", 2)[1]
    named = set(re.findall(r"(\w+)\.py", block))
    for group in re.findall(r"\{([\w,]+)\}\.py", block):
        named |= set(group.split(","))
    modules = {p.stem for p in (REPO / "ding_dist" / "entry").rglob("*.py") if p.stem not in ("__init__",)}
    assert sorted(modules - named) == []
