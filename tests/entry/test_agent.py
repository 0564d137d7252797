"""Torchrun's agent as ``ding-dist`` runs it (:mod:`ding_dist.entry.cli.agent`), with real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl(PR_SET_PDEATHSIG) is Linux's")

# A worker (torchrun's variables set) that asks for SIGTERM when its agent dies, and says when it gets it.
WORKER = """
import os, signal, sys, time
from ding_dist.entry.cli.agent import die_with_agent
signal.signal(signal.SIGTERM, lambda *_: (open(sys.argv[1], "w").write("SIGTERM"), os._exit(143)))
die_with_agent()
open(sys.argv[1] + ".ready", "w").close()
time.sleep(60)
"""
# The agent: starts the worker, then waits to be killed.
AGENT = """
import subprocess, sys, time
subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]])
time.sleep(60)
"""


def _wait(predicate, timeout: float = 30.0) -> bool:
    end = time.monotonic() + timeout
    while not predicate() and time.monotonic() < end:
        time.sleep(0.02)
    return predicate()


def test_a_killed_agent_leaves_no_orphan_worker(tmp_path):
    """Before: a worker of a SIGKILLed agent ran on as an orphan. Now the kernel sends it SIGTERM (it stops like a
    preempted rank)."""
    mark = tmp_path / "worker.txt"
    env = {**os.environ, "TORCHELASTIC_RUN_ID": "test"}
    agent = subprocess.Popen([sys.executable, "-c", AGENT, WORKER, str(mark)], env=env, start_new_session=True)
    try:
        assert _wait(lambda: (tmp_path / "worker.txt.ready").exists()), "the worker did not start"
        agent.send_signal(signal.SIGKILL)
        agent.wait(10)
        assert _wait(mark.exists, timeout=10), "the worker did not get SIGTERM when its agent died"
        assert mark.read_text() == "SIGTERM"
    finally:
        os.killpg(agent.pid, signal.SIGKILL)
