"""A run's global counters, and their form in a checkpoint.

Example::

    c = Counters()
    c.env_steps += 256
    Counters.from_state(c.state()) == c  # True
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["Counters"]


@dataclass
class Counters:
    """Counters every rank that learns computes identically (no communication needed to agree on them)."""

    env_steps: int = 0  # global: sum over ranks
    episodes: int = 0  # global: sum over ranks
    best_eval: float = -math.inf
    last_eval: float | None = None
    eval_history: list = field(default_factory=list)  # [(env_steps, mean_return)]
    update_credit: int = 0  # off-policy: update_per_collect x env steps not yet turned into updates
    wall_time_s: float = 0.0  # the training loop's wall time in the run's earlier segments (up to their checkpoints)

    def state(self) -> dict[str, Any]:
        """The counters as a checkpoint stores them."""
        return asdict(self)

    @classmethod
    def from_state(cls, c: Mapping[str, Any]) -> Counters:
        """Counters from a checkpoint (``update_credit`` and ``wall_time_s`` may be missing in old ones); KeyError
        if others are."""
        return cls(
            c["env_steps"],
            c["episodes"],
            c["best_eval"],
            c["last_eval"],
            c["eval_history"],
            c.get("update_credit", 0),
            float(c.get("wall_time_s", 0.0)),
        )
