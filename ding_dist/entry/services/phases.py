"""Where a run's time goes: the seconds of each phase of a training loop, from the loop's own clock.

The loops time their phases (``collect``: stepping the envs and acting; ``learn``: the updates, gradient sync
included; ``log``, ``eval``, ``checkpoint``) and ``result.json`` gets them as ``phases_s``, with ``startup`` (the
process's age when its loop began: imports, config, envs, networks, resume) and ``other`` (the loop's time that no
phase holds). ``benchmarks/bench_speed.py`` prints the split.

Example:
    >>> phases = Phases()
    >>> with phases("learn"):
    ...     pass
    >>> sorted(phases.split())
    ['learn', 'other', 'startup']
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["Phases", "process_age_s"]


def process_age_s() -> float | None:
    """Seconds since this process started (Linux: from ``/proc/self/stat``), or None where that cannot be read.

    Example:
        >>> age = process_age_s(); age is None or age > 0
        True
    """
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            started_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        return time.clock_gettime(time.CLOCK_BOOTTIME) - started_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


class Phases:
    """Seconds per named phase since it was made (the loop's start); :meth:`split` adds ``startup`` and ``other``.

    Example::

        phases = Phases()
        with phases("collect"):
            rollout = collector.collect(...)
        phases.split()   # {"startup": 3.1, "collect": 12.0, "learn": 20.5, "other": 0.4}
    """

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._start = time.perf_counter()
        self._startup = process_age_s()

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start

    def split(self) -> dict[str, float]:
        """``startup`` (None where the process's age is unknown), each phase, and ``other``: the loop's seconds so far
        that no phase holds, rounded to milliseconds."""
        total = time.perf_counter() - self._start
        out = {"startup": self._startup, **self.seconds, "other": max(0.0, total - sum(self.seconds.values()))}
        return {k: (None if v is None else round(v, 3)) for k, v in out.items()}
