"""The rank side of the liveness heartbeat: each rank's beating thread and, when no launcher watches, its watch
over the other ranks (see the package's docstring).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import torch.distributed as dist

from ..debug import DeadRankError
from ..init import on_finalize
from ..link import current_link
from ..settings import env_value, resolve_heartbeat, running_settings
from .beats import KEY_PREFIX, STARTUP_GRACE_ENV, STORE_ENV, beat_key, frozen_message, startup_grace

__all__ = [
    "Heartbeat",
    "current_heartbeat",
    "heartbeat_running",
    "heartbeat_scope",
    "start_heartbeat",
    "stop_heartbeat",
]

logger = logging.getLogger(__name__)

#: Exit code of a rank that ends itself because a peer stopped beating (no launcher watches).
EXIT_FROZEN_PEER = 1
_AGENT_STORE_ENV = "TORCHELASTIC_USE_AGENT_STORE"  # torchrun: the workers share the agent's store
_RESTART_ENV = "TORCHELASTIC_RESTART_COUNT"


def _split_address(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"heartbeat store address must be 'host:port', got {address!r}")
    return host.strip("[]"), int(port)


def _startup_grace_from_env(grace: float, nproc: int) -> float:
    given = env_value(STARTUP_GRACE_ENV)  # set by a launcher for its ranks
    return startup_grace(grace, nproc) if given is None else max(given, grace)


class Heartbeat:
    """One rank's heartbeat thread and, with ``watch=True``, its watch over the other ranks.

    Made by :func:`start_heartbeat`; ``stop()`` (also run by ``dist_finalize``) ends both threads.
    ``beats`` counts the beats written.
    """

    def __init__(
        self,
        store: Any,
        rank: int,
        world_size: int,
        period: float,
        grace: float,
        *,
        watch: bool,
        store_rank: int | None = None,
        address: str = "",
    ) -> None:
        self.store, self.rank, self.world_size = store, rank, world_size
        self.period, self.grace, self.watch = period, grace, watch
        local = int(os.environ.get("LOCAL_WORLD_SIZE", "0") or 0) or world_size
        self.startup_grace = _startup_grace_from_env(grace, local)  # for peers still starting
        self.phase = "starting"  # "running" once the training loop begins (heartbeat_running)
        self.store_rank, self.address = store_rank, address  # the rank serving the store (None: a launcher)
        self.generation = int(os.environ.get(_RESTART_ENV, "0") or 0)
        self.beats = 0
        self._pid, self._host = os.getpid(), socket.gethostname()
        self._stop = threading.Event()
        self._seen: dict[int, tuple[int, float]] = {}  # peer -> (its counter, when it last changed)
        self._starting: set[int] = set()  # peers whose last beat said they are still starting
        self._busy_since: float | None = None  # when the store call in progress began
        self._failing = False  # the last store call failed at once: its server is gone, we know nothing
        self._threads: list[threading.Thread] = []

    @property
    def running(self) -> bool:
        return any(t.is_alive() for t in self._threads)

    def start(self) -> Heartbeat:
        self._threads = [threading.Thread(target=self._beat_loop, name="ding_dist-heartbeat", daemon=True)]
        if self.watch:
            self._threads.append(
                threading.Thread(target=self._watch_loop, name="ding_dist-heartbeat-watch", daemon=True)
            )
        for thread in self._threads:
            thread.start()
        return self

    def stop(self, timeout: float = 2.0) -> None:
        """End the threads (waits at most ``timeout`` s; they are daemons, so exit never hangs on them)."""
        self._stop.set()
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout)

    # --- the beating thread ------------------------------------------------------------------------
    def _value(self, state: str) -> str:
        return json.dumps(
            {
                "seq": self.beats,
                "pid": self._pid,
                "host": self._host,
                "state": state,
                "gen": self.generation,
                "phase": self.phase,
            }  # fmt: skip
        )

    def _beat_loop(self) -> None:
        key = beat_key(self.rank)
        while not self._stop.is_set():
            self._busy_since = time.monotonic()
            try:
                self.beats += 1
                self.store.set(key, self._value("alive"))
                if self.watch:
                    self._read_peers()
            except Exception as exc:  # the store's server is gone (e.g. its rank finished): the job is ending
                if not self._failing:
                    logger.debug("rank %d: heartbeat store error: %s", self.rank, exc)
                self._failing = True
            self._busy_since = None
            self._stop.wait(self.period)
        with contextlib.suppress(Exception):  # a clean stop: watchers must not take the silence for a freeze
            self.store.set(key, self._value("stopped"))

    def _read_peers(self) -> None:
        keys = [beat_key(r) for r in range(self.world_size) if r != self.rank]
        if self.store.check(keys):
            values = dict(zip(keys, self.store.multi_get(keys)))
        else:  # some peer has not beaten yet
            values = {k: self.store.get(k) for k in keys if self.store.check([k])}
        now = time.monotonic()
        if self._failing:  # the store is back: the time it was away does not count as silence
            self._seen = {peer: (seq, now) for peer, (seq, _) in self._seen.items()}
            self._failing = False
        for key, raw in values.items():
            peer, beat = int(key[len(KEY_PREFIX) :]), json.loads(raw)
            if beat.get("gen") != self.generation:
                continue  # left by an earlier generation of the job (before a restart)
            if beat.get("phase") == "starting":
                self._starting.add(peer)
            else:
                self._starting.discard(peer)
            if beat.get("state") != "alive":
                self._seen.pop(peer, None)
            elif peer not in self._seen or self._seen[peer][0] != beat["seq"]:
                self._seen[peer] = (beat["seq"], now)

    # --- the watching thread (no store calls: a frozen store host must not freeze the watch) ------
    def _watch_loop(self) -> None:
        while not self._stop.wait(min(self.period, 1.0)):
            found = self.silent_peers()
            if found is not None:
                self._end_rank(*found)
                return

    def silent_peers(self, now: float | None = None) -> tuple[str, list[int]] | None:
        """``(message, ranks)`` when a peer (or the store's host) has been silent for longer than the grace.

        A store call that hangs means its host is frozen (all its threads stop, the store's too): then only
        that rank is named, not every rank whose beats could no longer be read. A call that fails at once
        means the store's host is gone (it finished or died): nothing is judged until the store answers.
        """
        now = time.monotonic() if now is None else now
        busy = self._busy_since
        store_silent = 0.0 if busy is None else now - busy
        silent = sorted(r for r, (_, changed) in list(self._seen.items()) if now - changed > self._grace_of(r))
        host = self.store_rank
        if store_silent > self.grace or (silent and store_silent > 2 * self.period):
            if host is not None and host != self.rank:
                message = frozen_message(host, self.world_size, store_silent, self.grace)
                return f"{message} (the heartbeat store it serves at {self.address} stopped answering)", [host]
            if store_silent > self.grace:
                return f"the heartbeat store at {self.address} has not answered for {store_silent:.1f} s", []
        if not silent or self._failing:
            return None
        lines = [
            frozen_message(r, self.world_size, now - self._seen[r][1], self._grace_of(r), r in self._starting)
            for r in silent
        ]
        return "; ".join(lines), silent

    def _grace_of(self, peer: int) -> float:
        return self.startup_grace if peer in self._starting else self.grace

    def _end_rank(self, message: str, ranks: list[int]) -> None:
        """No launcher watches: end this rank, so the launcher ends the job (its main thread may be blocked in a
        collective that waits for the frozen peer, so nothing gentler would run)."""
        error = DeadRankError(f"{message}; rank {self.rank} ends itself (exit code 1) so that the job ends", ranks)
        sys.stderr.write(f"[rank {self.rank}] ding_dist: error: {type(error).__name__}: {error}\n")
        sys.stderr.flush()
        if os.environ.get("TORCHELASTIC_ERROR_FILE"):  # the summary of torchrun (and ding-dist) shows it
            with contextlib.suppress(Exception):
                from torch.distributed.elastic.multiprocessing.errors import get_error_handler

                get_error_handler().record_exception(error)
        os._exit(EXIT_FROZEN_PEER)


_current: Heartbeat | None = None
_lock = threading.Lock()


def _process_group_store() -> tuple[str, int, int | None] | None:
    """``(host, port, rank serving it)`` of the process group's TCP store, or None when unknown."""
    settings = running_settings()
    if not settings.is_fake:
        host, port = settings.addr, settings.port
    elif "MASTER_ADDR" in os.environ and os.environ.get("MASTER_PORT", "").isdigit():
        host, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    else:
        return None
    agent = os.environ.get(_AGENT_STORE_ENV, "").lower() in ("1", "true")
    return host, port, None if agent else 0


def start_heartbeat(
    period: float | None = None, grace: float | None = None, *, store: str | None = None, watch: bool | None = None
) -> Heartbeat | None:
    """Start this rank's heartbeat thread (once: a running one is returned); None on the fake link or when off.

    ``period``/``grace`` default to ``$DING_DIST_HEARTBEAT_S``/``$DING_DIST_HEARTBEAT_GRACE_S`` (2 s, 10 s).
    ``store`` is the ``host:port`` of a launcher's store (default ``$DING_DIST_HEARTBEAT_STORE``); without one
    the beats go to the process group's store and ``watch`` defaults to True: this rank then watches the
    others and ends itself (exit code 1) naming a rank that stopped beating. ``dist_finalize`` (and exit)
    stops it.

    Example:
        >>> start_heartbeat() is None   # the fake link: nothing to watch
        True
    """
    global _current
    with _lock:
        if _current is not None and _current.running:
            return _current
        link = current_link()
        if link.is_fake:
            return None
        period_s, grace_s = resolve_heartbeat(period, grace)
        if period_s == 0:
            return None
        rank, world_size = link.rank(None), link.world_size(None)
        address = store if store is not None else env_value(STORE_ENV)
        watched = address is not None  # a launcher serves the store and watches it
        watch = not watched if watch is None else watch
        store_rank: int | None = None
        if address is None:
            if world_size == 1:
                return None  # a world of one that nobody watches
            found = _process_group_store()
            if found is None:
                logger.warning("rank %d: no heartbeat: the process group's store address is unknown", rank)
                return None
            host, port, store_rank = found
            address = f"{host}:{port}"
        else:
            host, port = _split_address(address)
        try:
            client = dist.TCPStore(
                host, port, is_master=False, timeout=timedelta(seconds=grace_s), wait_for_workers=False
            )
        except Exception as exc:  # training goes on; only the quick freeze detection is lost
            logger.warning("rank %d: no heartbeat: cannot reach the store at %s: %s", rank, address, exc)
            return None
        beat = Heartbeat(
            client, rank, world_size, period_s, grace_s, watch=watch, store_rank=store_rank, address=address
        )
        _current = beat.start()
        return beat


def stop_heartbeat() -> None:
    """Stop this rank's heartbeat (no-op when none runs); ``dist_finalize`` calls it.

    Example:
        >>> stop_heartbeat()
    """
    global _current
    with _lock:
        beat, _current = _current, None
    if beat is not None:
        beat.stop()


def heartbeat_running() -> None:
    """This rank's training loop begins: from its next beat on it is judged with the plain grace, not the start-up
    one (:func:`startup_grace`). No-op without a heartbeat.

    Example:
        >>> heartbeat_running()
    """
    beat = _current
    if beat is not None:
        beat.phase = "running"


def current_heartbeat() -> Heartbeat | None:
    """The running heartbeat of this process, or None.

    Example:
        >>> current_heartbeat() is None   # the fake link
        True
    """
    return _current if _current is not None and _current.running else None


@contextlib.contextmanager
def heartbeat_scope(period: float | None = None, grace: float | None = None) -> Iterator[Heartbeat | None]:
    """Run a heartbeat for the block; one started before the block is reused and left running.

    Example:
        >>> with heartbeat_scope() as beat:   # the fake link: no heartbeat
        ...     print(beat)
        None
    """
    running = current_heartbeat()
    beat = running or start_heartbeat(period, grace)
    try:
        yield beat
    finally:
        if running is None and beat is not None and _current is beat:
            stop_heartbeat()


def _forget_in_child() -> None:  # a forked child (e.g. an env worker) has none of the parent's threads
    global _current, _lock
    _current, _lock = None, threading.Lock()


on_finalize(stop_heartbeat)
# At exit too (no dist_finalize): a store call still in flight while the interpreter tears down aborts it.
atexit.register(stop_heartbeat)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)
