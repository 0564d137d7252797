"""tools/ding_coverage.py's sweep: two training runs at a time, each result kept as it comes, ``--missing`` resumes.

Real runs: two copies of one small DI-engine file (the same file name in two folders, so their runs must not share
an experiment folder) are trained by the ``ding-dist`` CLI in subprocesses, two at a time.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FILE = REPO / "tests" / "config" / "ding_files" / "cartpole_dqn_ding_config.py"


@pytest.fixture
def tool(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("ding_coverage_under_test", REPO / "tools" / "ding_coverage.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "JSON", tmp_path / "coverage.json")
    monkeypatch.setattr(module, "DOCS", tmp_path / "migration.md")
    (tmp_path / "migration.md").write_text("# guide\n")
    # ding-dist's CLI on PATH is this interpreter's (the subprocesses run ``sys.executable -m ding_dist.entry.cli``)
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}")
    return module


def _dizoo(root: Path) -> Path:
    for folder in ("cartpole", "cartpole_copy"):
        target = root / "dizoo" / "classic_control" / folder / "config"
        target.mkdir(parents=True)
        shutil.copy(FILE, target / FILE.name)
    return root / "dizoo"


def test_sweep_trains_two_at_a_time_keeps_each_result_and_resumes(tool, tmp_path, monkeypatch):
    dizoo = _dizoo(tmp_path)
    keys = [f"classic_control/{f}/config/{FILE.name}" for f in ("cartpole", "cartpole_copy")]
    written: list[int] = []  # how many runs the JSON held each time it was written during the sweep
    real_write = tool.atomic_write_text

    def spy(path, text):
        if path == tool.JSON:
            written.append(sum("run" in e for e in json.loads(text)["files"].values()))
        real_write(path, text)

    monkeypatch.setattr(tool, "atomic_write_text", spy)
    assert tool.main(["--dizoo", str(dizoo), "--train", "--jobs", "2", "--budget-s", "300"]) == 0
    data = json.loads(tool.JSON.read_text())
    assert sorted(data["files"]) == keys
    runs = [data["files"][k]["run"] for k in keys]
    assert [r["ok"] for r in runs] == [True, True]
    assert [r["env_steps"] for r in runs] == [data["files"][k]["budget"] for k in keys] == [80, 80]
    assert written == [1, 2, 2]  # after each run, then the final write

    def no_training(*args, **kwargs):
        raise AssertionError("--missing trained a file that already has a successful run")

    monkeypatch.setattr(tool, "train", no_training)
    assert tool.main(["--dizoo", str(dizoo), "--train", "--missing", "--jobs", "2"]) == 0
    assert [json.loads(tool.JSON.read_text())["files"][k]["run"] for k in keys] == runs


def test_jobs_below_one_is_one_line_and_exit_code_2(tool, capsys):
    with pytest.raises(SystemExit) as stop:
        tool.main(["--jobs", "0", "--render"])
    assert stop.value.code == 2
    assert "--jobs must be >= 1, got 0" in capsys.readouterr().err
