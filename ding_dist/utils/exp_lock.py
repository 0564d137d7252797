"""One run per experiment folder: ``<exp_dir>/.lock``, held with ``flock`` for the run's life.

The holder opens ``.lock`` and takes an exclusive ``fcntl.flock`` on it, which the kernel gives to one open file
at a time and drops when the holder's process ends, however it ends (SIGKILL, OOM, a torchrun restart). So taking
the lock is one atomic step: two starts that find a stale lock at the same moment cannot both take it, and a lock
that no live process holds is stale whatever its file says (the holder's pid, host and start time, written for
the message; an empty or cut file left by a full disk is stale too). A second run into the folder is refused with
one line naming the holder.

Two cases the kernel cannot decide: a file naming another host, whose lock may not reach this one (a shared file
system without lock support), is refused with the file to delete if that run is gone, unless it names the same
torchrun job (``job``: its rendezvous id): an elastic job that re-forms after a node left is the lock's own run,
and takes it over.

A folder can also be *claimed* (:meth:`ExperimentLock.claim`) by the process that chooses a new run's default
folder before the process that runs it takes the lock (a launcher starts its ranks in between): the lock file then
names the claimer, marked ``"claimed"``, and no lock is held. Another chooser skips a folder a live process claimed;
:meth:`~ExperimentLock.acquire` takes a claim over without a word (the claimer's own ranks, or a run given that
folder by name, whichever comes first: the other is refused as for any held lock).

Example::

    with ExperimentLock("runs/cartpole_ppo"):
        ...  # train; the lock file is removed on exit
"""

from __future__ import annotations

import errno
import fcntl  # POSIX (Linux, macOS), as the rest of the run's process handling
import json
import logging
import os
import socket
import time
from pathlib import Path
from types import TracebackType

from ding_dist.comm.processes import pid_alive

__all__ = ["ExperimentInUseError", "ExperimentLock", "LOCK_NAME"]

LOCK_NAME = ".lock"
logger = logging.getLogger(__name__)
_HELD_FDS: set[int] = set()  # lock files this process holds: a forked child (an env worker) closes its copies


def _close_in_child() -> None:
    """After a fork: the child's copies of the lock files are closed, so a child that outlives the holder (an env
    worker of a killed rank) cannot keep the folder locked (a flock lasts while any copy of its file is open)."""
    for fd in list(_HELD_FDS):
        try:
            os.close(fd)
        except OSError:
            pass
    _HELD_FDS.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_close_in_child)


