"""``pid_alive``: running and stopped processes count, exited ones (zombies included) do not."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from ding_dist.comm.processes import pid_alive


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc")
def test_a_zombie_is_gone_and_a_running_process_alive():
    assert pid_alive(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while _state(child.pid) != "Z":  # exited, not reaped yet: the lock holder or writer is gone
        assert time.monotonic() < deadline, "the child did not exit"
        time.sleep(0.02)
    assert not pid_alive(child.pid)
    child.wait()
    assert not pid_alive(child.pid)
