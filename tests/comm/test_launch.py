"""launch(): results, errors naming the rank, a dead rank, timeouts."""

import os
import signal
import time

import pytest
import torch

import ding_dist as dd


def _rank_squared(offset):
    return dd.get_rank() ** 2 + offset


def test_results_in_rank_order(run_ranks):
    assert run_ranks(_rank_squared, 3, 10) == [10, 11, 14]


def _raise_on_rank1():
    if dd.get_rank() == 1:
        raise ValueError("bad value on purpose")
    dd.barrier()  # rank 0 waits for a peer that has failed
    return "unreachable"


def test_an_exception_names_the_rank(run_ranks):
    with pytest.raises(dd.comm.LaunchError, match="rank 1 raised ValueError: bad value on purpose") as info:
        run_ranks(_raise_on_rank1, 2)
    assert info.value.rank == 1 and isinstance(info.value.exception, ValueError)
    assert "traceback of rank 1" in str(info.value)


def _kill_rank1_midway():
    t = torch.ones(4)
    dd.allreduce(t)
    if dd.get_rank() == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    start = time.monotonic()
    try:
        for _ in range(100):
            dd.allreduce(t)
    except Exception as exc:
        raise RuntimeError(f"survivor saw an error after {time.monotonic() - start:.1f}s: {exc}") from None
    return "no error"


def test_a_killed_rank_gives_the_others_an_error_not_a_hang():
    start = time.monotonic()
    with pytest.raises(dd.comm.LaunchError) as info:
        dd.launch(_kill_rank1_midway, 2, timeout=60, comm_timeout=20, grace=20)
    failures = dict(info.value.failures)
    assert info.value.rank == 1 and "killed by signal SIGKILL" in failures[1]
    assert "survivor saw an error" in failures[0], failures
    assert time.monotonic() - start < 40


def _sleep_forever():
    time.sleep(600)


def test_whole_run_timeout():
    start = time.monotonic()
    with pytest.raises(TimeoutError, match=r"rank\(s\) \[0, 1\] did not finish within 3 s"):
        dd.launch(_sleep_forever, 2, timeout=3)
    assert time.monotonic() - start < 30


def _unpicklable_result():
    return lambda: 0


def test_unpicklable_return_value(run_ranks):
    with pytest.raises(dd.comm.LaunchError, match="cannot be pickled"):
        run_ranks(_unpicklable_result, 2)