def _alive(pid: object) -> bool:
    """Whether a process of this host has id ``pid`` (:func:`~ding_dist.comm.processes.pid_alive`: a zombie is dead,
    one that cannot be signalled alive)."""
    return isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 and pid_alive(pid)


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
        self._fd: int | None = None

    def _holder(self, fd: int | None = None) -> dict:
        """What the lock file says about its holder ({} when it says nothing readable: empty, cut, gone)."""
        try:
            if fd is None:
                text = self.path.read_text(encoding="utf-8")
            else:
                text = os.pread(fd, 4096, 0).decode("utf-8")
            found = json.loads(text)
        except (OSError, ValueError):
            return {}
        return found if isinstance(found, dict) else {}

    def _in_use(self, holder: dict) -> ExperimentInUseError:
        who = (f"pid {holder.get('pid')} on host {holder.get('host')} since {holder.get('started')}"
               if holder.get("pid") else "another run")  # fmt: skip
        return ExperimentInUseError(
            f"exp_dir {str(self.folder)!r} is in use by {who}; choose another --exp-dir, or wait for that run to "
            f"end (if it is gone from another host, delete {str(self.path)!r})"
        )

    def _me(self) -> dict:
        me = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.strftime("%Y-%m-%d %H:%M:%S")}
        if self.job is not None:
            me["job"] = self.job
        return me

    def acquire(self) -> ExperimentLock:
        """Take the folder's lock or raise :class:`ExperimentInUseError`; a stale lock or a claim is taken over. A
        disk that cannot hold the lock's few bytes raises its ``OSError`` and leaves no lock file behind."""
        self.folder.mkdir(parents=True, exist_ok=True)
        me = self._me()
        for _ in range(10):
            fd, created = self._open()
            locked = False
            try:
                if self._flock(fd):
                    if not self._still_the_file(fd):
                        os.close(fd)  # released (and removed) between our open and our lock: try again
                        continue
                else:  # a live process holds it
                    holder = self._holder()
                    if self.job is None or holder.get("job") != self.job:
                        raise self._in_use(holder)
                    fd = self._take_from_own_job(fd, holder)
                locked = True
                holder = self._holder(fd)
                if (holder.get("host") not in (None, me["host"]) and holder.get("job") != self.job
                        and holder.get("pid")):  # fmt: skip
                    raise self._in_use(holder)  # another host's lock may not reach us: its file is all we know
                if holder.get("pid") and holder.get("pid") != me["pid"] and not created and not holder.get("claimed"):
                    logger.warning("%s: stale lock of pid %s on %s (no process holds it); taking it over", self.path,
                                   holder.get("pid"), holder.get("host"))  # fmt: skip
                self._write(fd, me)
            except BaseException:
                self._drop(fd, remove=locked)  # e.g. a full disk: no lock file of ours is left behind
                raise
            self._fd = fd
            _HELD_FDS.add(fd)
            return self
        raise ExperimentInUseError(f"exp_dir {str(self.folder)!r}: could not take the lock {str(self.path)!r}")

    def claim(self) -> bool:
        """Reserve the folder (created when missing) for a run about to start in another process, or in this one
        later: the lock file names this process as its claimer, and no lock is held (:meth:`acquire` takes the claim
        over). False, and the folder left as it was, when a live run holds it, another live process claimed it, or a
        run of another host may hold it. Two claims of one folder at once: one of them is False. ``OSError`` when the
        folder or its lock file cannot be created.

        Example::

            if ExperimentLock("runs/cartpole_dqn").claim():
                ...  # start the run (its ranks lock runs/cartpole_dqn), or unclaim() if it does not start
        """
        self.folder.mkdir(parents=True, exist_ok=True)
        me = {**self._me(), "claimed": True}
        for _ in range(10):
            fd, created = self._open()
            try:
                if not self._flock(fd):
                    return False  # a live run holds it
                if not self._still_the_file(fd):
                    continue  # released (and removed) between our open and our lock: try again
                holder = self._holder(fd)
                if holder.get("pid") and holder.get("pid") != me["pid"]:
                    if holder.get("host") not in (None, me["host"]) and holder.get("job") != self.job:
                        return False  # another host's run: its lock may not reach us
                    if holder.get("claimed") and _alive(holder["pid"]):
                        return False  # another chooser's, whose run has not started yet
                self._write(fd, me)
                return True
            except BaseException:
                if created and self._still_the_file(fd):
                    self.path.unlink(missing_ok=True)
                raise
            finally:
                os.close(fd)  # the lock (held only while the claim was written) goes with it
        return False

    def unclaim(self) -> None:
        """Remove this process's claim (:meth:`claim`) if no run took it over; nothing else is touched.

        Example::

            lock.unclaim()  # the run did not start
        """
        try:
            fd = os.open(self.path, os.O_RDWR)
        except FileNotFoundError:
            return
        try:
            if self._flock(fd) and self._still_the_file(fd):
                holder = self._holder(fd)
                if holder.get("claimed") and holder.get("pid") == os.getpid():
                    self.path.unlink(missing_ok=True)
        finally:
            os.close(fd)

    def _open(self) -> tuple[int, bool]:
        """An open descriptor of the lock file (created when there was none), and whether this call created it."""
        try:
            return os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o666), True
        except FileExistsError:
            try:
                return os.open(self.path, os.O_RDWR), False
            except FileNotFoundError:  # removed in between: create it
                return os.open(self.path, os.O_CREAT | os.O_RDWR, 0o666), True

    @staticmethod
    def _flock(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return False
            raise
        return True

    def _still_the_file(self, fd: int) -> bool:
        """The locked file is still the one at the lock's path (a holder that released removed it meanwhile)."""
        try:
            return os.stat(self.path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            return False

    def _take_from_own_job(self, fd: int, holder: dict) -> int:
        """The lock of this job's earlier round (an elastic job re-formed; that round's holder may still run, cut
        off): a new locked file replaces it."""
        logger.warning("%s: lock of this job's earlier round (pid %s on %s); taking it over", self.path,
                       holder.get("pid"), holder.get("host"))  # fmt: skip
        tmp = self.path.with_name(f"{LOCK_NAME}.{os.getpid()}.tmp")
        new = os.open(tmp, os.O_CREAT | os.O_TRUNC | os.O_RDWR, 0o666)
        try:
            self._flock(new)
            os.replace(tmp, self.path)
        except BaseException:
            os.close(new)
            tmp.unlink(missing_ok=True)
            raise
        os.close(fd)
        return new

    @staticmethod
    def _write(fd: int, me: dict) -> None:
        data = json.dumps(me).encode("utf-8")
        os.ftruncate(fd, 0)
        if os.pwrite(fd, data, 0) != len(data):
            raise OSError(errno.ENOSPC, "no space left on device for the lock file")

    def _drop(self, fd: int, remove: bool) -> None:
        """Close ``fd``; remove the lock file first when ``remove`` and it is still ours."""
        try:
            if remove and self._still_the_file(fd):
                self.path.unlink(missing_ok=True)
        finally:
            os.close(fd)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Remove the lock file and drop the lock, if this process holds it."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        _HELD_FDS.discard(fd)
        self._drop(fd, remove=True)  # removed while still locked: a start that opened it meanwhile tries again

    def __enter__(self) -> ExperimentLock:
        return self.acquire()

    def __exit__(self, exc_type: type | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.release()
