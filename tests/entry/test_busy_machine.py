"""A busy machine is not a frozen rank: the start-up grace scales with processes per core, many local ranks
start as fresh interpreters instead of forks, and a frozen rank in training is still found in seconds."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from ding_dist.comm.heartbeat import Heartbeat, HeartbeatMonitor, startup_grace
from ding_dist.entry.cli.errors import UsageError
from ding_dist.entry.cli.local_launch import start_method


def test_startup_grace_scales_with_processes_per_core():
    assert startup_grace(10.0, nproc=1, cores=2) == 10.0
    assert startup_grace(10.0, nproc=4, cores=2) == 10.0  # up to 2 per core: the plain grace
    assert startup_grace(10.0, nproc=16, cores=2) == 40.0
    assert startup_grace(10.0, nproc=64, cores=2) == 160.0
    assert startup_grace(3.0, nproc=64, cores=64) == 3.0


def test_many_local_ranks_per_core_start_as_fresh_interpreters():
    assert start_method(16, 2) == ("fork", "")
    assert start_method(17, 2) == ("subprocess", "more than 8 per core are not forked")
    assert start_method(64, 16) == ("fork", "")
    assert start_method(2, 2, cuda_built=True) == ("subprocess", "")
    assert start_method(64, 2, asked="fork") == ("fork", "DING_DIST_START_METHOD=fork")
    with pytest.raises(UsageError, match="DING_DIST_START_METHOD='spawn': expected 'fork' or 'subprocess'"):
        start_method(2, 2, asked="spawn")


class _Store:
    """The two calls a watching rank makes: ``check`` and ``multi_get`` of its peers' beats."""

    def __init__(self) -> None:
        self.values: dict[str, bytes] = {}

    def beat(self, rank: int, seq: int, phase: str) -> None:
        value = {"seq": seq, "pid": 1, "host": "h", "state": "alive", "gen": 0, "phase": phase}
        self.values[f"ding_dist/heartbeat/{rank}"] = json.dumps(value).encode()

    def check(self, keys):
        return all(k in self.values for k in keys)

    def multi_get(self, keys):
        return [self.values[k] for k in keys]


def test_a_starting_peer_gets_the_startup_grace_a_running_one_the_plain_grace(monkeypatch):
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "16")
    monkeypatch.delenv("DING_DIST_HEARTBEAT_STARTUP_GRACE_S", raising=False)
    monkeypatch.delenv("TORCHELASTIC_RESTART_COUNT", raising=False)
    store = _Store()
    beat = Heartbeat(store, 0, 3, period=0.5, grace=3.0, watch=True)
    assert beat.startup_grace == startup_grace(3.0, 16)
    store.beat(1, 1, "starting")
    store.beat(2, 1, "running")
    beat._read_peers()
    now = time.monotonic() + 4.0  # both silent for 4 s: more than the grace, less than the start-up grace
    found = beat.silent_peers(now)
    assert found is not None and found[1] == [2]
    assert "rank 2 of 3 stopped making progress" in found[0] and "rank 1" not in found[0]
    store.beat(1, 2, "running")  # rank 1's loop began: from now on the plain grace
    beat._read_peers()
    message, ranks = beat.silent_peers(time.monotonic() + 4.0)
    assert ranks == [1, 2]


def test_the_launchers_watch_tells_its_ranks_the_startup_grace(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monitor = HeartbeatMonitor(16, period=0.5, grace=3.0)
    try:
        assert monitor.startup_grace == 12.0
        assert monitor.env()["DING_DIST_HEARTBEAT_STARTUP_GRACE_S"] == "12.0"
    finally:
        monitor.stop()


@pytest.mark.quality
def test_sixteen_local_ranks_on_two_cores_finish_and_a_frozen_one_is_found(tmp_path):
    """Measured on the 2-core machine: the tiny run in about 40 s (forked ranks); the SIGSTOPped rank, in training,
    is found within the plain grace plus a poll."""
    from tests.entry.test_reliability import DQN_CONFIG, FAST, _ckpt_steps, _Job, _no_leftovers

    jobs = []
    try:
        started = time.monotonic()
        job = _Job(tmp_path, "cartpole_dqn", "--nproc", "16", "--max-env-steps", "512", "--exp-dir",
                   tmp_path / "tiny", "--set", "env.collector_env_num=16")  # fmt: skip
        jobs.append(job)
        assert job.wait(400) == 0, job.output()[-3000:]
        print(f"16 ranks, 512 env steps: {time.monotonic() - started:.1f} s")
        exp = tmp_path / "long"
        job = _Job(tmp_path, DQN_CONFIG, "--nproc", "16", "--max-env-steps", "400000", "--exp-dir", exp, "--timeout",
                   "300", "--health-timeout", "300", "--set", *FAST, "env.collector_env_num=16")  # fmt: skip
        jobs.append(job)
        job.wait_for(lambda: _ckpt_steps(exp), timeout=400)
        victim = job.rank_pid(5, world=16)
        os.kill(victim, signal.SIGSTOP)
        stopped_at = time.monotonic()
        code = job.wait(200)
        elapsed = time.monotonic() - stopped_at
        print(f"SIGSTOP of rank 5 of 16 found and the job ended in {elapsed:.1f} s")
        assert code == 1, job.output()[-3000:]
        named = [line for line in job.stderr_lines() if line.startswith("ding-dist: rank 5 of 16 stopped making")]
        assert len(named) == 1 and "(grace 10 s, DING_DIST_HEARTBEAT_GRACE_S)" in named[0], named
        assert elapsed < 60
        assert _no_leftovers(job) == []
    finally:
        for job in jobs:
            job.stop()
