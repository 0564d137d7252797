"""``ding-dist train --nproc N``: N local ranks started by torch's launcher, and the summary when one fails.

``--nproc N`` with N > 1 (or ``--max-restarts K`` with K > 0) hands the job to ``torch.distributed.run``
(torchrun, ``--standalone``), which starts N copies of ``ding-dist train`` without ``--nproc``: forked from
this process with a CPU-only torch, else fresh interpreters (``python -m ding_dist.entry.cli``). A heartbeat
watch SIGKILLs a frozen rank. When a rank fails, the job ends with one line per failed rank, the rank that
failed first last: how (exit code or signal) and its error's first line. SIGINT, SIGTERM or SIGUSR1, to this
process or to any rank, stop every rank at a checkpointed step and end with 128 + the signal (130, 143, 138),
never restarted (:mod:`ding_dist.entry.cli.agent`).

Example:
    >>> from ding_dist.entry.cli.local_launch import launch_local
    >>> from ding_dist.entry.cli import main
    >>> launch_local(2, 0, ["train", "configs/cartpole_ppo_config.py"], main)  # doctest: +SKIP
    0
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ding_dist.entry.cli.errors import EXIT_SIGTERM, EXIT_USAGE, PROG, UsageError

__all__ = ["FORK_MAX_PER_CORE", "launch_local", "RANK_MODULE", "START_METHOD_ENV", "start_method"]

START_METHOD_ENV = "DING_DIST_START_METHOD"
#: Local ranks per CPU core up to which they are forked. Above it they start as fresh interpreters: forked from a
#: launcher whose threads (torch's store daemons, the heartbeat watch) serve the ranks already started, a rank can
#: inherit a lock held at that instant and hang before its first beat (measured: 64 forked ranks on 2 cores, one
#: stuck in glibc's resolver lock, the other 63 waiting for it; started ones finish, in 258 s).
FORK_MAX_PER_CORE = 8
RANK_MODULE = "ding_dist.entry.cli"  # what a started (not forked) rank runs: python -m ding_dist.entry.cli
#: The signals torchrun's agent forwards to the ranks (its default, and SLURM's ``--signal=USR1@T`` warning).
SIGNALS_TO_HANDLE = "SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1"


def _failure_line(failure: Any) -> str:
    """First line of a rank's recorded error ('' when the rank left none, e.g. killed by a signal)."""
    message = failure.message
    if isinstance(message, dict):
        message = message.get("message", "")
    text = str(message or "").strip()
    if not text or text.startswith("To enable traceback"):  # torchrun's filler when there is no error file
        return ""
    return text.splitlines()[0]


def _is_consequence(failure: Any) -> bool:
    """True for a failure caused by another rank's: a lost peer, or a stop by the launcher."""
    from ding_dist.entry.services.failures import PEER_FAILURE

    text = _failure_line(failure)
    stopped = failure.exitcode in (-signal.SIGTERM, EXIT_SIGTERM)
    return stopped or text.startswith("DeadRankError") or bool(PEER_FAILURE.search(text))


@dataclass
class _KilledRank:
    """A rank the heartbeat watch SIGKILLed, as torchrun's ``ProcessFailure`` describes a failed rank."""

    pid: int
    timestamp: int
    signal_text: str = "SIGKILL"
    exitcode: int = -signal.SIGKILL
    message: str = ""

    def signal_name(self) -> str:
        return self.signal_text


def _with_killed(failures: dict[int, Any], monitor: Any) -> dict[int, Any]:
    """``failures`` plus the ranks the heartbeat watch killed and those that died by a signal without a word.
    Ranks forked by torchrun's agent are reported one failure per job (the first exit it sees), which can
    be a peer's consequence rather than the cause."""
    failures = dict(failures)
    if monitor is None:
        return failures
    latest = max((f.timestamp for f in failures.values()), default=0)
    for rank, (pid, when) in monitor.killed.items():
        if rank not in failures and abs(latest - when) < 60:  # this generation's kill, not an earlier restart's
            failures[rank] = _KilledRank(pid, int(when))
    for rank, pid in monitor.silent_deaths().items():
        if rank not in failures:
            failures[rank] = _KilledRank(pid, latest, signal_text="(unknown: it died without reporting)")
    return failures


