"""Exploration schedules of the epsilon-greedy learners: :func:`epsilon_schedule` (linear or exponential decay over
global env steps) and :func:`apex_epsilon` (Ape-X's constant per-actor ladder).
"""

from __future__ import annotations

import numpy as np

__all__ = ["apex_epsilon", "epsilon_schedule"]


def epsilon_schedule(kind: str, start: float, end: float, decay: int, env_step: int) -> float:
    """Exploration rate after ``env_step`` global env steps.

    ``"linear"``: from ``start`` to ``end`` over ``decay`` steps, then ``end``;
    ``"exp"``: ``end + (start - end) * exp(-env_step / decay)``.

    Example::

        epsilon_schedule("linear", 1.0, 0.05, 10_000, 5_000)  # 0.525
    """
    if kind == "linear":
        frac = min(1.0, env_step / max(1, decay))
        return start + frac * (end - start)
    if kind == "exp":
        return end + (start - end) * float(np.exp(-env_step / max(1, decay)))
    raise ValueError(f"other.eps.type must be 'linear' or 'exp', got {kind!r}")


def apex_epsilon(actor: int, actors: int, base: float = 0.4, alpha: float = 7.0) -> float:
    """Ape-X's exploration ladder (Horgan et al. 2018): actor ``i`` of ``N`` explores with
    ``base ** (1 + alpha * i / (N - 1))``; actor 0 (and a lone actor) uses ``base``.

    Example::

        [round(apex_epsilon(i, 3), 4) for i in range(3)]  # [0.4, 0.0163, 0.0007]
    """
    if not 0 <= actor < actors:
        raise ValueError(f"actor index must be in [0, {actors}), got {actor}")
    if actors == 1:
        return float(base)
    return float(base ** (1.0 + alpha * actor / (actors - 1)))
