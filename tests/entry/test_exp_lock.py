"""Two runs never write into one experiment folder: the lock, its stale detection, the CLI's one line."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from ding_dist.entry import train
from ding_dist.utils.exp_lock import LOCK_NAME, ExperimentInUseError, ExperimentLock
from tests.entry.test_pipeline import CONFIGS, tiny_ppo


def test_a_second_run_into_a_locked_folder_is_refused(tmp_path):
    with ExperimentLock(tmp_path):
        with pytest.raises(ExperimentInUseError, match=f"is in use by pid {os.getpid()} on host"):
            train(tiny_ppo(), seed=0, exp_dir=tmp_path, max_env_steps=128)
    assert not (tmp_path / LOCK_NAME).exists()
    assert not (tmp_path / "config.py").exists(), "the refused run wrote nothing"


def test_a_stale_lock_of_a_dead_process_is_taken_over(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)
    (tmp_path / LOCK_NAME).write_text(json.dumps({"pid": pid, "host": socket.gethostname(), "started": "x"}))
    result = train(tiny_ppo(), seed=0, exp_dir=tmp_path, max_env_steps=128)
    assert result["env_steps"] == 128
    assert not (tmp_path / LOCK_NAME).exists(), "released at the end of the run"


def test_the_cli_refuses_a_busy_folder_with_one_line_and_exit_code_2(tmp_path):
    with ExperimentLock(tmp_path):
        proc = subprocess.run(
            [sys.executable, "-m", "ding_dist.entry.cli", "train", f"{CONFIGS}/cartpole_ppo_config.py"]
            + ["--exp-dir", str(tmp_path), "--max-env-steps", "128"],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert proc.returncode == 2, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and f"is in use by pid {os.getpid()}" in errors[0], proc.stderr
