"""Liveness heartbeat: a frozen rank (SIGSTOP, a hung host) is found in seconds, whatever the collective timeout.

Each rank runs a daemon thread that writes a counter into a torch ``TCPStore`` every ``period`` seconds.
A frozen process stops all its threads, so its counter stops. Who watches the counters:

- a launcher (``ding-dist train --nproc N``, ``launch``): it serves the store (``HeartbeatMonitor``) and
  SIGKILLs a rank whose counter has not moved for ``grace`` seconds; a SIGSTOPped process cannot answer
  SIGTERM, SIGKILL needs no SIGCONT;
- otherwise (torchrun or SLURM started the ranks) every rank watches the others through the process
  group's store, and a rank that finds a silent peer logs a line naming it and exits with code 1, so
  the launcher ends the job.

"Progress" is the liveness of the heartbeat thread: a rank stuck in an endless loop or a deadlock of
its main thread keeps beating (the collective timeout and the health check find it). Settings:
``$DING_DIST_HEARTBEAT_S`` (period, default 2 s; 0 turns the heartbeat off) and
``$DING_DIST_HEARTBEAT_GRACE_S`` (default 10 s), or the arguments. See docs/reliability.md.

A rank starts in the "starting" phase (imports, envs, networks: the part a machine with more processes than
cores stretches most) and says when its training loop begins (:func:`heartbeat_running`); until then it is
judged with :func:`startup_grace`, the grace scaled by the local processes per CPU core, and from then on with
the plain grace, so a rank frozen in training is still found in seconds.

Modules: :mod:`.beats` (the store keys, the variables and the graces both sides share), :mod:`.rank` (a rank's
beating and watching threads), :mod:`.launcher` (a launcher's store and watch, ``HeartbeatMonitor``).
"""

from .beats import STARTUP_GRACE_ENV, STORE_ENV, startup_grace
from .launcher import HeartbeatMonitor, watch_heartbeats
from .rank import (
    Heartbeat,
    current_heartbeat,
    heartbeat_running,
    heartbeat_scope,
    start_heartbeat,
    stop_heartbeat,
)

__all__ = [
    "STARTUP_GRACE_ENV",
    "STORE_ENV",
    "Heartbeat",
    "HeartbeatMonitor",
    "current_heartbeat",
    "heartbeat_running",
    "heartbeat_scope",
    "start_heartbeat",
    "startup_grace",
    "stop_heartbeat",
    "watch_heartbeats",
]
