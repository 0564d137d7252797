"""Two runs never write into one experiment folder: the lock, its stale detection, the CLI's one line."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time

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


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


def test_two_starts_that_find_one_stale_lock_at_once_do_not_both_take_it(tmp_path, monkeypatch):
    """Both starts read the stale holder, then wait (the window widened to 0.3 s), then try to take it over."""
    (tmp_path / LOCK_NAME).write_text(json.dumps({"pid": _dead_pid(), "host": socket.gethostname(), "started": "x"}))
    holder = ExperimentLock._holder

    def slow_holder(self, *fd):
        found = holder(self, *fd)
        time.sleep(0.3)
        return found

    monkeypatch.setattr(ExperimentLock, "_holder", slow_holder)
    start, outcome = threading.Barrier(2), []

    def take() -> None:
        start.wait()
        try:
            outcome.append(ExperimentLock(tmp_path).acquire())
        except ExperimentInUseError as e:
            outcome.append(e)

    threads = [threading.Thread(target=take) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    held = [o for o in outcome if isinstance(o, ExperimentLock)]
    assert len(held) == 1 and len(outcome) == 2, outcome
    assert "is in use by pid" in str(next(o for o in outcome if isinstance(o, ExperimentInUseError)))
    held[0].release()
    assert not (tmp_path / LOCK_NAME).exists()


@pytest.mark.parametrize("left", ["", "{", '{"pid": 1, "host": "'])
def test_a_lock_file_no_live_process_holds_is_stale(tmp_path, left):
    """An empty or cut lock file (a full disk while it was written) is taken over, not 'in use' forever."""
    (tmp_path / LOCK_NAME).write_text(left)
    lock = ExperimentLock(tmp_path).acquire()
    assert json.loads((tmp_path / LOCK_NAME).read_text())["pid"] == os.getpid()
    lock.release()


def test_a_lock_held_by_a_live_process_is_in_use_whatever_its_file_says(tmp_path):
    """The lock is the open file held by its owner for the run's life (not its text): another process that holds
    it, even while its file is still empty, keeps the folder in use."""
    code = (
        "import sys, time; from ding_dist.utils.exp_lock import ExperimentLock; "
        f"lock = ExperimentLock({str(tmp_path)!r}).acquire(); open(lock.path, 'w').close(); "
        "print('held', flush=True); time.sleep(30)"
    )
    owner = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout.readline().strip() == "held"
        assert (tmp_path / LOCK_NAME).read_text() == ""  # its text is gone, the holder is not
        with pytest.raises(ExperimentInUseError, match="is in use by another run"):
            ExperimentLock(tmp_path).acquire()
    finally:
        owner.kill()
        owner.wait()
    ExperimentLock(tmp_path).acquire().release()  # its owner is gone: stale now


def test_a_child_forked_by_the_holder_does_not_keep_the_lock_after_the_holder_died(tmp_path):
    """An env worker forked by rank 0 outlives a SIGKILLed rank 0 for a moment: the folder is free at once."""
    code = (
        "import os, sys, time; from ding_dist.utils.exp_lock import ExperimentLock; "
        f"lock = ExperimentLock({str(tmp_path)!r}).acquire(); child = os.fork()\n"
        "if child == 0: os.close(1); os.close(2); time.sleep(30); os._exit(0)\n"
        "print(child, flush=True); os._exit(0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    child = int(done.stdout)
    try:
        ExperimentLock(tmp_path).acquire().release()
    finally:
        os.kill(child, 9)
