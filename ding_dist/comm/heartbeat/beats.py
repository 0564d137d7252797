"""The heartbeat's shared terms: where a rank's beat lives in the store, the variables a launcher hands its
ranks, the start-up grace and the message that names a silent rank. Both sides use them: the rank side
(:mod:`.rank`) writes and watches beats, the launcher side (:mod:`.launcher`) serves the store and watches.
"""

from __future__ import annotations

import os

from ..settings import HEARTBEAT_GRACE_ENV, HEARTBEAT_STORE_ENV, STARTUP_GRACE_ENV

__all__ = ["KEY_PREFIX", "STARTUP_GRACE_ENV", "STORE_ENV", "beat_key", "frozen_message", "startup_grace"]

#: ``host:port`` of the store a launcher serves and watches; set by the launcher for its ranks. The grace of a
#: rank still starting (seconds), ``STARTUP_GRACE_ENV``, too; else :func:`startup_grace`.
STORE_ENV = HEARTBEAT_STORE_ENV
#: Processes per CPU core up to which a starting rank gets the plain grace.
_PER_CORE_AT_PLAIN_GRACE = 2
KEY_PREFIX = "ding_dist/heartbeat/"


def beat_key(rank: int) -> str:
    """The store key of ``rank``'s beat.

    Example:
        >>> beat_key(3)
        'ding_dist/heartbeat/3'
    """
    return f"{KEY_PREFIX}{rank}"


def _cpu_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def startup_grace(grace: float, nproc: int, cores: int | None = None) -> float:
    """The heartbeat grace of a rank still starting, for ``nproc`` local processes on ``cores`` CPU cores (default:
    this process's): ``grace`` up to 2 processes per core, then in proportion to the processes per core (start-up
    of 64 processes on 2 cores takes minutes; each one's heartbeat thread gets a 32nd of a core).

    Example:
        >>> startup_grace(10.0, nproc=2, cores=2), startup_grace(10.0, nproc=16, cores=2)
        (10.0, 40.0)
    """
    cores = _cpu_cores() if cores is None else cores
    return float(grace) * max(1.0, nproc / max(1, cores) / _PER_CORE_AT_PLAIN_GRACE)


def frozen_message(rank: int, world_size: int, silent_s: float, grace: float, starting: bool = False) -> str:
    """The line naming ``rank`` of ``world_size`` silent for ``silent_s`` seconds, past its (start-up) grace.

    Example:
        >>> frozen_message(1, 2, 12.0, 10.0)[:52]
        'rank 1 of 2 stopped making progress: no heartbeat fo'
    """
    which = (
        f"start-up grace {grace:g} s, {STARTUP_GRACE_ENV}" if starting else f"grace {grace:g} s, {HEARTBEAT_GRACE_ENV}"
    )
    return (
        f"rank {rank} of {world_size} stopped making progress: no heartbeat for {silent_s:.1f} s "
        f"({which}); it is frozen (e.g. SIGSTOP) or hung in code that holds the GIL"
    )
