"""How ``ding-dist`` fails: :class:`UsageError`, the exit codes, and the one ``ding-dist: error:`` line.

Bad input ends with one line ``ding-dist: error: ...`` on stderr and exit code 2, and so does a write that finds
no room (a full disk or quota, a file-size limit: :func:`no_room`); SIGINT ends with 130, SIGTERM with 143, SIGUSR1
with 138.

Example:
    >>> from ding_dist.entry.cli.errors import EXIT_USAGE, UsageError
    >>> EXIT_USAGE, issubclass(UsageError, Exception)
    (2, True)
"""

from __future__ import annotations

import errno
import os
import signal
import sys

__all__ = [
    "PROG",
    "EXIT_USAGE",
    "EXIT_SIGINT",
    "EXIT_SIGTERM",
    "EXIT_SIGUSR1",
    "ERROR_FILE_ENV",
    "UsageError",
    "error_line",
    "first_line",
    "no_room",
    "record_for_launcher",
    "refuse_unwritable",
]

PROG = "ding-dist"
EXIT_USAGE = 2
EXIT_SIGINT = 128 + signal.SIGINT  # 130
EXIT_SIGTERM = 128 + signal.SIGTERM  # 143
EXIT_SIGUSR1 = 128 + signal.SIGUSR1  # 138
# Torchrun's elastic agent sets this in the workers; a rank's exception is written there for the summary.
ERROR_FILE_ENV = "TORCHELASTIC_ERROR_FILE"
#: The errors of a write that found no room: a full disk, a full quota, a file-size limit (``ulimit -f``).
NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


class UsageError(Exception):
    """Bad command-line input; reported as one line on stderr with exit code 2."""


def error_line(message: str) -> None:
    """One ``ding-dist: error:`` line in a single write (ranks under a launcher prefix their rank).

    Example:
        >>> error_line("config file 'x.py' does not exist")  # doctest: +SKIP
        ding-dist: error: config file 'x.py' does not exist
    """
    world = os.environ.get("WORLD_SIZE", "1")
    prefix = f"[rank {os.environ.get('RANK', '?')}] " if world.isdigit() and int(world) > 1 else ""
    sys.stderr.write(f"{prefix}{PROG}: error: {message}\n")
    sys.stderr.flush()


def first_line(e: BaseException) -> str:
    """The first line of an exception's message, else its type's name.

    Example:
        >>> first_line(ValueError("bad size\\nmore")), first_line(KeyError())
        ('bad size', 'KeyError')
    """
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def record_for_launcher(e: BaseException) -> None:
    """Under torchrun, write a handled error to the rank's error file so the job's summary can show it.

    Example:
        >>> record_for_launcher(UsageError("bad"))  # without TORCHELASTIC_ERROR_FILE: nothing to do
    """
    if os.environ.get(ERROR_FILE_ENV):
        from torch.distributed.elastic.multiprocessing.errors import get_error_handler

        get_error_handler().record_exception(e)


def refuse_unwritable(path: str | os.PathLike, what: str, folder: bool = False) -> None:
    """Raise :class:`UsageError` (one line) unless ``path``, an output file (``folder``: a folder) named by ``what``
    (e.g. ``--out``), can be written; checked before any work, not after an episode was rendered or runs were read.
    A file's folder must exist: it is never created (a typo in it would make a stray folder).

    Example:
        >>> refuse_unwritable("/proc/curve.png", "--out")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ding_dist.entry.cli.errors.UsageError: --out '/proc/curve.png' cannot be written (... at '/proc'); ...
        >>> refuse_unwritable("/nonexistent_dir/x.gif", "--gif")
        Traceback (most recent call last):
        ...
        ding_dist.entry.cli.errors.UsageError: --gif '/nonexistent_dir/x.gif': folder '/nonexistent_dir' does not exist
    """
    from pathlib import Path

    from ding_dist.utils.fileio import unwritable_reason

    why = unwritable_reason(path, folder=folder)
    if why and not folder and why == f"folder {str(Path(path).parent)!r} does not exist":
        raise UsageError(f"{what} {str(path)!r}: {why}")
    if why:
        kind = "folder" if folder else "path"
        raise UsageError(f"{what} {str(path)!r} cannot be written ({why}); choose another {kind}")


def no_room(e: BaseException) -> str | None:
    """The ``ding-dist: error:`` text for an exception raised by a write that found no room (``e`` or one of its
    causes: :data:`NO_ROOM`), else None. Every file of a run is written to a temp file and renamed, so what was
    written before (checkpoints, config, logs) is intact.

    Example:
        >>> no_room(OSError(errno.ENOSPC, "No space left on device", "runs/a/ckpt/x.pt"))[:55]
        'no room to write runs/a/ckpt/x.pt: No space left on dev'
        >>> no_room(OSError(errno.ENOENT, "No such file")) is None
        True
    """
    seen: set[int] = set()
    cause: BaseException | None = e
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, OSError) and cause.errno in NO_ROOM:
            where = f" {cause.filename}" if cause.filename else ""
            return (f"no room to write{where}: {cause.strerror} (errno {errno.errorcode[cause.errno]}); free space "
                    "or give --exp-dir on another disk; what the run wrote before is intact")  # fmt: skip
        cause = cause.__cause__ or cause.__context__
    return None
