"""Seed streams of a run: each env, process RNG and replay sampler of each rank draws from a stream of its own.

Every stream is a :class:`numpy.random.SeedSequence` of the fixed-length entropy
``[seed, role, rank, restart, start_step % 2**32, start_step // 2**32]``: the run seed, what the stream is
for (:data:`ROLES`), the global rank, torchrun's restart count and the env step the process started from
(0, or the step of the checkpoint it resumed). Two streams that differ in any of these share nothing (a
SeedSequence hashes its whole entropy; the fixed length keeps ``[1]`` and ``[1, 0]`` apart, which numpy
would pad to the same pool). So seeds 0 and 1 of a run, its ranks, its collectors and evaluators, and
the segments of a resumed or restarted run never replay one another's episodes or exploration noise.

Example::

    seeds = RunSeeds(seed=0, restart=0, start_step=0)
    seeds.env_seeds("collector", rank=1, num=4)   # four env seeds of rank 1's collector
    seeds.seed_process(rank=1)                     # Python's, numpy's and torch's global generators
"""

from __future__ import annotations

import numbers
import random
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["ROLES", "RunSeeds", "env_seeds", "episode_seed"]

#: What a stream is for; the code is part of its entropy.
ROLES = {"collector": 0, "evaluator": 1, "process": 2, "replay": 3}

_WORD = 2**32


def _check_int(name: str, value: Any, low: int, high: int | None = None) -> int:
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < low:
        raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    if high is not None and value >= high:
        raise ValueError(f"{name} must be an int in [{low}, {high}), got {value!r}")
    return int(value)


@dataclass(frozen=True)
class RunSeeds:
    """The seed streams of one process's segment of a run (``seed``, ``restart``, ``start_step``)."""

    seed: int
    restart: int = 0
    start_step: int = 0

    def __post_init__(self) -> None:
        _check_int("seed", self.seed, 0, _WORD)
        _check_int("restart", self.restart, 0, _WORD)
        _check_int("start_step", self.start_step, 0, _WORD * _WORD)

    def sequence(self, role: str, rank: int) -> np.random.SeedSequence:
        """The stream of ``role`` on global ``rank``.

        Example:
            >>> RunSeeds(0).sequence("collector", 0).entropy
            [0, 0, 0, 0, 0, 0]
        """
        if role not in ROLES:
            raise ValueError(f"role must be one of {sorted(ROLES)}, got {role!r}")
        rank = _check_int("rank", rank, 0, _WORD)
        step = self.start_step
        return np.random.SeedSequence([self.seed, ROLES[role], rank, self.restart, step % _WORD, step // _WORD])

    def integer(self, role: str, rank: int) -> int:
        """One seed in ``[0, 2**31)`` drawn from the stream (for a generator that takes an int).

        Example:
            >>> 0 <= RunSeeds(0).integer("replay", 1) < 2**31
            True
        """
        return int(self.sequence(role, rank).generate_state(1)[0] >> 1)

    def env_seeds(self, role: str, rank: int, num: int) -> list[int]:
        """``num`` env seeds in ``[0, 2**31)`` for ``role`` (``"collector"``/``"evaluator"``) on ``rank``.

        Example:
            >>> len(RunSeeds(0).env_seeds("collector", rank=0, num=3))
            3
        """
        if role not in ("collector", "evaluator"):
            raise ValueError(f"env role must be 'collector' or 'evaluator', got {role!r}")
        num = _check_int("number of envs", num, 1)
        return [int(s >> 1) for s in self.sequence(role, rank).generate_state(num)]

    def seed_process(self, rank: int) -> None:
        """Seed Python's, numpy's and torch's global generators of this process from ``rank``'s stream.

        Example::

            RunSeeds(seed=3).seed_process(rank=0)
        """
        import torch  # the seed layer itself stays light (the CLI checks configs without torch)

        state = self.sequence("process", rank).generate_state(3)
        random.seed(int(state[0]))
        np.random.seed(int(state[1]))
        torch.manual_seed(int(state[2]))


def env_seeds(seed: int, rank: int, role: str, num: int) -> list[int]:
    """Seeds of ``num`` envs of one role (``"collector"``/``"evaluator"``) on one rank, at a run's start.

    The first segment's streams of :class:`RunSeeds` (no restart, env step 0): every seed, rank and role
    gets streams of its own.

    Example::

        env_seeds(0, rank=1, role="collector", num=2)  # two seeds, shared with no other rank, role or seed
    """
    return RunSeeds(_check_int("seed", seed, 0, _WORD)).env_seeds(role, rank, num)


def episode_seed(env_seed: int | None, k: int) -> int | None:
    """The reset seed of the ``k``-th episode (from 0) an evaluation env with seed ``env_seed`` runs: ``env_seed``
    itself for the first, then a stream of its own (None stays None: unseeded). An episode that an env crash cut
    short is run again from its seed, so crashes never change which episodes an evaluation counts.

    Example:
        >>> episode_seed(7, 0), episode_seed(7, 1) == episode_seed(7, 1) != episode_seed(8, 1)
        (7, True)
    """
    if env_seed is None:
        return None
    if k == 0:
        return int(env_seed)
    return int(np.random.SeedSequence([int(env_seed), _check_int("episode", k, 0)]).generate_state(1)[0] >> 1)
