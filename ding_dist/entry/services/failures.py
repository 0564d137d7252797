"""What a run does when something fails: SIGTERM, a failed collective, a dead or stuck peer.

A collective that fails because a peer died or hung is diagnosed with a health check and re-raised as
``DeadRankError`` naming the missing rank(s) when it can tell (:func:`diagnose`); SIGTERM becomes
``SystemExit(143)`` so envs and writers close (:func:`sigterm_exits`); :func:`guarded` is the one context every
training loop runs in (the diagnosis, a line saying where it stopped, and the loop's cleanup). See
docs/reliability.md.

Example::

    with sigterm_exits(), guarded(rank=0, world=2, health_timeout=60.0, where=lambda: "env step 512",
                                  newest=lambda: None, close=lambda: None):
        train_loop()
"""

from __future__ import annotations

import logging
import re
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ding_dist.comm import CollectiveMismatchError, DeadRankError, DesyncError, check_consistency, health_check
from ding_dist.comm.callers import raised_in_comm
from ding_dist.entry.services.metrics import weight_averaging_models
from ding_dist.envs import close_vec_env
from ding_dist.utils import shown_path

__all__ = [
    "DEBUG_CHECK_EVERY",
    "EXIT_SIGTERM",
    "PEER_FAILURE",
    "close_workers",
    "consistency_check",
    "diagnose",
    "guarded",
    "sigterm_exits",
]

logger = logging.getLogger(__name__)

#: In debug mode, the trained networks are compared across ranks every this many train iterations
#: (and at each checkpoint); a difference raises ``DesyncError`` naming the first differing tensor.
DEBUG_CHECK_EVERY = 100
EXIT_SIGTERM = 128 + signal.SIGTERM  # 143, the shell's code for "terminated by SIGTERM"

# Error text of a collective that failed because a peer went away or stopped answering (gloo, nccl).
PEER_FAILURE = re.compile(
    r"Connection (reset|closed|refused)|Broken pipe|[Tt]imed out|timeout|Socket|gloo|NCCL|DistBackendError"
)


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


@contextmanager
def guarded(
    *,
    rank: int,
    world: int,
    health_timeout: float,
    where: Callable[[], str],
    newest: Callable[[], Path | None],
    close: Callable[[], None],
    group: Any = None,
) -> Iterator[None]:
    """The context a training loop runs in: a failed collective is re-raised as the clearer error of
    :func:`diagnose` (``world`` ranks of ``group``); SIGTERM (``SystemExit(143)``) or Ctrl-C logs ``where()`` it
    stopped and the ``newest()`` checkpoint; ``close()`` runs whatever happened.

    Example::

        with guarded(rank=r, world=n, health_timeout=60.0, where=lambda: f"env step {c.env_steps}",
                     newest=ckpt.newest, close=run.close):
            ...  # the loop
    """
    try:
        yield
    except Exception as exc:
        clearer = diagnose(exc, rank=rank, world=world, where=where(), health_timeout=health_timeout, group=group)
        if clearer is None:
            raise
        raise clearer from exc
    except BaseException as exc:  # SIGTERM (SystemExit) or Ctrl-C: log where it stopped
        why = "SIGTERM" if isinstance(exc, SystemExit) and exc.code == EXIT_SIGTERM else type(exc).__name__
        logger.warning("stopping at %s (%s); newest checkpoint: %s", where(), why, shown_path(newest()))
        raise
    finally:
        close()


def close_workers(*venvs: Any) -> None:
    """Close each vector env given (None: skipped) with a bounded wait, whatever the others do: after a failure,
    no env worker process outlives the run. An env whose processes already exited (e.g. SIGTERM to the process
    group) is noted at INFO; other errors are warnings.

    Example::

        close_workers(collector.venv, evaluator.venv)
    """
    for venv in venvs:
        if venv is None:
            continue
        try:
            close_vec_env(venv)
        except OSError as e:
            logger.info("closing envs: %s (their processes had exited)", e)
        except Exception as e:  # keep closing the rest
            logger.warning("closing envs failed: %s", e)


def consistency_check(policy: Any, group: Any = None) -> None:
    """Raise ``DesyncError`` naming the first tensor of the policy's networks that differs across the ranks of
    ``group`` (the debug mode's check). Skipped while a weight-averaging algorithm (decentralized, async, local
    SGD) trains a network: there ranks differ between averagings by design, and the logs report the drift
    (``sync/weight_drift``); evaluation and checkpoints then use rank 0's weights.

    Example::

        consistency_check(policy)  # every rank of the world, at the same train iteration
    """
    if weight_averaging_models(policy):
        return
    check_consistency({k: t.detach() for k, t in policy.named_weights().items()}, group=group)
