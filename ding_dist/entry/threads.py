"""Torch's intra-op threads of a run's process: one for small networks; for wide and convolutional ones the cores'
share while the machine's other cores are idle (:class:`ThreadGovernor`), one as soon as other work needs them.

Example:
    >>> from ding_dist.entry.threads import cpu_cores
    >>> cpu_cores() >= 1
    True
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch

from ding_dist.comm import get_local_size

__all__ = [
    "CGROUP_CPU_FILES",
    "MIN_THREADED_PIXELS",
    "MIN_THREADED_WORK",
    "OMP_DEFAULTED_ENV",
    "ThreadGovernor",
    "adaptive_threads",
    "cpu_cores",
    "default_threads",
    "local_processes",
    "threaded_image",
    "update_work",
]

logger = logging.getLogger(__name__)


#: Where Linux keeps a container's CPU quota: cgroup v2's ``cpu.max`` ("QUOTA PERIOD" or "max PERIOD"), then
#: cgroup v1's quota and period files (a quota of -1: none).
CGROUP_CPU_FILES: tuple[tuple[str, ...], ...] = (
    ("/sys/fs/cgroup/cpu.max",),
    ("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "/sys/fs/cgroup/cpu/cpu.cfs_period_us"),
)


def local_processes() -> int:
    """Processes of this run on this machine: the running group's local size (``ding_dist.launch`` knows it without
    ``LOCAL_WORLD_SIZE``), or the launcher's ``LOCAL_WORLD_SIZE``, whichever is larger; 1 for a lone process.

    Example:
        >>> local_processes()
        1
    """
    return max(1, get_local_size(), int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1))


def _cpu_quota() -> int | None:
    """Whole CPUs a container's cgroup quota allows (rounded up), or None where none is set."""
    for files in CGROUP_CPU_FILES:
        try:
            fields = " ".join(Path(f).read_text().strip() for f in files).split()
        except OSError:
            continue
        if len(fields) != 2 or fields[0] in ("max", "-1"):
            return None
        try:
            quota, period = float(fields[0]), float(fields[1])
        except ValueError:
            return None
        return max(1, math.ceil(quota / period)) if quota > 0 and period > 0 else None
    return None


