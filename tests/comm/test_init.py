"""dist_init / dist_finalize / dist_mode / DistContext with real process groups."""

import os
import subprocess
import sys
import time

import pytest
import torch

import ding_dist as dd


def _init_twice():
    first = (dd.get_rank(), dd.get_world_size())
    again = dd.dist_init()  # no-op while the group runs
    same = dd.dist_init(world_size=dd.get_world_size(), rank=dd.get_rank())
    try:
        dd.dist_init(world_size=5, rank=dd.get_rank())
        conflict = "no error"
    except RuntimeError as exc:
        conflict = str(exc)
    return first, again, same, conflict, dd.is_fake(), dd.get_local_rank(), dd.comm.get_local_size()


def test_second_init_is_a_noop_and_a_conflict_is_an_error(run_ranks):
    for rank, (first, again, same, conflict, fake, local_rank, local_size) in enumerate(run_ranks(_init_twice, 2)):
        assert first == again == same == (rank, 2)
        assert "already running with world_size=2, cannot re-initialize with world_size=5" in conflict
        assert not fake and (local_rank, local_size) == (rank, 2)


def _after_finalize():
    dd.dist_finalize()
    state = (dd.is_fake(), dd.get_rank(), dd.get_world_size())
    t = torch.tensor([3.0])
    dd.allreduce(t)
    return state, t.item()


def test_finalize_returns_to_the_fake_link(run_ranks):
    assert run_ranks(_after_finalize, 2) == [((True, 0, 1), 3.0)] * 2


def _run_script(code: str, env: dict, timeout: float = 60) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    full_env.update(env)
    return subprocess.run([sys.executable, "-c", code], env=full_env, capture_output=True, text=True, timeout=timeout)


DIST_MODE_SCRIPT = """
import sys, torch
import ding_dist as dd

@dd.dist_mode
def main(fail):
    t = torch.tensor([float(dd.get_rank() + 1)])
    dd.allreduce(t)
    if fail:
        raise KeyError("boom")
    return t.item(), dd.get_world_size()

fail = sys.argv[-1] == "fail"
try:
    print("RESULT", main(fail))
except KeyError as exc:
    print("RAISED", exc)
print("FAKE_AFTER", dd.is_fake())
"""


@pytest.mark.parametrize("mode", ["ok", "fail"])
def test_dist_mode_under_torchrun_variables(mode):
    """Two real processes launched with torchrun's variables: value returned, group finalized on raise."""
    port = str(dd.comm.free_port())
    procs = []
    for rank in range(2):
        env = {
            "RANK": str(rank),
            "WORLD_SIZE": "2",
            "LOCAL_RANK": str(rank),
            "LOCAL_WORLD_SIZE": "2",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": port,
            "DING_DIST_TIMEOUT": "30",
        }
        full_env = dict(os.environ, **env)
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", DIST_MODE_SCRIPT, mode],
                env=full_env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    outputs = [p.communicate(timeout=90)[0] for p in procs]
    for out in outputs:
        if mode == "ok":
            assert "RESULT (3.0, 2)" in out
        else:
            assert "RAISED 'boom'" in out
        assert "FAKE_AFTER True" in out


def test_unreachable_master_is_a_clear_error_within_the_timeout():
    port = dd.comm.free_port()  # nobody listens there
    code = (
        "import ding_dist as dd; "
        f"dd.dist_init(backend='gloo', addr='127.0.0.1', port={port}, rank=1, world_size=2, timeout=3)"
    )
    start = time.monotonic()
    proc = _run_script(code, {})
    elapsed = time.monotonic() - start
    assert proc.returncode != 0
    assert f"rank 1 of 2 could not reach the master at 127.0.0.1:{port} within 3 s" in proc.stderr
    assert elapsed < 45


def test_plain_python_script_runs_on_the_fake_link():
    proc = _run_script(DIST_MODE_SCRIPT + "\n", {}, timeout=60)
    assert "RESULT (1.0, 1)" in proc.stdout, proc.stderr


RETRY_SCRIPT = """
import logging, socket, sys, threading, time
import ding_dist as dd
dist_init = dd.dist_init  # import torch now (names load lazily), before the port's 1.5 s timer starts
logging.basicConfig(level=logging.WARNING)
port = int(sys.argv[-1])
holder = socket.socket()
holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
holder.bind(("127.0.0.1", port))
holder.listen()
threading.Timer(1.5, holder.close).start()  # the port frees up while dist_init retries
print("RESULT", dist_init(backend="gloo", addr="127.0.0.1", port=port, rank=0, world_size=1, timeout=20))
dd.dist_finalize()
"""


def test_rendezvous_that_fails_fast_is_retried_with_backoff():
    port = dd.comm.free_port()
    proc = subprocess.run([sys.executable, "-c", RETRY_SCRIPT, str(port)], capture_output=True, text=True, timeout=60)
    assert "RESULT (0, 1)" in proc.stdout, proc.stderr
    assert "retry 1 of 2" in proc.stderr


def test_bad_retry_setting_is_a_clear_error():
    proc = _run_script(
        "import ding_dist as dd; dd.dist_init(backend='gloo', rank=0, world_size=1)", {"DING_DIST_INIT_RETRIES": "x"}
    )
    assert "DING_DIST_INIT_RETRIES='x': expected an integer >= 0" in proc.stderr
