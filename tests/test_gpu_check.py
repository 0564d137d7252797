"""benchmarks/gpu_check.sh: its CPU form runs every check that can run without a GPU (so it cannot rot
between the rare runs on a GPU machine), a failing, crashing or hanging check is reported in its own row
while the others still run, and without CUDA the plain command says so and exits 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "benchmarks"
sys.path.insert(0, str(BENCH))

import gpu_check  # noqa: E402
import gpu_check_lib  # noqa: E402


def _rows(md: str) -> dict[str, dict[str, str]]:
    """The table's rows by id: {id: {name, status, figure, seconds}}."""
    rows = {}
    for line in md.splitlines():
        if not line.startswith("| ") or line.startswith("| id ") or line.startswith("| ---"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        assert len(cells) == 5, line
        rows[cells[0]] = dict(zip(("name", "status", "figure", "seconds"), cells[1:]))
    return rows


def _run(args: list[str], out: Path, timeout: float) -> subprocess.CompletedProcess:
    env = {**os.environ, "OUT": str(out)}
    env.pop("OMP_NUM_THREADS", None)
    return subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_cpu_quick_mode_runs_every_check(tmp_path):
    proc = _run(["bash", str(BENCH / "gpu_check.sh"), "--device", "cpu", "--quick"], tmp_path, timeout=240)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    md = (tmp_path / "gpu_check.md").read_text()
    assert md in proc.stdout  # the same table on stdout
    rows = _rows(md)
    expected = [rid for spec in gpu_check_lib.CHECKS.values() for rid in spec[3]]
    assert sorted(rows) == sorted(expected)
    for rid, r in rows.items():
        if rid in ("c1", "c2"):  # nccl: the body ran over a gloo world of one instead
            assert r["status"].startswith("skipped: "), (rid, r)
            assert r["figure"].startswith("gloo stand-in on cpu ok"), (rid, r)
        else:
            assert r["status"] == "ok", (rid, r)
    assert "decentralized" in rows["c2"]["figure"]  # algorithms that are not built are named, not hidden
    assert "4/4 cases bit-identical" in rows["b1"]["figure"]
    assert "17 rows, 0 failed" in md
    for check_id in gpu_check_lib.CHECKS:
        assert (tmp_path / "gpu_check_logs" / f"{check_id}.log").exists()


def test_a_failing_check_is_reported_in_its_row_and_the_rest_still_run(tmp_path):
    cmd = [sys.executable, str(BENCH / "gpu_check.py"), "--device", "cpu", "--self-test", "--check-timeout", "3"]
    proc = _run(cmd, tmp_path, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    rows = _rows((tmp_path / "gpu_check.md").read_text())
    assert rows["z1"]["status"] == "FAIL"
    assert rows["z1"]["figure"].startswith("ValueError: deliberate failure (log: ")  # one line of the error
    assert "second line" not in rows["z1"]["figure"]
    assert rows["z2"]["status"] == "FAIL" and "exited with code 3" in rows["z2"]["figure"]
    assert rows["z3"]["status"] == "FAIL" and "timed out after 3 s" in rows["z3"]["figure"]
    assert rows["z4"]["status"] == "ok"
    assert "Traceback" in (tmp_path / "gpu_check_logs" / "z1.log").read_text()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU exit")
def test_without_a_gpu_the_plain_command_says_so_and_exits_2(tmp_path):
    proc = _run([sys.executable, str(BENCH / "gpu_check.py")], tmp_path, timeout=60)
    assert proc.returncode == 2
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1 and "no GPU" in lines[0] and "--device cpu" in lines[0], proc.stdout
    assert not (tmp_path / "gpu_check.md").exists()


def test_every_check_has_a_place_in_the_run_order_and_cells_are_escaped():
    assert sorted(gpu_check.ORDER) == sorted(gpu_check_lib.CHECKS)
    assert gpu_check.ORDER[-1] == "b6"  # the torchrun run, the likeliest to hang, comes last
    assert gpu_check._cell("a | b\nc") == "a \\| b c"
    assert set(gpu_check_lib.SIZES["quick"]) == set(gpu_check_lib.SIZES["full"])
