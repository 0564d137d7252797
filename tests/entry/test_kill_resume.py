"""A run killed with SIGKILL (an OOM kill, a lost node) keeps what its timed checkpoints saved, and resumes from them.

Real ``ding-dist train`` jobs of the shipped CartPole DQN config, on 1 and 2 processes, with checkpoints by wall time
only (``policy.other.checkpoint.every_minutes``, no step frequency): the whole process group is killed after the
second timed checkpoint is on disk, then ``ding-dist resume`` continues it. The resumed run starts from the newest
checkpoint there was at the kill; its metrics go on from that step with the killed run's later records dropped
(every step once, in order), and the best checkpoint of the killed run stays.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys

import pytest

from ding_dist.utils import CheckpointManager, load_checkpoint, read_metrics
from tests.entry.test_reliability import DQN_CONFIG, _Job

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="finds processes through /proc"),
]

TIMED = [
    "policy.other.checkpoint.freq=0",  # no checkpoint by steps: the ones on disk before the end are timed
    "policy.other.checkpoint.every_minutes=0.04",  # 2.4 s
    "policy.other.checkpoint.keep_last=10",
    "policy.other.log_freq=256",  # where the ranks agree that a timed checkpoint is due
    "policy.learn.learning_starts=0",
    "policy.learn.update_per_collect=4",
    "env.n_evaluator_episode=2",
    "policy.eval.eval_freq=1024",
    "env.stop_value=1e9",
]


@pytest.mark.parametrize("nproc", [pytest.param(1, marks=pytest.mark.quality), 2])  # 2 processes by default
def test_a_sigkilled_run_resumes_from_its_newest_timed_checkpoint(tmp_path, nproc):
    exp = tmp_path / "exp"
    ckpts = CheckpointManager(exp / "ckpt")
    job = _Job(tmp_path, DQN_CONFIG, "--nproc", str(nproc), "--exp-dir", exp, "--max-env-steps", "10000000",
               "--set", *TIMED)  # fmt: skip
    job.wait_for(lambda: len(ckpts.checkpoints()) >= 2, timeout=240)
    os.killpg(job.proc.pid, signal.SIGKILL)  # every process of the job at once, as a lost node
    job.proc.wait()
    job.kill_leftovers()

    newest = ckpts.latest()
    step = load_checkpoint(newest)["counters"]["env_steps"]
    assert newest.name == f"ckpt_{step:09d}.pt"
    killed_rows = read_metrics(exp / "tb")
    assert killed_rows and not (exp / "result.json").exists()
    best = load_checkpoint(exp / "ckpt" / "best.pt")
    assert best["best"] is True and best["counters"]["best_eval"] == best["counters"]["last_eval"]

    target = step + 1024
    done = subprocess.run(
        [sys.executable, "-m", "ding_dist.entry.cli", "resume", str(exp), "--max-env-steps", str(target)],
        cwd=tmp_path, capture_output=True, text=True, timeout=240,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.search(rf"resumed at env step {step}, train iter \d+", done.stderr), done.stderr[-3000:]
    if_two = f"resuming on {nproc} processes, as the run was trained"
    assert (if_two in done.stderr) == (nproc == 2), done.stderr[-3000:]
    result = json.loads((exp / "result.json").read_text())
    assert result["env_steps"] == target and result["world_size"] == nproc
    assert result["checkpoint"]["last"] == str(exp / "ckpt" / f"ckpt_{target:09d}.pt")

    rows = read_metrics(exp / "tb")
    steps = [r["step"] for r in rows if "time/env_steps" in r]
    assert steps == sorted(set(steps))  # every logged step once, in order: nothing of the killed run after `step`
    killed_steps = [r["step"] for r in killed_rows if "time/env_steps" in r]
    assert [s for s in steps if s <= step] == [s for s in killed_steps if s <= step]  # the kept part is the same
    assert steps[-1] == target
    assert [p.name for p in (exp / "ckpt").iterdir() if p.name.endswith(".tmp")] == []  # a write cut short: removed
