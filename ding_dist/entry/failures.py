"""What a run does when something fails: SIGTERM, a failed collective, a dead or stuck peer.

A collective that fails because a peer died or hung is diagnosed with a health check and re-raised as
``DeadRankError`` naming the missing rank(s) when it can tell (:func:`diagnose`); SIGTERM becomes
``SystemExit(143)`` so envs and writers close (:func:`sigterm_exits`). See docs/reliability.md.

Example::

    with sigterm_exits():
        try:
            train_loop()
        except Exception as exc:
            clearer = diagnose(exc, rank=0, world=2, where="env step 512", health_timeout=60.0)
            raise (clearer or exc) from exc
"""

from __future__ import annotations

import re
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import ding_dist.comm
from ding_dist.comm import CollectiveMismatchError, DeadRankError, DesyncError, health_check

__all__ = ["DEFAULT_HEALTH_TIMEOUT_S", "EXIT_SIGTERM", "PEER_FAILURE", "diagnose", "sigterm_exits"]

#: Default bound (seconds) of the health checks before each evaluation and checkpoint.
DEFAULT_HEALTH_TIMEOUT_S = 60.0
EXIT_SIGTERM = 128 + signal.SIGTERM  # 143, the shell's code for "terminated by SIGTERM"

# Error text of a collective that failed because a peer went away or stopped answering (gloo, nccl).
PEER_FAILURE = re.compile(
    r"Connection (reset|closed|refused)|Broken pipe|[Tt]imed out|timeout|Socket|gloo|NCCL|DistBackendError"
)
_COMM_DIR = Path(ding_dist.comm.__file__).resolve().parent


def raised_in_comm(exc: BaseException) -> bool:
    """True when the exception passed through the collective layer (a collective failed, not local code)."""
    tb = exc.__traceback__
    while tb is not None:
        if Path(tb.tb_frame.f_code.co_filename).resolve().parent == _COMM_DIR:
            return True
        tb = tb.tb_next
    return False


def is_peer_failure(exc: BaseException) -> bool:
    """True for an error of the collective layer that says a peer went away or stopped answering."""
    return isinstance(exc, RuntimeError) and raised_in_comm(exc) and bool(PEER_FAILURE.search(str(exc)))


def first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message without torch's boilerplate (or its type name)."""
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__).split(" This is typically caused")[0]


@contextmanager
def sigterm_exits() -> Iterator[None]:
    """While active, SIGTERM raises ``SystemExit(143)`` in the main thread, so ``finally`` blocks close envs,
    writers and the process group; a second SIGTERM during that cleanup is ignored (launchers SIGKILL
    after their grace period). Leaves a handler someone else installed alone."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous is not signal.SIG_DFL:
        yield
        return

    def on_sigterm(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise SystemExit(EXIT_SIGTERM)

    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def diagnose(
    exc: BaseException, *, rank: int, world: int, where: str, health_timeout: float, group: Any = None
) -> Exception | None:
    """After a collective failed: the clearer error to raise instead (naming the missing rank when the
    health check of ``group`` can tell), or None when ``exc`` is not a failed collective."""
    if world == 1 or isinstance(exc, (DeadRankError, DesyncError, CollectiveMismatchError)):
        return None
    if not is_peer_failure(exc):
        return None  # a local error: the others wait for us, a health check would blame them
    first = first_line(exc)
    where = f"rank {rank} of {world}: a collective failed at {where}"
    try:
        health_check(health_timeout, group=group)
    except DeadRankError as dead:
        if dead.ranks:
            return DeadRankError(f"{where}; rank(s) {dead.ranks} are dead or stuck ({first})", dead.ranks)
    except RuntimeError:
        pass
    else:
        return RuntimeError(
            f"{where} ({first}), yet every rank answered a health check afterwards: none died, so the ranks "
            "most likely called different collectives; rerun with --debug (DING_DIST_DEBUG=1) to see where"
        )
    return DeadRankError(
        f"{where} because a peer rank closed its connection or stopped answering (it died or was stopped; "
        f"the launcher's summary names it): {first}",
        [],
    )
