"""Whether a process of this host still runs: for the heartbeat's launcher (a rank that died silently), the
experiment lock (a stale holder) and checkpoints (a writer's leftover temporary file)."""

from __future__ import annotations

import os

__all__ = ["pid_alive"]


def pid_alive(pid: int) -> bool:
    """True when ``pid`` runs (or is stopped) on this host; a zombie (exited, not yet reaped) counts as gone.

    Reads ``/proc/<pid>/stat`` where there is one (Linux), else asks the kernel with signal 0 (a process
    owned by another user counts as running).

    Example:
        >>> pid_alive(os.getpid())
        True
    """
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False
    except (OSError, IndexError):  # no /proc (macOS): ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
