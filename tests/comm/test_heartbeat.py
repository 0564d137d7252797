"""The liveness heartbeat: settings, the fake link, clean stops, and frozen ranks (SIGSTOP) over real processes.

A frozen rank is found by whoever watches: ``launch`` (it serves the store and SIGKILLs the rank) or, with
``launch(heartbeat=False)``, the ranks themselves (the healthy one names the frozen one and exits 1).
Timing bounds are generous (a loaded 2-core machine must not break them); the figures are measured in
benchmarks/bench_reliability.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
import torch

import ding_dist as dd
from ding_dist.comm import heartbeat as hb
from ding_dist.comm.settings import resolve_heartbeat

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SIGSTOP and /proc")

FAST = {"DING_DIST_HEARTBEAT_S": "0.5", "DING_DIST_HEARTBEAT_GRACE_S": "3"}


def _heartbeat_threads() -> list[str]:
    return sorted(t.name for t in threading.enumerate() if t.name.startswith("ding_dist-heartbeat"))


# ------------------------------------------------------------------------------------------- settings
@pytest.mark.parametrize(
    ("period", "grace", "env", "expected"),
    [
        (None, None, {}, (2.0, 10.0)),
        (None, None, {"DING_DIST_HEARTBEAT_S": "0.5", "DING_DIST_HEARTBEAT_GRACE_S": "3"}, (0.5, 3.0)),
        (1, 4, {"DING_DIST_HEARTBEAT_S": "0.5", "DING_DIST_HEARTBEAT_GRACE_S": "3"}, (1.0, 4.0)),  # arguments win
        (None, None, {"DING_DIST_HEARTBEAT_S": "4"}, (4.0, 20.0)),  # default grace: at least 5 periods
        (None, None, {"DING_DIST_HEARTBEAT_S": "0"}, (0.0, 10.0)),  # off
        (0, 0.1, {}, (0.0, 0.1)),  # off: the grace is not judged against a period
    ],
)
def test_resolve_heartbeat(period, grace, env, expected):
    assert resolve_heartbeat(period, grace, env=env) == expected


@pytest.mark.parametrize(
    ("period", "grace", "env", "needle"),
    [
        (
            None,
            None,
            {"DING_DIST_HEARTBEAT_S": "soon"},
            "DING_DIST_HEARTBEAT_S='soon': expected a number of seconds >= 0 (0 turns the heartbeat off)",
        ),
        (None, None, {"DING_DIST_HEARTBEAT_S": "-1"}, "DING_DIST_HEARTBEAT_S='-1': expected a number of seconds >= 0"),
        (None, None, {"DING_DIST_HEARTBEAT_GRACE_S": "nan"}, "DING_DIST_HEARTBEAT_GRACE_S='nan': expected a number"),
        (float("inf"), None, {}, "argument must be a finite number of seconds >= 0, got inf"),
        (True, None, {}, "argument must be a finite number of seconds >= 0, got True"),
        (2, 3, {}, "grace (3 s, DING_DIST_HEARTBEAT_GRACE_S) must be at least twice its period (2 s"),
    ],
)
def test_bad_heartbeat_settings_name_the_value(period, grace, env, needle):
    with pytest.raises(ValueError) as info:
        resolve_heartbeat(period, grace, env=env)
    assert needle in str(info.value)


# ---------------------------------------------------------------------------------------- fake link
def test_fake_link_starts_no_heartbeat(monkeypatch):
    assert dd.is_fake()
    with hb.HeartbeatMonitor(1, 0.5, 3) as monitor:  # even with a launcher's store announced and reachable
        monkeypatch.setenv(hb.STORE_ENV, monitor.address)
        assert hb.start_heartbeat(0.5, 3) is None
        with hb.heartbeat_scope() as beat:
            assert beat is None
            assert _heartbeat_threads() == ["ding_dist-heartbeat-monitor"]  # the launcher's own thread only
        assert hb.current_heartbeat() is None
        assert monitor.poll(time.monotonic() + 60) == []
    assert _heartbeat_threads() == []


# ------------------------------------------------------------------------------------- clean stops
def _threads_before_and_after_finalize(start_own: bool) -> tuple[list[str], list[str], float, bool]:
    if start_own:  # no launcher watches: this rank beats into the group's store and watches its peers
        dd.comm.start_heartbeat(0.2, 2)
    before = _heartbeat_threads()
    dd.barrier()
    started = time.monotonic()
    dd.dist_finalize()
    took = time.monotonic() - started
    return before, _heartbeat_threads(), took, hb.current_heartbeat() is None


@pytest.mark.parametrize("watched_by", ["launcher", "ranks"])
def test_finalize_stops_the_heartbeat_threads(watched_by):
    results = dd.launch(
        _threads_before_and_after_finalize, 2, watched_by == "ranks", heartbeat=watched_by == "launcher", timeout=120
    )
    threads = (
        ["ding_dist-heartbeat"] if watched_by == "launcher" else ["ding_dist-heartbeat", "ding_dist-heartbeat-watch"]
    )
    for before, after, took, cleared in results:
        assert before == threads
        assert after == []
        assert cleared
        assert took < 30  # join() is bounded; a hang would show here (the run's timeout is the backstop)


def test_a_rank_that_stopped_its_heartbeat_is_not_taken_for_frozen(monkeypatch):
    monkeypatch.setenv("DING_DIST_HEARTBEAT_S", "0.2")
    monkeypatch.setenv("DING_DIST_HEARTBEAT_GRACE_S", "1")
    assert dd.launch(_stop_heartbeat_then_idle, 2, timeout=120) == ["done", "done"]


def _stop_heartbeat_then_idle() -> str:
    dd.comm.stop_heartbeat()
    time.sleep(4)  # four graces without a beat: a clean stop, not a freeze
    dd.barrier()
    return "done"


def _store_host_finishes_first() -> str:
    dd.comm.start_heartbeat(0.2, 1)  # the ranks watch each other through rank 0's store
    dd.barrier()
    if dd.get_rank() == 1:
        time.sleep(4)  # rank 0 has finished and its store is gone: that is no freeze
    return "done"


def test_ranks_watching_each_other_let_the_store_host_finish_first():
    assert dd.launch(_store_host_finishes_first, 2, heartbeat=False, timeout=120) == ["done", "done"]


_EXIT_WITHOUT_FINALIZE = textwrap.dedent(
    """
    import sys
    import ding_dist as dd
    rank, port = int(sys.argv[1]), int(sys.argv[2])
    dd.dist_init(backend="gloo", addr="127.0.0.1", port=port, rank=rank, world_size=2, timeout=60)
    assert dd.comm.start_heartbeat(0.001, 30) is not None  # a store call is nearly always in flight
    dd.barrier()
    print("exiting", flush=True)   # no dist_finalize: the threads must neither hold nor abort the exit
    """
)


@pytest.mark.parametrize("attempt", range(3))  # without the atexit stop, most pairs abort (SIGABRT)
def test_a_rank_exits_without_finalize_while_its_heartbeat_runs(attempt, tmp_path):
    script = tmp_path / "rank.py"
    script.write_text(_EXIT_WITHOUT_FINALIZE)
    port = dd.comm.free_port()
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(r), str(port)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for r in range(2)
    ]
    try:
        outputs = [p.communicate(timeout=90) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    codes = [p.returncode for p in procs]
    assert codes == [0, 0], [err.decode(errors="replace")[-1000:] for _, err in outputs]
    assert all(b"exiting" in out for out, _ in outputs)


# ------------------------------------------------------------------------------------ frozen ranks
def _freeze(who: int, stderr_file: str, start_own: bool) -> str:
    """Rank ``who`` stops itself (SIGSTOP); the other one waits for it in a collective (300 s timeout)."""
    with open(f"{stderr_file}.{dd.get_rank()}", "w") as f:
        os.dup2(f.fileno(), 2)
    if start_own:
        dd.comm.start_heartbeat(0.5, 3)
    dd.allreduce(torch.ones(1))
    time.sleep(1.0)  # a few beats, so every watcher has seen every rank
    if dd.get_rank() == who:
        os.kill(os.getpid(), signal.SIGSTOP)
    dd.allreduce(torch.ones(1))
    return "not frozen"


@pytest.mark.parametrize("who", [0, pytest.param(1, marks=pytest.mark.quality)])
def test_launch_kills_and_names_a_frozen_rank(who, tmp_path, monkeypatch):
    for name, value in FAST.items():
        monkeypatch.setenv(name, value)
    started = time.monotonic()
    with pytest.raises(dd.comm.LaunchError) as info:
        dd.launch(_freeze, 2, who, str(tmp_path / "err"), False, timeout=120, comm_timeout=300)
    elapsed = time.monotonic() - started
    failures = dict(info.value.failures)
    assert info.value.rank == who, failures
    assert failures[who].startswith("stopped making progress: no heartbeat for "), failures
    assert failures[who].endswith("killed with SIGKILL")
    assert str(info.value).startswith(f"rank {who} stopped making progress")
    assert elapsed < 60  # the collective timeout (300 s) played no part


@pytest.mark.parametrize("who", [0, pytest.param(1, marks=pytest.mark.quality)])  # rank 0 also serves the store
def test_ranks_watching_each_other_name_the_frozen_rank(who, tmp_path):
    started = time.monotonic()
    with pytest.raises(dd.comm.LaunchError) as info:
        dd.launch(_freeze, 2, who, str(tmp_path / "err"), True, heartbeat=False, timeout=120, comm_timeout=300, grace=2)
    elapsed = time.monotonic() - started
    healthy = 1 - who
    failures = dict(info.value.failures)
    assert info.value.rank == healthy and failures[healthy] == "exited with code 1 without reporting a result"
    lines = (tmp_path / f"err.{healthy}").read_text().splitlines()
    expected = f"[rank {healthy}] ding_dist: error: DeadRankError: rank {who} of 2 stopped making progress"
    named = [line for line in lines if line.startswith(expected)]
    assert len(named) == 1, lines
    assert ("the heartbeat store it serves at 127.0.0.1:" in named[0]) == (who == 0), named  # rank 0 serves it
    assert elapsed < 60


def test_silent_deaths_are_ranks_gone_while_their_beat_says_alive():
    """What the launcher reports when torchrun's agent names only a peer's consequence: a rank whose process
    is gone with its last beat "alive" died by a signal; one that stopped its heartbeat did not."""
    import json
    import socket
    from datetime import timedelta

    killed = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    finished = subprocess.Popen([sys.executable, "-c", "pass"])
    finished.wait(30)
    with hb.HeartbeatMonitor(2, 0.5, 3) as monitor:
        host, port = monitor.address.rsplit(":", 1)
        store = torch.distributed.TCPStore(host, int(port), is_master=False, timeout=timedelta(seconds=30))
        for rank, pid, state in ((0, killed.pid, "alive"), (1, finished.pid, "stopped")):
            beat = {"seq": 3, "pid": pid, "host": socket.gethostname(), "state": state, "gen": 0}
            store.set(hb.beats.beat_key(rank), json.dumps(beat))
        assert monitor.silent_deaths() == {}  # rank 0 still runs
        killed.kill()
        killed.wait(30)
        assert monitor.silent_deaths() == {0: killed.pid}
