"""benchmarks/bench_parity.py on SIGTERM (``kill``, a SLURM time limit): it stops its running training process, starts
none of the runs still queued, and exits with 143, leaving no result file of an unfinished run.

A real harness process on the masked-CartPole row (both sides are ding_dist, so no reference library is needed), four
runs queued one at a time; SIGTERM arrives while the first trains.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_sigterm_stops_the_running_run_and_starts_no_queued_one(tmp_path):
    out = tmp_path / "runs"
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    cmd = [sys.executable, str(REPO / "benchmarks" / "bench_parity.py"), "--out", str(out), "--jobs", "1",
           "--rows", "masked_cartpole_r2d2", "--seeds", "0,1", "--budget", "200000"]  # fmt: skip
    harness = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        row = out / "masked_cartpole_r2d2"
        first_log = row / "ours" / "seed0.log"
        # the first run has started training once its log shows the CLI's start line
        _wait_for(lambda: first_log.is_file() and "exp dir" in first_log.read_text(), 120, "the first run to start")
        harness.send_signal(signal.SIGTERM)
        output, _ = harness.communicate(timeout=60)
    finally:
        harness.kill()
    assert harness.returncode == 128 + signal.SIGTERM, output
    time.sleep(2)  # a queued run started after the harness's exit would have written its log by now
    logs = sorted(str(p.relative_to(row)) for p in row.rglob("seed*.log"))
    assert logs == ["ours/seed0.log"], output
    assert list(row.rglob("seed*.json")) == []  # no result file of the stopped run
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert str(out) not in ps  # no training process of ours left running