def cpu_cores() -> int:
    """CPU cores this process may run on: its affinity where the OS has one, capped by a container's CPU quota
    (docker's ``--cpus``, a Kubernetes CPU limit), which the affinity does not show."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    quota = _cpu_quota()
    return min(cores, quota) if quota is not None else cores


#: Images of at least this many pixels per channel (Atari's 84x84 frames) start with the cores' share of threads.
#: Smaller ones (MinAtar's 10x10 grids) start with one and get more only from :class:`ThreadGovernor`: spinning
#: threads cost several times the work when anything else runs (measured: a 1-process MinAtar SpaceInvaders PPO
#: run 6x slower with 2 threads than with 1 beside one busy process on 2 cores).
MIN_THREADED_PIXELS = 32 * 32

#: Updates of at least this much work (the policy's floating weights, targets included, times the rank's batch) may
#: use more than one thread while the machine's other cores are idle (:func:`adaptive_threads`). On an idle 2-core
#: machine two threads took 0.71x the wall time of one on MinAtar SpaceInvaders PPO (133k weights x 1,024) and
#: 0.78x on Hopper SAC (350k x 256), but 1.14-1.23x on MinAtar Breakout DQN (264k x 32: too little work per update for
#: the threads' synchronization to pay). CartPole's networks are far below it.
MIN_THREADED_WORK = 16_000_000

#: Set by ``ding-dist train``'s local launcher when it set ``OMP_NUM_THREADS=1`` itself (you did not).
OMP_DEFAULTED_ENV = "DING_DIST_OMP_DEFAULTED"


def threaded_image(obs_space: gym.Space | None) -> bool:
    """Whether ``obs_space`` holds images of at least :data:`MIN_THREADED_PIXELS` pixels per channel (Atari's frames,
    not MinAtar's grids): a convolutional encoder's share of the cores from the start.

    Example:
        >>> threaded_image(gym.spaces.Box(0, 255, (4, 84, 84), dtype="uint8"))
        True
    """
    shape = tuple(getattr(obs_space, "shape", None) or ()) if obs_space is not None else ()
    return len(shape) == 3 and shape[-1] * shape[-2] >= MIN_THREADED_PIXELS


def default_threads(
    obs_space: gym.Space | None = None, threads: int | None = None, image_threads: int | None = None
) -> None:
    """Torch threads of this process: ``threads`` when given (a role's ``actor_learner.*_threads``), else
    ``OMP_NUM_THREADS`` when set (torchrun sets 1), else one, or for image observations of at least
    :data:`MIN_THREADED_PIXELS` pixels (a convolutional encoder on frames such as Atari's 84x84) ``image_threads``
    when given (an actor-learner role's share, :func:`~ding_dist.entry.roles.role_threads`; then a launcher's
    default ``OMP_NUM_THREADS=1`` does not count as set) or the CPU cores shared by this machine's processes.

    RL networks on vectors are small: extra intra-op threads only add synchronization, and on a busy machine
    they spin against other processes (measured: a 1-process CartPole PPO run 9x slower with 2 threads on a
    loaded 2-core machine). A Nature-CNN's convolutions do use them (Pong PPO on 2 cores, 1 process: +46-54 %
    env steps/s with 2 threads, docs/results/actors_and_learners.md). This sets a process's starting count; a
    data-parallel rank's :func:`adaptive_threads` may then change it with the load.
    """
    asked = os.environ.get("OMP_NUM_THREADS", "")
    if image_threads is not None and os.environ.get(OMP_DEFAULTED_ENV) == "1":
        asked = ""
    image = threaded_image(obs_space)
    if threads is not None:
        pass
    elif asked.isdigit() and int(asked) >= 1:
        threads = int(asked)
    elif image and image_threads is not None:
        threads = image_threads
    elif image:
        threads = max(1, cpu_cores() // local_processes())
    else:
        threads = 1
    if torch.get_num_threads() != threads:  # also a rank forked from a launcher that imported torch earlier
        if threads > 1 and not asked:
            logger.info(f"using {threads} torch threads for a convolutional network (OMP_NUM_THREADS changes it)")
        torch.set_num_threads(threads)


def _cpu_sample(cores: frozenset[int]) -> tuple[float, float, float] | None:
    """(monotonic seconds, busy CPU seconds of ``cores`` machine-wide, this process's CPU seconds); None where the
    OS has no ``/proc/stat``."""
    try:
        with open("/proc/stat") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    busy = 0
    for line in lines:
        name, _, rest = line.partition(" ")
        if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cores:
            fields = [int(x) for x in rest.split()]
            busy += sum(fields[:8]) - fields[3] - fields[4]  # user..steal, less idle and iowait
    return time.monotonic(), busy / ticks, time.process_time()


class ThreadGovernor:
    """Torch's intra-op threads of a process that may share its machine: up to ``most`` while the other processes
    leave this process's cores idle, one as soon as they take more than ``margin`` of a core, re-decided from the CPU
    time the cores spent on other processes (machine-wide busy time less this process's own).

    Each phase of a loop (``tick("collect")``, ``tick("learn")``) gets its own count, decided from what the other
    processes took during that phase's earlier runs once ``interval_s`` of them have passed: env worker processes
    that are busy while the loop collects and idle while it learns leave the learning its threads. Intra-op threads
    spin while they wait for each other: on cores of their own they make a wide network's update up to 1.5x faster,
    beside any other busy process several times slower.

    ``sample`` (tests) returns ``(seconds, busy CPU seconds of the cores, own CPU seconds)``. Thread counts change
    float rounding in some reductions, so a run it governs is reproducible bit for bit only under equal load:
    set ``OMP_NUM_THREADS`` to fix the count. :attr:`seconds_at` holds the time spent at each count.

    Example::

        governor = ThreadGovernor(most=2)
        for _ in range(iterations):
            governor.tick("collect")  # cheap: a clock read, and at most every 20 ms a read of /proc/stat
            ...                       # collect
            governor.tick("learn")
            ...                       # learn
    """

    #: phases shorter than this are not measured on their own (their time counts towards the next one measured)
    MIN_PHASE_S = 0.02

    def __init__(
        self,
        most: int,
        *,
        interval_s: float = 1.0,
        margin: float = 0.15,
        sample: Callable[[], tuple[float, float, float] | None] | None = None,
    ) -> None:
        if most < 1:
            raise ValueError(f"most must be >= 1 threads, got {most}")
        cores = frozenset(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else frozenset()
        self.most, self.interval_s, self.margin, self.cores = int(most), interval_s, margin, max(1, len(cores))
        self._sample = sample if sample is not None else (lambda: _cpu_sample(cores))
        self._last = self._sample()
        self.threads = torch.get_num_threads()
        self.seconds_at: dict[int, float] = {}
        self._since = self._last[0] if self._last is not None else time.monotonic()
        #: False where the OS gives no CPU times (no ``/proc/stat``): the count then never changes
        self.measurable = self._last is not None
        self._announced = False
        self._sampled_at = time.monotonic()
        self._phase = ""
        self._want: dict[str, int] = {}  # each phase's decided count (a phase not yet decided: the latest decision)
        self._latest = self.threads
        self._acc: dict[str, list[float]] = {}  # each phase's [wall seconds, other processes' CPU seconds] so far

    def tick(self, phase: str = "") -> int:
        """At the start of ``phase``: measure the phase that ends here, re-decide its count once ``interval_s`` of it
        has been measured, and use ``phase``'s count; return the count in use."""
        if self._last is None:
            return self.threads
        now = time.monotonic()
        if now - self._sampled_at >= min(self.MIN_PHASE_S, self.interval_s):
            self._measure(now)
        self._phase = phase
        self._use(self._want.get(phase, self._latest))
        return self.threads

    def _measure(self, now: float) -> None:
        sample = self._sample()
        if sample is None or sample[0] <= self._last[0]:
            return
        self._sampled_at = now
        wall = sample[0] - self._last[0]
        others = max(0.0, (sample[1] - self._last[1]) - (sample[2] - self._last[2]))  # CPU seconds
        self._last = sample
        self.seconds_at[self.threads] = self.seconds_at.get(self.threads, 0.0) + (sample[0] - self._since)
        self._since = sample[0]
        acc = self._acc.setdefault(self._phase, [0.0, 0.0])
        acc[0] += wall
        acc[1] += others
        if acc[0] < self.interval_s:
            return
        cores_taken = acc[1] / acc[0]
        self._acc[self._phase] = [0.0, 0.0]
        # this process's cores, less each core the others took more than `margin` of
        want = max(1, min(self.most, self.cores - math.ceil(max(0.0, cores_taken - self.margin))))
        self._want[self._phase] = self._latest = want

    def _use(self, want: int) -> None:
        if want == self.threads:
            return
        if want > 1 and not self._announced:
            logger.info(
                "using up to %d torch threads while this machine's other cores are idle, one when other work "
                "needs them (OMP_NUM_THREADS fixes the count)",
                self.most,
            )
            self._announced = True
        torch.set_num_threads(want)
        self.threads = want

    def split(self) -> dict[str, float]:
        """Seconds spent at each thread count so far (``result.json``'s ``threads_s``)."""
        out = dict(self.seconds_at)
        out[self.threads] = out.get(self.threads, 0.0) + (time.monotonic() - self._since)
        return {str(k): round(v, 3) for k, v in sorted(out.items())}


def update_work(policy: Any, plan: Any) -> int:
    """The work of one update, as :data:`MIN_THREADED_WORK` counts it: the policy's floating weights (targets
    included) times the rank's batch (its minibatch, or its whole rollout where the policy learns on it at once).

    Example::

        update_work(policy, plan)  # Hopper SAC, batch 256: about 90M
    """
    weights = sum(t.numel() for t in policy.named_weights().values())
    return weights * (plan.rank_batch or plan.rank_n_sample or 1)


def adaptive_threads(
    obs_space: gym.Space | None, work: int, device: torch.device | str = "cpu", most: int | None = None
) -> ThreadGovernor | None:
    """A :class:`ThreadGovernor` for a rank that learns, or None where its threads stay fixed: ``OMP_NUM_THREADS``
    set by you, a policy off the CPU, an update of less than :data:`MIN_THREADED_WORK` (``work``: the policy's
    weights times the rank's batch) unless its observations are images, or fewer than 2 threads to give: ``most``,
    by default the cores per local process (:func:`local_processes`; an actor-learner learner: the cores its host's
    actors leave).

    Example::

        governor = adaptive_threads(policy.obs_space, update_work(policy, plan))
    """
    asked = os.environ.get("OMP_NUM_THREADS", "")
    if asked and os.environ.get(OMP_DEFAULTED_ENV) != "1":
        return None
    if torch.device(device).type != "cpu":
        return None
    if work < MIN_THREADED_WORK and not threaded_image(obs_space):
        return None
    if most is None:
        most = cpu_cores() // local_processes()
    if most < 2:
        return None
    governor = ThreadGovernor(most)
    return governor if governor.measurable else None
