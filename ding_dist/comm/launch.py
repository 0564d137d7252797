"""``launch``: run a function on N local processes with a real process group, for trying multi-rank code.

Each process is a fresh interpreter (forkserver on Linux, spawn elsewhere) that joins a gloo (or nccl)
group on a free localhost port, runs ``fn(*args)`` and sends its return value back. Every rank beats a
heartbeat into a store this launcher serves, so a frozen rank (e.g. SIGSTOP) is killed and named within
the heartbeat grace. For real jobs use torchrun or SLURM; this is the laptop-sized launcher for tests and
experiments.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import queue as queue_module
import signal
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .heartbeat import HeartbeatMonitor, start_heartbeat
from .init import dist_finalize, dist_init
from .settings import check_env_values, free_port, resolve_heartbeat


class LaunchError(RuntimeError):
    """A rank of ``launch`` failed. ``rank`` is the first rank that failed, ``exception`` its exception
    (when it could travel back), ``failures`` every rank's failure in the order they were seen."""

    def __init__(self, message: str, rank: int, exception: BaseException | None, failures: list[tuple[int, str]]):
        super().__init__(message)
        self.rank, self.exception, self.failures = rank, exception, failures


_STOPPED = "was stopped after another rank failed"


@dataclass
class _Failure:
    rank: int
    summary: str
    detail: str
    exception: BaseException | None


def _worker(
    fn: Callable,
    args: tuple,
    rank: int,
    nproc: int,
    port: int,
    backend: str,
    comm_timeout: float | None,
    results: Any,
    heartbeat: tuple[str, float, float] | None = None,
) -> None:
    if "OMP_NUM_THREADS" not in os.environ:  # as torchrun does: one thread per process unless told otherwise
        import torch

        torch.set_num_threads(1)
    try:
        dist_init(backend=backend, addr="127.0.0.1", port=port, rank=rank, world_size=nproc, timeout=comm_timeout)
        if heartbeat is not None:  # into the launcher's store; dist_finalize stops it
            address, period, grace = heartbeat
            start_heartbeat(period, grace, store=address)
        value = fn(*args)
        try:
            payload = pickle.dumps(value)
        except Exception as exc:
            raise TypeError(f"the return value of type {type(value).__name__} cannot be pickled: {exc}") from exc
        results.put((rank, True, payload))
    except BaseException as exc:
        try:
            exc_bytes = pickle.dumps(exc)
        except Exception:
            exc_bytes = None
        results.put((rank, False, (f"{type(exc).__name__}: {exc}", traceback.format_exc(), exc_bytes)))
    finally:
        dist_finalize()


def _describe_exit(code: int, monitor: HeartbeatMonitor | None = None, rank: int = -1) -> str:
    if monitor is not None and rank in monitor.stale:  # killed by the heartbeat watch
        return monitor.stale[rank].removeprefix(f"rank {rank} of {monitor.nproc} ") + "; killed with SIGKILL"
    if code < 0:
        try:
            return f"was killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code} without reporting a result"


