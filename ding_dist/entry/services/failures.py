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
import time
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
    "SAME_STOP_S",
    "STOP_CODES",
    "close_workers",
    "consistency_check",
    "diagnose",
    "guarded",
    "sigterm_exits",
    "stop_name",
]

logger = logging.getLogger(__name__)

#: In debug mode, the trained networks are compared across ranks every this many train iterations
#: (and at each checkpoint); a difference raises ``DesyncError`` naming the first differing tensor.
DEBUG_CHECK_EVERY = 100
EXIT_SIGTERM = 128 + signal.SIGTERM  # 143, the shell's code for "terminated by SIGTERM"
#: The stop signals and their exit codes: 128 + the signal, the shell's convention (130, 138, 143).
STOP_CODES = {"SIGINT": 128 + signal.SIGINT, "SIGUSR1": 128 + signal.SIGUSR1, "SIGTERM": 128 + signal.SIGTERM}

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


def stop_name(exc: BaseException) -> str | None:
    """The stop signal a ``SystemExit`` of :func:`sigterm_exits` or :class:`Preemption` stands for (``"SIGTERM"``),
    ``"SIGINT"`` for Ctrl-C's ``KeyboardInterrupt``, else None.

    Example:
        >>> stop_name(SystemExit(143)), stop_name(KeyboardInterrupt()), stop_name(SystemExit(1))
        ('SIGTERM', 'SIGINT', None)
    """
    if isinstance(exc, KeyboardInterrupt):
        return "SIGINT"
    if isinstance(exc, SystemExit) and exc.code in STOP_CODES.values():
        return next(name for name, code in STOP_CODES.items() if code == exc.code)
    return None


class _Stops:
    """This process's stop signals, one rule for all of them (start-up, the training loop, the cleanup after it):
    the first stop signal starts a stop; a stop signal within :data:`SAME_STOP_S` of this process's first one is
    the same stop delivered again (a signal to the whole process group reaches a rank directly and once more through
    its launcher); so is the first signal of a rank that is already stopping on a peer's signal (its launcher then
    stops the job); any later one stops at once."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.first_at: float | None = None  # when this process got its first stop signal (monotonic)
        self.name: str | None = None  # the stop this process carries out: its own first signal, or a peer's
        self.stopping = False

    def receive(self, signum: int) -> str:
        """``"start"`` (a new stop), ``"same"`` (part of the stop under way) or ``"now"`` (stop at once)."""
        now, first = time.monotonic(), self.first_at
        if first is None:
            self.first_at = now
            if self.stopping:
                return "same"
            self.stopping, self.name = True, signal.Signals(signum).name
            return "start"
        return "same" if now - first < SAME_STOP_S else "now"

    def join(self, name: str) -> None:
        """This process stops on a peer's signal ``name`` (the ranks agreed)."""
        self.stopping, self.name = True, self.name or name

    def exit_code(self, signum: int) -> int:
        return STOP_CODES[self.name or signal.Signals(signum).name]


_STOPS = _Stops()


