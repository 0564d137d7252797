"""One run per experiment folder: an exclusive lock file created with ``O_EXCL``.

The lock file ``<exp_dir>/.lock`` names the holder's pid, host and start time. A second run into the same
folder is refused with one line naming the holder; a lock left by a process that died on this host
(SIGKILL, power loss of a worker, a torchrun restart) is detected as stale and taken over. A lock held
from another host cannot be probed: the message says which file to delete if that run is gone, unless it names
the same torchrun job (``job``: its rendezvous id): an elastic job that re-forms after a node left is the lock's
own run, and takes it over.

Example::

    with ExperimentLock("runs/cartpole_ppo"):
        ...  # train; the lock file is removed on exit
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from pathlib import Path
from types import TracebackType

__all__ = ["ExperimentInUseError", "ExperimentLock", "LOCK_NAME"]

LOCK_NAME = ".lock"
logger = logging.getLogger(__name__)


class ExperimentInUseError(FileExistsError):
    """Another live run holds the experiment folder's lock."""


class ExperimentLock:
    """Exclusive lock on an experiment folder (see the module docstring).

    Example::

        lock = ExperimentLock(exp_dir).acquire()   # raises ExperimentInUseError if a live run holds it
        ...
        lock.release()
    """

    def __init__(self, folder: str | os.PathLike, job: str | None = None) -> None:
        self.folder = Path(folder)
        self.path = self.folder / LOCK_NAME
        self.job = job
        self._held = False

    def _holder(self) -> dict | None:
        try:
            return json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return {}  # being written right now, or garbage: treated as held by an unknown run

    def acquire(self) -> ExperimentLock:
        """Create the lock file or raise :class:`ExperimentInUseError`; a stale lock is taken over."""
        self.folder.mkdir(parents=True, exist_ok=True)
        me = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.strftime("%Y-%m-%d %H:%M:%S")}
        if self.job is not None:
            me["job"] = self.job
        for _ in range(3):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
            except FileExistsError:
                holder = self._holder()
                if holder is None:
                    continue  # released between our open and our read: try again
                if self.job is not None and holder.get("job") == self.job:  # this job, before it re-formed
                    logger.warning("%s: lock of this job's earlier round (pid %s on %s); taking it over", self.path,
                                   holder.get("pid"), holder.get("host"))  # fmt: skip
                    self.path.unlink(missing_ok=True)
                    continue
                if holder.get("host") == me["host"] and isinstance(holder.get("pid"), int):
                    from ding_dist.comm.processes import pid_alive  # here: ding_dist.comm imports torch

                    if not pid_alive(holder["pid"]):
                        logger.warning(
                            "%s: stale lock of pid %d (no longer running); taking it over", self.path, holder["pid"]
                        )
                        self.path.unlink(missing_ok=True)
                        continue
                who = (
                    f"pid {holder.get('pid')} on host {holder.get('host')} since {holder.get('started')}"
                    if holder
                    else "another run"
                )
                raise ExperimentInUseError(
                    f"exp_dir {str(self.folder)!r} is in use by {who}; choose another --exp-dir, or wait for that "
                    f"run to end (if it is gone from another host, delete {str(self.path)!r})"
                ) from None
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(me, f)
            self._held = True
            return self
        raise ExperimentInUseError(f"exp_dir {str(self.folder)!r}: could not take the lock {str(self.path)!r}")

    def release(self) -> None:
        """Remove the lock file if this process holds it."""
        if self._held:
            holder = self._holder()
            if holder and holder.get("pid") == os.getpid():
                self.path.unlink(missing_ok=True)
            self._held = False

    def __enter__(self) -> ExperimentLock:
        return self.acquire()

    def __exit__(self, exc_type: type | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.release()
