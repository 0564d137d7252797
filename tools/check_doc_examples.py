"""Every shell and Python example in docs/ runs (shortened), except the few that need hardware or
other hosts, each listed in SKIP with the reason.

Run by hand, not yet part of CI (some examples still fail): ``python -m pytest -q tools/check_doc_examples.py``.

Python blocks of one page run in order in one namespace (like a doctest session); shell blocks run
line by line with bash in a scratch folder holding ``configs/``, ``entry/`` and ``benchmarks/``, with
``ding-dist train`` runs cut to a few hundred env steps.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted((ROOT / "docs").glob("*.md"))
BLOCK = re.compile(r"```(bash|python)\n(.*?)```", re.S)
STEPS = "256"

#: (page, text in the block) -> why it does not run here.
SKIP: dict[tuple[str, str], str] = {
    ("benchmarks.md", "gpu_check.sh"): "GPU check and benchmarks: minutes of measurements",
    ("benchmarks.md", "bench_vs_ding"): "needs a DI-engine virtual environment",
    ("rl.md", "bench_rl.py"): "benchmark: minutes of measurements",
    ("sac.md", "bench_sac.py"): "benchmark: minutes of measurements",
    ("launching.md", "--nnodes 2"): "needs two hosts",
    ("training.md", "--nnodes 2"): "needs two hosts",
    ("launching.md", "srun"): "needs SLURM",
    ("training.md", "srun"): "needs SLURM",
    ("migration_from_ding.md", "dizoo/"): "needs a DI-engine checkout",
    ("migration_from_ding.md", "from ding.utils"): "imports DI-engine",
    ("reliability.md", "pytest tests/"): "runs part of this test suite",
    ("launching.md", "python train.py"): "train.py is the reader's script",
    ("launching.md", "torchrun --standalone --nproc_per_node 2 train.py"): "train.py is the reader's script",
}


def _blocks() -> list:
    params = []
    for page in DOCS:
        for k, m in enumerate(BLOCK.finditer(page.read_text())):
            lang, code = m.groups()
            reason = next((why for (name, text), why in SKIP.items() if name == page.name and text in code), None)
            marks = [pytest.mark.skip(reason=reason)] if reason else []
            params.append(pytest.param(page.name, k, lang, code, id=f"{page.stem}-{k}-{lang}", marks=marks))
    return params


def _shorten(command: str) -> str:
    """``ding-dist train`` and entry scripts with a small ``--max-env-steps``; comments dropped."""
    command = re.sub(r"\s+#.*$", "", command)
    if re.search(r"(ding-dist|ding_dist\.entry\.cli) train|entry/\S+_main\.py", command):
        if "--max-env-steps" in command:
            command = re.sub(r"--max-env-steps \d+", f"--max-env-steps {STEPS}", command)
        else:
            command += f" --max-env-steps {STEPS}"
    return command


def _shell_lines(code: str) -> list[str]:
    joined = re.sub(r"\\\n\s*", " ", code)
    return [_shorten(line) for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("docs")
    for name in ("configs", "entry", "benchmarks"):
        (folder / name).symlink_to(ROOT / name)
    return folder


_NAMESPACES: dict[str, dict] = {}


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize(("page", "index", "lang", "code"), _blocks())
def test_doc_example_runs(page, index, lang, code, scratch, monkeypatch):
    monkeypatch.chdir(scratch)
    if lang == "python":
        namespace = _NAMESPACES.setdefault(page, {"__name__": f"docs_{Path(page).stem}"})
        exec(compile(code, f"docs/{page}[{index}]", "exec"), namespace)
        return
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    for line in _shell_lines(code):
        done = subprocess.run(["bash", "-c", line], cwd=scratch, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"docs/{page}: {line}\n{done.stderr[-2000:]}"


def test_every_block_is_found():
    blocks = _blocks()
    assert len(blocks) > 40
    assert {p.values[2] for p in blocks} == {"bash", "python"}


def test_shorten_cuts_training_runs():
    short = f"ding-dist train c.py --max-env-steps {STEPS}"
    assert _shorten("ding-dist train c.py --max-env-steps 40000  # note") == short
    assert _shorten("ding-dist train c.py --nproc 2") == f"ding-dist train c.py --nproc 2 --max-env-steps {STEPS}"
    assert _shorten("ding-dist plot runs/x") == "ding-dist plot runs/x"