def _report_failures(failures: dict[int, Any], nproc: int, max_restarts: int) -> int:
    """Print one line per failed rank, the root cause (the rank that failed first) last; return the exit code.

    Torchrun's timestamps have a resolution of one second, so a rank that failed *because* a peer died can
    carry the same (or an earlier) time as the peer; such consequences rank after real causes.
    """

    def how(failure: Any) -> str:
        return f"signal {failure.signal_name()}" if failure.exitcode < 0 else f"exit code {failure.exitcode}"

    first = min(failures, key=lambda r: (_is_consequence(failures[r]), failures[r].timestamp, r))
    for rank in sorted(failures):
        if rank != first:
            line = _failure_line(failures[rank]) or "its output is above"
            print(f"{PROG}: rank {rank} of {nproc} also failed with {how(failures[rank])}: {line}", file=sys.stderr)
    failure = failures[first]
    after = f" after {max_restarts} restart(s)" if max_restarts else ""
    line = _failure_line(failure) or (
        f"pid {failure.pid}; its output is above" if failure.pid else "its output is above"
    )
    print(f"{PROG}: error: rank {first} of {nproc} failed with {how(failure)}{after} (first failure): {line}",
          file=sys.stderr)  # fmt: skip
    return EXIT_USAGE if failure.exitcode == EXIT_USAGE else 1


class _AgentShutdownLines(logging.Filter):
    """Drops torchrun's agent's warnings about stopping the ranks on a signal (``Received 2 death signal,
    shutting down workers``, ``Closing process N via signal SIGINT``, ``Terminating process N via signal SIGTERM``)
    and its traceback of a rank that exited with a stop code (``failed (exitcode: 143)``: a stop, not a failure):
    the launcher says it once, in its own line. Other agent lines (restarts, failures) pass."""

    NOISE = ("death signal, shutting down workers", "via signal SIG", "failed (exitcode: 130)",
             "failed (exitcode: 138)", "failed (exitcode: 143)")  # fmt: skip

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(noise in message for noise in self.NOISE)


def _quiet_agent_shutdown() -> None:
    for name in ("torch.distributed.elastic.agent.server.api", "torch.distributed.elastic.multiprocessing.api",
                 "torch.multiprocessing.spawn"):  # fmt: skip
        log = logging.getLogger(name)
        if not any(isinstance(f, _AgentShutdownLines) for f in log.filters):
            log.addFilter(_AgentShutdownLines())


def launch_local(nproc: int, max_restarts: int, child_argv: list[str], entry: Callable[[list[str]], int]) -> int:
    """Start ``nproc`` local ranks of ``ding-dist train`` with torch's launcher (torchrun --standalone);
    a forked rank runs ``entry(child_argv)`` (the CLI's ``main``), a started one ``python -m`` :data:`RANK_MODULE`.

    A failed rank ends the job (all ranks stopped) with a summary, or with ``max_restarts`` left, a restart
    of all ranks. SIGTERM/SIGINT to this process stop every rank (torchrun's agent forwards the signal and
    SIGKILLs what is left after 30 s) and return 143/130.
    """
    # torch's launcher is the point here, so it is imported directly rather than through ding_dist.comm.
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import get_args_parser
    from torch.distributed.run import run as torchrun

    from ding_dist.comm.heartbeat import watch_heartbeats
    from ding_dist.entry.cli.agent import stop_aware_agent
    from ding_dist.entry.threads import cpu_cores

    method, why = _start_method(nproc, cpu_cores())
    fork = method == "fork"
    launcher_argv = ["--standalone", "--nnodes", "1", "--nproc-per-node", str(nproc), "--signals-to-handle",
                     SIGNALS_TO_HANDLE, "--max-restarts", str(max_restarts), "--module"]  # fmt: skip
    launcher_args = get_args_parser().parse_args([*launcher_argv, RANK_MODULE, *child_argv])
    try:  # the heartbeat watch: a frozen rank is SIGKILLed within the grace (docs/reliability.md)
        watch = watch_heartbeats(nproc, prefix=PROG)
    except ValueError as e:
        raise UsageError(str(e)) from None
    # torchrun would set this itself (with a banner); one thread per rank keeps N ranks from oversubscribing.
    if "OMP_NUM_THREADS" not in os.environ:  # an actor-learner role may still take its share (role_threads)
        os.environ["DING_DIST_OMP_DEFAULTED"] = "1"
    threads = os.environ.setdefault("OMP_NUM_THREADS", "1")
    restarts = f", up to {max_restarts} restart(s)" if max_restarts else ""
    how = method + (f": {why}" if why else "")
    print(
        f"{PROG}: starting {nproc} local process(es) with torch.distributed.run ({how}, OMP_NUM_THREADS={threads}"
        f"{restarts})",
        file=sys.stderr,
    )
    _quiet_agent_shutdown()
    # torchrun's agent replaces these handlers (main thread only); put ours back when it is done. It forwards the
    # signal it gets to every rank (SLURM's --signal=USR1@T warning too), which checkpoint their step and stop.
    stops = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1)
    saved = {sig: signal.getsignal(sig) for sig in stops}
    restore = threading.current_thread() is threading.main_thread()
    try:
        with watch as monitor, stop_aware_agent(local=True) as agents:
            try:
                if fork:
                    _launch_forked(launcher_args, child_argv, entry)
                else:
                    torchrun(launcher_args)
            except ChildFailedError as e:  # while the watch's store still holds the ranks' last beats
                return _report_failures(_with_killed(e.failures, monitor), nproc, max_restarts)
    except SignalException as e:
        print(f"{PROG}: stopped by {e.sigval.name}; all {nproc} rank(s) were stopped", file=sys.stderr)
        return 128 + int(e.sigval)
    finally:
        for sig, handler in saved.items():
            if restore and handler is not None:
                signal.signal(sig, handler)
    stopped = agents[-1].stopped if agents else {}
    if stopped:  # a stop signal reached rank(s) but not this launcher: they checkpointed it; a stop, not a failure
        code = min(stopped.values())
        name = signal.Signals(code - 128 if code > 0 else -code).name
        print(f"{PROG}: stopped by {name} to a rank; all {nproc} rank(s) were stopped", file=sys.stderr)
        return 128 + int(signal.Signals[name])
    return 0


