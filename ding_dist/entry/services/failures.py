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

import torch

from ding_dist.comm import (
    CollectiveMismatchError,
    DeadRankError,
    DesyncError,
    allreduce,
    check_consistency,
    health_check,
    side_group,
)
from ding_dist.comm.callers import raised_in_comm
from ding_dist.entry.services.metrics import weight_averaging_models
from ding_dist.envs import close_vec_env
from ding_dist.utils import shown_path

__all__ = [
    "DEBUG_CHECK_EVERY",
    "EXIT_SIGTERM",
    "PEER_FAILURE",
    "PREEMPT_GRACE_S",
    "Preemption",
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


#: Seconds a preempted run has, from the first SIGTERM/SIGUSR1, to stop with its checkpoint (torchrun's agent
#: SIGKILLs its workers 30 s after its SIGTERM); past that, or at a second signal, it exits at once.
PREEMPT_GRACE_S = 25.0
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR1)


class Preemption:
    """SIGTERM or SIGUSR1 (what SLURM's ``--signal=USR1@90`` sends before a time limit, and Kubernetes before an
    eviction) as a request to stop at the end of an iteration, with a checkpoint of that step.

    Inside the context the signals only set a flag. :meth:`requested` is called once per iteration on every rank
    that learns: the ranks agree through a pipelined max-allreduce of one flag on the side group (gloo, host
    memory: it never waits for a device), so they all stop after the same iteration, one iteration after the first
    rank saw a signal. A second signal, or ``grace_s`` seconds without stopping, exits at once
    (``SystemExit(143)``), as without this context. Outside the main thread it does nothing.

    Example::

        with Preemption(world=2) as preempted:
            while training:
                ...
                if preempted.requested():
                    break    # then checkpoint; preempted.signal_name says which signal
    """

    def __init__(self, group: Any = None, world: int = 1, grace_s: float = PREEMPT_GRACE_S) -> None:
        self.group, self.world, self.grace_s = group, world, float(grace_s)
        self.signal_name: str | None = None  # the first signal received
        self._flag = torch.zeros(1)
        self._pending: Any = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> Preemption:
        if threading.current_thread() is threading.main_thread():
            for sig in _STOP_SIGNALS:
                self._previous[sig] = signal.signal(sig, self._on_signal)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._previous:
            signal.setitimer(signal.ITIMER_REAL, 0)
            for sig, handler in self._previous.items():
                signal.signal(sig, handler)
            self._previous = {}
        if self._pending is not None:
            try:
                self._pending.wait()  # an exchange still in flight: every rank posted it, so it completes
            except Exception:  # a peer is gone: nothing to agree on any more
                pass
            self._pending = None

    def _on_signal(self, signum: int, frame: Any) -> None:
        if self.signal_name is not None:
            raise SystemExit(EXIT_SIGTERM)
        self.signal_name = signal.Signals(signum).name
        logger.warning("%s: stopping after this iteration with a checkpoint (a second signal stops at once)",
                       self.signal_name)  # fmt: skip
        signal.signal(signal.SIGALRM, self._on_timeout)
        signal.setitimer(signal.ITIMER_REAL, self.grace_s)

    def _on_timeout(self, signum: int, frame: Any) -> None:
        logger.warning("no checkpoint within %g s of %s: stopping at once", self.grace_s, self.signal_name)
        raise SystemExit(EXIT_SIGTERM)

    def requested(self) -> bool:
        """True when every rank stops now (call it once per iteration, on every rank, at the same point)."""
        if self.world == 1:
            return self.signal_name is not None
        agreed = False
        if self._pending is not None:  # the previous iteration's exchange: posted one iteration ago
            self._pending.wait()
            agreed = bool(self._flag[0] > 0)
            self._pending = None
        if not agreed:
            self._flag[0] = float(self.signal_name is not None)
            self._pending = allreduce(self._flag, op="max", group=side_group(self.group), async_op=True)
        return agreed
