"""Debug mode (mismatched collectives), desync detection and the dead-rank health check."""

import os
import signal
import time

import pytest
import torch

import ding_dist as dd


def _mismatched():
    dd.comm.set_debug(True)
    t = torch.ones(4)
    dd.allreduce(t)  # matched: passes the check
    if dd.get_rank() == 0:
        dd.allreduce(t)
    else:
        dd.broadcast(torch.ones(3), src=0)


def test_mismatched_collective_names_both_call_sites(run_ranks):
    with pytest.raises(dd.comm.LaunchError) as info:
        run_ranks(_mismatched, 2)
    message = str(info.value)
    assert "CollectiveMismatchError" in message
    assert "rank 0: allreduce(shape=(4,), float32, op=SUM) at tests/comm/test_debug.py:" in message
    assert "rank 1: broadcast(shape=(3,), float32, src=0) at tests/comm/test_debug.py:" in message
    assert "in _mismatched" in message


def _same_op_different_shapes():
    dd.comm.set_debug(True)
    dd.allreduce(torch.ones(2 + dd.get_rank()))


def test_shape_mismatch_is_caught(run_ranks):
    with pytest.raises(dd.comm.LaunchError, match=r"shape=\(2,\).*\n.*shape=\(3,\)"):
        run_ranks(_same_op_different_shapes, 2)


def test_debug_switch_on_the_fake_link():
    assert not dd.comm.debug_enabled()
    dd.comm.set_debug(True)
    try:
        assert dd.comm.debug_enabled()
        t = torch.ones(2)
        dd.allreduce(t)  # fake link: nothing to compare with
        assert t.tolist() == [1.0, 1.0]
    finally:
        dd.comm.set_debug(False)


def _desync(drift_rank):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
    dd.comm.check_consistency(model)  # identical: passes
    if dd.get_rank() == drift_rank:
        with torch.no_grad():
            model[1].bias[0] += 1e-7
    try:
        dd.comm.check_consistency(model)
    except dd.comm.DesyncError as exc:
        return str(exc)
    return "in sync"


def test_check_consistency_names_the_first_differing_parameter(run_ranks):
    for message in run_ranks(_desync, 3, 2):
        assert "out of sync at '1.bias'" in message and "rank 2" in message


def test_check_consistency_bad_input():
    with pytest.raises(TypeError, match="got int"):
        dd.comm.check_consistency(3)
    dd.comm.check_consistency(torch.nn.Linear(2, 2))  # fake link: fine


def _health_with_dead_rank():
    dd.comm.health_check(timeout=10)  # everyone alive
    if dd.get_rank() == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    start = time.monotonic()
    try:
        dd.comm.health_check(timeout=3)
    except dd.comm.DeadRankError as exc:
        raise RuntimeError(f"after {time.monotonic() - start:.1f}s: ranks {exc.ranks}: {exc}") from None
    return "no error"


def test_health_check_names_the_dead_rank():
    with pytest.raises(dd.comm.LaunchError) as info:
        dd.launch(_health_with_dead_rank, 3, timeout=60, comm_timeout=20, grace=15)
    failures = dict(info.value.failures)
    assert sorted(failures) == [0, 1, 2], failures
    assert "SIGKILL" in failures[1]
    assert "ranks [1]" in failures[0], failures
    # Rank 2 cannot know which rank died: it names no rank (not rank 0, which is alive) and points at rank 0's error.
    assert failures[2].startswith("raised RuntimeError: after "), failures
    assert "ranks []" in failures[2] and "rank 0's error names it" in failures[2], failures
    assert "rank(s) [0]" not in failures[2], failures