def start_method(nproc: int, cores: int, asked: str = "", cuda_built: bool = False) -> tuple[str, str]:
    """How ``nproc`` local ranks on ``cores`` CPU cores start, and why when it is not the default: ``fork`` (of the
    launcher, whose torch and ding_dist imports they inherit: 2-3 s less per start on a small machine) with a
    CPU-only torch up to :data:`FORK_MAX_PER_CORE` ranks per core, else ``subprocess`` (fresh interpreters, as
    torchrun's ``--module``): a process that asked CUDA anything must not fork. ``asked`` (the value of
    ``DING_DIST_START_METHOD``) overrides.

    Example:
        >>> start_method(16, 2), start_method(64, 2)[0]
        (('fork', ''), 'subprocess')
    """
    if asked not in ("", "fork", "subprocess"):
        raise UsageError(f"{START_METHOD_ENV}={asked!r}: expected 'fork' or 'subprocess'")
    if asked:
        return asked, f"{START_METHOD_ENV}={asked}"
    if cuda_built:
        return "subprocess", ""
    if nproc > FORK_MAX_PER_CORE * max(1, cores):
        return "subprocess", f"more than {FORK_MAX_PER_CORE} per core are not forked"
    return "fork", ""


def _start_method(nproc: int, cores: int) -> tuple[str, str]:
    """:func:`start_method` with ``DING_DIST_START_METHOD`` and this torch's CUDA build."""
    from ding_dist.comm.settings import env_value  # the table of DING_DIST_* variables

    try:
        asked = env_value(START_METHOD_ENV) or ""
    except ValueError as e:  # checked before any work by ding-dist already; one line here too
        raise UsageError(str(e)) from None
    if asked:
        return start_method(nproc, cores, asked)
    import torch

    return start_method(nproc, cores, cuda_built=torch.backends.cuda.is_built())


def _launch_forked(launcher_args: argparse.Namespace, child_argv: list[str], entry: Callable[[list[str]], int]) -> None:
    """Torchrun's agent (standalone rendezvous, restarts, signals) with ``_forked_rank`` as the ranks'
    entry point, started by fork."""
    import uuid

    from torch.distributed.launcher.api import elastic_launch
    from torch.distributed.run import config_from_args

    launcher_args.rdzv_backend, launcher_args.rdzv_endpoint = "c10d", "localhost:0"  # what --standalone means
    launcher_args.rdzv_id = str(uuid.uuid4())
    launcher_args.start_method = "fork"
    config, _, _ = config_from_args(launcher_args)
    elastic_launch(config=config, entrypoint=_forked_rank)(entry, child_argv)


def _forked_rank(entry: Callable[[list[str]], int], argv: list[str]) -> None:
    """One rank forked by :func:`_launch_forked`: ``entry(argv)`` (torchrun's variables are in the environment);
    a non-zero code is the process's exit code, as for a started rank.

    The fork inherits the agent's Python handlers of SIGTERM and SIGINT, which can only run between bytecodes: a
    rank blocked in a C++ wait (a rendezvous whose peer died) would ignore the agent's SIGTERM until its SIGKILL
    30 s later. A started rank begins with Python's defaults (SIGTERM ends it, SIGINT raises KeyboardInterrupt); so
    does this one (SIGUSR1 too), and the run installs its own stop handlers.
    """
    import atexit

    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGUSR1, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        code = entry(argv)
    finally:
        atexit._run_exitfuncs()  # a forked process ends in os._exit: what the rank registered runs here
    if code:
        sys.exit(code)