@contextmanager
def sigterm_exits() -> Iterator[None]:
    """While active, SIGTERM and SIGUSR1 raise ``SystemExit(128 + signal)`` in the main thread (143, 138) and
    SIGINT raises ``KeyboardInterrupt``, so ``finally`` blocks close envs, writers and the process group; the same
    stop delivered again (:class:`_Stops`: within :data:`SAME_STOP_S`, e.g. the launcher's forwarded copy of a signal
    to the whole process group) is ignored during that cleanup. :class:`Preemption` turns the signals into a
    checkpointed stop while the training loop runs. Leaves a handler someone else installed alone.

    Example::

        with sigterm_exits():
            run()   # SIGTERM: SystemExit(143) here, after the envs closed
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    defaults = {signal.SIGTERM: signal.SIG_DFL, signal.SIGUSR1: signal.SIG_DFL}
    defaults[signal.SIGINT] = signal.default_int_handler
    mine = [sig for sig, default in defaults.items() if signal.getsignal(sig) is default]
    if signal.SIGTERM not in mine:
        yield
        return

    def on_stop(signum: int, frame: Any) -> None:
        if _STOPS.receive(signum) == "same":
            return
        code = _STOPS.exit_code(signum)
        if code == STOP_CODES["SIGINT"]:
            raise KeyboardInterrupt
        raise SystemExit(code)

    _STOPS.reset()
    previous = {sig: signal.signal(sig, on_stop) for sig in mine}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


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
        why = stop_name(exc) or type(exc).__name__
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


#: Seconds a preempted run has, from the first stop signal, to stop with its checkpoint (torchrun's agent
#: SIGKILLs its workers 30 s after its SIGTERM); past that, or at a second signal, it exits at once.
PREEMPT_GRACE_S = 25.0
#: A stop signal that arrives this soon after the first is the same stop delivered again, not a second one: a
#: signal to the job's whole process group (SLURM, a terminal's Ctrl-C, a container stop) reaches a rank directly
#: and once more through its launcher, which forwards what it got (measured: 1-40 ms apart).
SAME_STOP_S = 2.0
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)


class Preemption:
    """SIGTERM, SIGINT (Ctrl-C) or SIGUSR1 (what SLURM's ``--signal=USR1@90`` sends before a time limit, and
    Kubernetes or a container stop sends before an eviction) as a request to stop at the end of an iteration, with a
    checkpoint of that step.

    Inside the context the signals only set a flag. :meth:`requested` is called once per iteration on every rank
    that learns: the ranks agree through a pipelined max-allreduce of the signal's number on the side group (gloo,
    host memory: it never waits for a device), so they all stop after the same iteration, one iteration after the
    first rank saw a signal; a rank that got none names a peer's (:attr:`signal_name`). The same stop delivered again
    within :data:`SAME_STOP_S` (the process group's copy and the launcher's forwarded one) counts once; a second
    signal after that, or ``grace_s`` seconds without stopping, exits at once (``SystemExit(128 + signal)``). Outside
    the main thread it does nothing.

    Example::

        with Preemption(world=2) as preempted:
            while training:
                ...
                if preempted.requested():
                    break    # then checkpoint; preempted.signal_name says which signal
    """

    def __init__(self, group: Any = None, world: int = 1, grace_s: float = PREEMPT_GRACE_S) -> None:
        self.group, self.world, self.grace_s = group, world, float(grace_s)
        self.signal_name: str | None = None  # the first signal received (or, once agreed, a peer's)
        self._flag = torch.zeros(1)
        self._pending: Any = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> Preemption:
        if threading.current_thread() is threading.main_thread():
            _STOPS.reset()  # the loop starts: no stop under way (one at start-up ended the run before it)
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
        name = signal.Signals(signum).name
        what = _STOPS.receive(signum)
        if what == "same":
            logger.info("%s: the stop under way (the same stop delivered again)", name)
            return
        if what == "now":
            logger.warning("%s again: stopping at once, without a checkpoint of this step", name)
            raise SystemExit(_STOPS.exit_code(signum))
        self.signal_name = name
        logger.warning("%s: stopping after this iteration with a checkpoint (a second signal, %g s or more later, "
                       "stops at once)", name, SAME_STOP_S)  # fmt: skip
        signal.signal(signal.SIGALRM, self._on_timeout)
        signal.setitimer(signal.ITIMER_REAL, self.grace_s)

    def _on_timeout(self, signum: int, frame: Any) -> None:
        logger.warning("no checkpoint within %g s of %s: stopping at once", self.grace_s, self.signal_name)
        raise SystemExit(STOP_CODES[self.signal_name or "SIGTERM"])

    def requested(self) -> bool:
        """True when every rank stops now (call it once per iteration, on every rank, at the same point)."""
        if self.world == 1:
            return self.signal_name is not None
        agreed = False
        if self._pending is not None:  # the previous iteration's exchange: posted one iteration ago
            self._pending.wait()
            agreed = bool(self._flag[0] > 0)
            if agreed and self.signal_name is None:  # a peer's stop: this rank's first signal is part of it
                self.signal_name = signal.Signals(int(self._flag[0])).name
                _STOPS.join(self.signal_name)
            self._pending = None
        if not agreed:
            self._flag[0] = float(signal.Signals[self.signal_name] if self.signal_name else 0)
            self._pending = allreduce(self._flag, op="max", group=side_group(self.group), async_op=True)
        return agreed
