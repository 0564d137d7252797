"""Atomic file writes: a reader never sees a half-written file at the final path.

Every writer here goes through the same steps: write into a temporary file in the target's own folder
(so the final rename stays on one filesystem), flush, ``fsync``, ``os.replace`` onto the final name,
then ``fsync`` the folder so the rename itself survives a power cut. Files get the permissions a plain
``open()`` would give them (``0666`` minus the umask), not ``mkstemp``'s private ``0600``.
"""

from __future__ import annotations

import errno
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

__all__ = [
    "atomic_open",
    "atomic_write_text",
    "atomic_write_json",
    "shown_path",
    "temp_name_prefix",
    "unwritable_reason",
]


def shown_path(path: str | os.PathLike | None) -> str:
    """How log lines show a path: as it was given (a relative one relative, an absolute one absolute), the same
    however the run was started, since the launcher hands its ranks the experiment folder as the user gave it.

    Example:
        >>> shown_path(Path("runs") / "x"), shown_path("/data/runs/x")
        ('runs/x', '/data/runs/x')
    """
    return "None" if path is None else os.fspath(path)


def unwritable_reason(path: str | os.PathLike, folder: bool = False) -> str | None:
    """Why ``path`` (a file to be written, or with ``folder`` a folder to be created and written into) cannot be
    written, else None: checked at the nearest folder that exists, with a file created and removed there, so a
    read-only mount or a folder without write permission is caught before any work (for root too). A file's
    folder must exist (it is never created for it, so a typo in it makes no folder); a new folder's parents may
    be missing (they are created with it).

    Example:
        >>> unwritable_reason("/proc/x.png")  # doctest: +ELLIPSIS
        "... at '/proc'"
        >>> import tempfile
        >>> unwritable_reason("/nonexistent_dir/x.png")
        "folder '/nonexistent_dir' does not exist"
        >>> unwritable_reason(tempfile.mkdtemp() + "/new/sub", folder=True) is None
        True
    """
    target = Path(path).absolute()
    if not folder and target.is_dir():
        return f"{str(target)!r} is a folder"
    existing = target if folder else target.parent
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return f"{str(existing)!r} is a file"
    if not folder and existing != target.parent:
        return f"folder {str(Path(path).parent)!r} does not exist"
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as e:
        kind = _file_system(existing)
        if e.errno == errno.ENOENT or kind in _KERNEL_FILE_SYSTEMS:  # /proc says ENOENT for an existing folder
            what = f"the kernel's {kind} file system" if kind in _KERNEL_FILE_SYSTEMS else "the file system"
            return f"no file or folder can be created in {what} at {str(existing)!r}"
        return f"{e.strerror or e} at {str(existing)!r}"
    return None


#: File systems the kernel shows its state in (``/proc``, ``/sys``, ...): no file or folder of a user's goes there.
_KERNEL_FILE_SYSTEMS = frozenset(
    {"proc", "sysfs", "cgroup", "cgroup2", "debugfs", "tracefs", "securityfs", "configfs", "devpts", "bpf", "pstore"}
)


def _file_system(folder: Path) -> str | None:
    """The type of the file system ``folder`` is on (``/proc/self/mounts``, Linux), or None when unknown."""
    try:
        with open("/proc/self/mounts", encoding="utf-8", errors="replace") as f:
            mounts = [line.split()[1:3] for line in f if len(line.split()) > 2]
    except OSError:
        return None
    best, kind = "", None
    path = str(folder.resolve())
    for point, fs in mounts:
        point = point.replace("\\040", " ")
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, fs
    return kind


def temp_name_prefix(path: str | os.PathLike) -> str:
    """Prefix of the temporary files that :func:`atomic_open` creates for ``path``.

    The name starts with a dot and carries the writer's pid, so a glob for the final names
    (``ckpt_*.pt``) never matches it and a leftover can be traced to its process.

    Example:
        >>> temp_name_prefix("/tmp/run/ckpt_000000010.pt").startswith(".ckpt_000000010.pt.")
        True
    """
    return f".{Path(path).name}.{os.getpid()}."


def _umask() -> int:
    """The process's umask: from /proc on Linux (no change to process state), else set and put back."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # e.g. platforms that cannot open a directory
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "wb", encoding: str | None = None) -> Iterator[IO[Any]]:
    """Open a temporary file next to ``path``; on a clean exit it replaces ``path`` atomically.

    On an exception the temporary file is removed and ``path`` is left untouched (an ``OSError`` of the writes,
    e.g. a full disk, names ``path``).

    Example:
        >>> import tempfile, pathlib
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "a.txt"
        >>> with atomic_open(p, "w", encoding="utf-8") as f:
        ...     _ = f.write("hello")
        >>> p.read_text()
        'hello'
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open mode must be 'w' or 'wb', got {mode!r}")
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=temp_name_prefix(final), suffix=".tmp", dir=final.parent)
    tmp = Path(tmp_name)
    try:
        # mkstemp creates 0600; the final file gets what open() would give it (0666 minus the umask), so
        # teammates on a shared filesystem can read runs as they read TensorBoard's files.
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, mode, encoding=encoding) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)
    except BaseException as e:
        tmp.unlink(missing_ok=True)
        if isinstance(e, OSError) and e.filename is None:  # a write's error (a full disk) names the file it was for
            e.filename = str(final)
        raise
    _fsync_dir(final.parent)


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically and return the path.

    Example:
        >>> import tempfile, pathlib
        >>> p = atomic_write_text(pathlib.Path(tempfile.mkdtemp()) / "x.txt", "hi")
        >>> p.read_text()
        'hi'
    """
    with atomic_open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return Path(path)


def atomic_write_json(path: str | os.PathLike, obj: Any, default: Callable[[Any], Any] | None = None) -> Path:
    """Write ``obj`` as indented JSON to ``path`` atomically (e.g. an experiment's ``result.json``).

    Example:
        >>> import json, tempfile, pathlib
        >>> p = atomic_write_json(pathlib.Path(tempfile.mkdtemp()) / "r.json", {"env_steps": 10})
        >>> json.loads(p.read_text())["env_steps"]
        10
    """
    text = json.dumps(obj, indent=2, sort_keys=True, default=default) + "\n"
    return atomic_write_text(path, text)
