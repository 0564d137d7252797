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
def on_term(*_):
    with open(sys.argv[1] + ".tmp", "w") as f:  # written whole, then renamed: the test never reads it half-written
        f.write("SIGTERM")
    os.replace(sys.argv[1] + ".tmp", sys.argv[1])
    os._exit(143)
signal.signal(signal.SIGTERM, on_term)
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


def test_watch_store_calls_on_lost_once_a_reached_store_stops_answering():
    """A cut-off node's agent used to sit for good in a store call; the watch sees the store gone within its bound."""
    import socket
    import threading

    from ding_dist.entry.cli.agent import watch_store

    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    lost: list[float] = []
    called = threading.Event()
    done = watch_store("127.0.0.1", port, 1.0, lambda s: (lost.append(s), called.set()), every_s=0.1)
    try:
        time.sleep(1.5)  # reached every 0.1 s for longer than the bound: never lost
        assert lost == []
        server.close()
        assert called.wait(10), "the watch did not notice the store was gone"
        assert len(lost) == 1 and lost[0] > 1.0
    finally:
        done.set()
        server.close()


def test_watch_store_waits_for_a_store_not_yet_up():
    """Before the store is first reached (its node not started yet), torch's join timeout applies, not the watch."""
    import socket

    from ding_dist.entry.cli.agent import watch_store

    free = socket.create_server(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()
    lost: list[float] = []
    done = watch_store("127.0.0.1", port, 0.3, lost.append, every_s=0.1)
    time.sleep(1.0)
    done.set()
    assert lost == []
