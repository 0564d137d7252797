"""The launcher's failure summary names the cause even when torchrun's agent reports only a consequence."""

from __future__ import annotations

from dataclasses import dataclass

from ding_dist.entry.cli import local_launch


@dataclass
class _Failure:  # the fields of torchrun's ProcessFailure the summary reads
    exitcode: int
    timestamp: int
    message: str
    pid: int = 11

    def signal_name(self) -> str:
        return "SIGTERM"


class _Monitor:
    def __init__(self, killed: dict, silent: dict) -> None:
        self.killed, self._silent = killed, silent

    def silent_deaths(self) -> dict:
        return self._silent


PEER_GONE = "DeadRankError: rank 0 of 2: a collective failed because a peer rank closed its connection"


def test_a_rank_that_died_silently_is_the_cause_not_its_peer(capsys):
    failures = local_launch._with_killed({0: _Failure(1, 1000, PEER_GONE)}, _Monitor({}, {1: 4242}))
    assert local_launch._report_failures(failures, 2, 0) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[-1] == (
        "ding-dist: error: rank 1 of 2 failed with signal (unknown: it died without reporting) (first failure): "
        "pid 4242; its output is above"
    )
    assert lines[0].startswith("ding-dist: rank 0 of 2 also failed with exit code 1: DeadRankError")


def test_a_rank_the_watch_killed_is_named_with_its_signal(capsys):
    failures = local_launch._with_killed({0: _Failure(1, 1000, PEER_GONE)}, _Monitor({1: (4242, 999.0)}, {}))
    local_launch._report_failures(failures, 2, 0)
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last == (
        "ding-dist: error: rank 1 of 2 failed with signal SIGKILL (first failure): pid 4242; its output is above"
    )


def test_a_kill_of_an_earlier_restart_is_not_added():
    failures = local_launch._with_killed({0: _Failure(1, 5000, "ValueError: bad")}, _Monitor({1: (4242, 1000.0)}, {}))
    assert sorted(failures) == [0]
