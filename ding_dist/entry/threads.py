"""Torch's intra-op threads of a run's process: one for small networks, the cores' share for convolutional ones.

Example:
    >>> from ding_dist.entry.threads import cpu_cores
    >>> cpu_cores() >= 1
    True
"""

from __future__ import annotations

import logging
import os

import gymnasium as gym
import torch

__all__ = ["MIN_THREADED_PIXELS", "OMP_DEFAULTED_ENV", "cpu_cores", "default_threads"]

logger = logging.getLogger(__name__)


def cpu_cores() -> int:
    """CPU cores this process may run on (its affinity where the OS has one)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


#: Images with fewer pixels per channel (MinAtar's 10x10 grids) keep one thread: their convolutions are too small for
#: intra-op threads to pay, and spinning threads cost several times the work when anything else runs (measured: a
#: 1-process MinAtar SpaceInvaders PPO run 6x slower with 2 threads than with 1 beside one busy process on 2 cores).
MIN_THREADED_PIXELS = 32 * 32

#: Set by ``ding-dist train``'s local launcher when it set ``OMP_NUM_THREADS=1`` itself (you did not).
OMP_DEFAULTED_ENV = "DING_DIST_OMP_DEFAULTED"


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
    env steps/s with 2 threads, docs/results/actors_and_learners.md).
    """
    asked = os.environ.get("OMP_NUM_THREADS", "")
    if image_threads is not None and os.environ.get(OMP_DEFAULTED_ENV) == "1":
        asked = ""
    shape = tuple(getattr(obs_space, "shape", None) or ()) if obs_space is not None else ()
    image = len(shape) == 3 and shape[-1] * shape[-2] >= MIN_THREADED_PIXELS
    if threads is not None:
        pass
    elif asked.isdigit() and int(asked) >= 1:
        threads = int(asked)
    elif image and image_threads is not None:
        threads = image_threads
    elif image:
        threads = max(1, cpu_cores() // max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1"))))
    else:
        threads = 1
    if torch.get_num_threads() != threads:  # also a rank forked from a launcher that imported torch earlier
        if threads > 1 and not asked:
            logger.info(f"using {threads} torch threads for a convolutional network (OMP_NUM_THREADS changes it)")
        torch.set_num_threads(threads)