def launch(
    fn: Callable[..., Any],
    nproc: int,
    *args: Any,
    backend: str = "gloo",
    timeout: float | None = None,
    comm_timeout: float | None = None,
    grace: float = 10.0,
    heartbeat: bool = True,
) -> list[Any]:
    """Run ``fn(*args)`` on ``nproc`` local processes in one process group; return the per-rank results.

    ``fn`` must be a module-level (picklable) function. An exception in any rank is re-raised here as a
    ``LaunchError`` naming the rank (the first to fail); the other ranks get ``grace`` seconds to report
    their own errors, then are stopped. ``timeout`` bounds the whole run, ``comm_timeout`` each
    collective (default ``$DING_DIST_TIMEOUT`` or 30 min). Without ``OMP_NUM_THREADS`` each rank uses
    one torch thread, as under torchrun. With ``heartbeat`` (and ``$DING_DIST_HEARTBEAT_S`` not 0) a rank
    whose heartbeat stops for ``$DING_DIST_HEARTBEAT_GRACE_S`` (default 10 s) is SIGKILLed and reported as
    the failed rank; ``heartbeat=False`` leaves watching to the ranks (``start_heartbeat``).

    Example:
        >>> from ding_dist import launch, get_rank                 # doctest: +SKIP
        >>> def square_rank():                                     # doctest: +SKIP
        ...     return get_rank() ** 2
        >>> launch(square_rank, 3)                                 # doctest: +SKIP
        [0, 1, 4]
    """
    if isinstance(nproc, bool) or not isinstance(nproc, int) or nproc < 1:
        raise ValueError(f"nproc must be a positive int, got {nproc!r}")
    if not callable(fn):
        raise TypeError(f"launch expects a callable, got {fn!r}")
    try:
        pickle.dumps(fn)
    except Exception as exc:
        raise TypeError(f"launch needs a module-level (picklable) function, got {fn!r}: {exc}") from None
    if timeout is not None and not timeout > 0:
        raise ValueError(f"timeout must be positive seconds or None, got {timeout}")
    check_env_values()  # a bad DING_DIST_* variable is one line here, not one error per rank
    period, beat_grace = resolve_heartbeat() if heartbeat else (0.0, 0.0)

    if sys.platform.startswith("linux"):
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(["torch", "ding_dist"])
    else:
        ctx = mp.get_context("spawn")
    results = ctx.Queue()
    port = free_port()
    procs: list[Any] = []

    def kill_frozen(rank: int, pid: int, message: str) -> None:
        if procs[rank].pid == pid and procs[rank].is_alive():
            procs[rank].kill()

    monitor = HeartbeatMonitor(nproc, period, beat_grace, on_stale=kill_frozen) if period > 0 else None
    beat = (monitor.address, period, beat_grace) if monitor is not None else None
    procs += [
        ctx.Process(
            target=_worker,
            args=(fn, args, rank, nproc, port, backend, comm_timeout, results, beat),
            name=f"ding_dist-rank{rank}",
        )
        for rank in range(nproc)
    ]
    for proc in procs:
        proc.start()

    values: dict[int, Any] = {}
    failures: list[_Failure] = []
    exited_at: dict[int, float] = {}
    start = time.monotonic()
    stop_at: float | None = None
    try:
        while len(values) + len(failures) < nproc:
            try:
                rank, ok, payload = results.get(timeout=0.05)
                if ok:
                    values[rank] = pickle.loads(payload)
                else:
                    summary, detail, exc_bytes = payload
                    exception = pickle.loads(exc_bytes) if exc_bytes is not None else None
                    failures.append(_Failure(rank, f"raised {summary}", detail, exception))
            except queue_module.Empty:
                pass
            now = time.monotonic()
            if monitor is not None:
                monitor.poll(now)
            reported = set(values) | {f.rank for f in failures}
            for rank, proc in enumerate(procs):
                if rank in reported or proc.exitcode is None:
                    continue
                exited_at.setdefault(rank, now)
                if now - exited_at[rank] > 1.0:  # its message would have arrived by now
                    failures.append(_Failure(rank, _describe_exit(proc.exitcode, monitor, rank), "", None))
            if failures and stop_at is None:
                stop_at = now + grace
            if stop_at is not None and now > stop_at:
                for rank in range(nproc):
                    if rank not in reported and all(f.rank != rank for f in failures):
                        failures.append(_Failure(rank, _STOPPED, "", None))
                break
            if timeout is not None and now - start > timeout:
                pending = [r for r in range(nproc) if r not in reported]
                raise TimeoutError(f"launch: rank(s) {pending} did not finish within {timeout:g} s")
    finally:
        if monitor is not None:
            monitor.stop()
        for proc in procs:
            if proc.is_alive():
                proc.terminate()
        for proc in procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
                proc.join()
        results.close()

    if failures:
        # A rank that died without a word (killed, crashed) is the likely cause of its peers' errors.
        failures.sort(key=lambda f: 0 if f.detail == "" and f.summary != _STOPPED else 1)
        first = failures[0]
        lines = [f"rank {first.rank} {first.summary}"]
        lines += [f"then rank {f.rank} {f.summary}" for f in failures[1:]]
        if first.detail:
            lines.append(f"traceback of rank {first.rank}:\n{first.detail}")
        raise LaunchError("\n".join(lines), first.rank, first.exception, [(f.rank, f.summary) for f in failures])
    return [values[rank] for rank in range(nproc)]
