"""The launcher side of the liveness heartbeat: a launcher of local ranks serves the store they beat into and
SIGKILLs a rank whose beat stopped (see the package's docstring).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import torch.distributed as dist

from ..processes import pid_alive
from ..settings import HEARTBEAT_ENV, HEARTBEAT_GRACE_ENV, resolve_heartbeat
from .beats import STARTUP_GRACE_ENV, STORE_ENV, beat_key, frozen_message, startup_grace

__all__ = ["HeartbeatMonitor", "watch_heartbeats"]

logger = logging.getLogger(__name__)


def _kill_rank(rank: int, pid: int, message: str, prefix: str) -> None:
    """Print ``message`` and SIGKILL ``pid`` (with its process group when it leads one, e.g. under torchrun)."""
    # On a line of its own: a rank's progress bar may hold the terminal's current line.
    sys.stderr.write(f"\n{prefix}: {message}; killing it (pid {pid}) with SIGKILL\n")
    sys.stderr.flush()
    try:
        if hasattr(os, "killpg") and os.getpgid(pid) == pid:
            os.killpg(pid, signal.SIGKILL)  # its async env workers too
        else:
            os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


class HeartbeatMonitor:
    """A launcher's watch over ``nproc`` ranks: serves the store they beat into and acts on a silent rank.

    ``env()`` holds the variables the ranks need (the store's address and the same period and graces). A rank whose
    beat says it is still starting is judged with :attr:`startup_grace` (:func:`startup_grace` of ``nproc``).
    ``poll()`` reads every rank's counter (rate-limited to twice a period, at most once a second) and calls
    ``on_stale(rank, pid, message)`` once for each rank on this host whose counter has not moved for
    ``grace`` seconds; by default it prints the message and SIGKILLs the rank. A rank counts from its first
    beat; a rank that stopped its heartbeat cleanly or whose process is gone is not judged. ``start()``
    polls in a daemon thread; ``stop()`` ends it and closes the store. ``stale`` maps rank -> message.

    Example:
        >>> with HeartbeatMonitor(2, period=1, grace=5) as monitor:   # doctest: +SKIP
        ...     os.environ.update(monitor.env())   # then start the ranks
    """

    def __init__(
        self,
        nproc: int,
        period: float | None = None,
        grace: float | None = None,
        *,
        on_stale: Callable[[int, int, str], None] | None = None,
        prefix: str = "ding_dist",
        host: str = "127.0.0.1",
    ) -> None:
        self.nproc = nproc
        self.period, self.grace = resolve_heartbeat(period, grace)
        if self.period == 0:
            raise ValueError(f"HeartbeatMonitor needs a heartbeat period > 0 ({HEARTBEAT_ENV}=0 turns it off)")
        self.startup_grace = startup_grace(self.grace, nproc)  # for ranks whose beat says they are still starting
        self.interval = min(self.period / 2, 1.0)
        self._on_stale = on_stale or (lambda rank, pid, message: _kill_rank(rank, pid, message, prefix))
        self._store = dist.TCPStore(host, 0, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=30))
        self.address = f"{host}:{self._store.port}"
        self._host = socket.gethostname()
        self._seen: dict[int, tuple[int, int, float]] = {}  # rank -> (pid, counter, when it last changed)
        self.stale: dict[int, str] = {}
        self.killed: dict[int, tuple[int, float]] = {}  # rank -> (pid, time.time()) of each rank found silent
        self._judged: set[int] = set()  # pids already acted on
        self._last_poll = -float("inf")
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def env(self) -> dict[str, str]:
        """Variables for the ranks: the store's address, the period, the grace and the start-up grace."""
        return {
            STORE_ENV: self.address,
            HEARTBEAT_ENV: repr(self.period),
            HEARTBEAT_GRACE_ENV: repr(self.grace),
            STARTUP_GRACE_ENV: repr(self.startup_grace),
        }

    def poll(self, now: float | None = None) -> list[int]:
        """Judge every rank once (when due); return the ranks newly found silent."""
        now = time.monotonic() if now is None else now
        if now - self._last_poll < self.interval:
            return []
        self._last_poll = now
        found = []
        for rank in range(self.nproc):
            key = beat_key(rank)
            if not self._store.check([key]):
                continue
            beat = json.loads(self._store.get(key))
            pid, seq = beat["pid"], beat["seq"]
            last = self._seen.get(rank)
            if last is None or last[:2] != (pid, seq):  # a new beat, or a new process (a restart)
                self._seen[rank] = (pid, seq, now)
                continue
            silent_s = now - last[2]
            grace = self.startup_grace if beat.get("phase") == "starting" else self.grace
            if beat["state"] != "alive" or silent_s <= grace or pid in self._judged:
                continue
            if beat["host"] != self._host or not pid_alive(pid):
                continue  # another host's, or gone: the launcher sees it exit
            self._judged.add(pid)
            self.stale[rank] = frozen_message(rank, self.nproc, silent_s, grace, beat.get("phase") == "starting")
            found.append(rank)
            self.killed[rank] = (pid, time.time())
            self._on_stale(rank, pid, self.stale[rank])
        return found

    def silent_deaths(self) -> dict[int, int]:
        """Ranks of this host whose process is gone while their last beat still says alive (rank -> pid): they
        died without reporting, by a signal (SIGKILL, a crash); a rank that ends any other way says stopped.

        Example:
            >>> monitor.silent_deaths()  # doctest: +SKIP
            {1: 4242}
        """
        found = {}
        for rank in range(self.nproc):
            key = beat_key(rank)
            if self._store is None or not self._store.check([key]):
                continue
            beat = json.loads(self._store.get(key))
            if beat["state"] == "alive" and beat["host"] == self._host and not pid_alive(beat["pid"]):
                found[rank] = beat["pid"]
        return found

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.poll()
            except Exception as exc:  # never let the watch crash the launcher
                logger.warning("heartbeat monitor: %s", exc)

    def start(self) -> HeartbeatMonitor:
        self._thread = threading.Thread(target=self._loop, name="ding_dist-heartbeat-monitor", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        self._store = None  # closes the server

    def __enter__(self) -> HeartbeatMonitor:
        return self.start()

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()


class _WatchedLaunch:
    """``watch_heartbeats``'s context: a started monitor and its variables in ``os.environ``."""

    def __init__(self, monitor: HeartbeatMonitor) -> None:
        self.monitor = monitor
        self._saved: dict[str, str | None] = {}

    def __enter__(self) -> HeartbeatMonitor:
        values = self.monitor.env()
        self._saved = {name: os.environ.get(name) for name in values}
        os.environ.update(values)
        return self.monitor.start()

    def __exit__(self, *exc_info: Any) -> None:
        self.monitor.stop()
        for name, old in self._saved.items():
            if old is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = old


def watch_heartbeats(
    nproc: int, period: float | None = None, grace: float | None = None, *, prefix: str = "ding_dist"
) -> contextlib.AbstractContextManager[HeartbeatMonitor | None]:
    """For a launcher that starts ``nproc`` local ranks (which inherit ``os.environ``): a context that serves
    and watches their heartbeats, SIGKILLing a rank that went silent. Settings are checked here (a
    ``ValueError`` before anything starts); a period of 0 gives a context that does nothing.

    Example:
        >>> with watch_heartbeats(2, prefix="ding-dist") as monitor:   # doctest: +SKIP
        ...     torchrun(launcher_args)
    """
    period_s, grace_s = resolve_heartbeat(period, grace)
    if period_s == 0:
        return contextlib.nullcontext()
    return _WatchedLaunch(HeartbeatMonitor(nproc, period_s, grace_s, prefix=prefix))
