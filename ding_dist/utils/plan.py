"""The run's sizes and one rank's share of each, computed once: the one place a config's totals are divided.

A config states run totals: ``policy.learn.batch_size`` (the minibatch of one update), ``policy.collect.n_sample``
(env steps of one iteration), ``policy.collect.n_episode`` (complete episodes per learn call) and
``env.collector_env_num`` (training envs). Each of N ranks takes ``1/N`` of every one, so every env's rollout keeps
its length and N ranks together apply the update of one. Code reads ``plan.batch`` for the run's minibatch and
``plan.rank_batch`` for this rank's share: a name says which a number is, and nothing multiplies a share back.

Example:
    >>> plan = Plan.of({"policy": {"learn": {"batch_size": 256}, "collect": {"n_sample": 64}}}, ranks=4)
    >>> plan.batch, plan.rank_batch, plan.n_sample, plan.rank_n_sample
    (256, 64, 64, 16)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

__all__ = ["PLAN_KEYS", "Plan", "dotted_get"]

#: Each size of a plan and where a full config holds it (a policy's own config drops the ``policy.``).
PLAN_KEYS = {
    "batch": "policy.learn.batch_size",
    "n_sample": "policy.collect.n_sample",
    "n_episode": "policy.collect.n_episode",
    "envs": "env.collector_env_num",
}


def dotted_get(cfg: Mapping, dotted: str) -> Any:
    """The value at ``"a.b.c"`` in nested mappings, None where a level is missing.

    Example:
        >>> dotted_get({"policy": {"learn": {"batch_size": 64}}}, "policy.learn.batch_size")
        64
    """
    node: Any = cfg
    for key in dotted.split("."):
        node = node.get(key) if isinstance(node, Mapping) else None
    return node


def _is_size(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


@dataclass(frozen=True)
class Plan:
    """The run's totals (``batch``, ``n_sample``, ``n_episode``, ``envs``; None where the config has none) over
    ``ranks`` processes, and each rank's share (``rank_batch``, ...). A total that ``ranks`` does not divide raises
    ``ValueError`` (rounding would change the run's batch or horizon).

    Example:
        >>> Plan(ranks=2, batch=64, envs=8).rank_envs
        4
    """

    ranks: int = 1
    batch: int | None = None
    n_sample: int | None = None
    n_episode: int | None = None
    envs: int | None = None

    def __post_init__(self) -> None:
        if not _is_size(self.ranks):
            raise ValueError(f"Plan: ranks must be an int >= 1, got {self.ranks!r}")
        for f in fields(self)[1:]:
            value = getattr(self, f.name)
            if value is None:
                continue
            if not _is_size(value):
                raise ValueError(f"Plan: {PLAN_KEYS[f.name]} must be an int >= 1 or None, got {value!r}")
            if value % self.ranks:
                raise ValueError(f"{PLAN_KEYS[f.name]}={value} cannot be split over {self.ranks} processes")

    @classmethod
    def of(cls, cfg: Mapping, ranks: int = 1) -> Plan:
        """The plan of a full config (``policy.*``, ``env.*``) or of a policy's own config (``learn``, ``collect``).

        Example:
            >>> Plan.of({"learn": {"batch_size": 32}, "collect": {"n_sample": 8}}, ranks=2).rank_batch
            16
        """
        full = "policy" in cfg or "env" in cfg
        sizes = {}
        for name, dotted in PLAN_KEYS.items():
            value = dotted_get(cfg, dotted if full else dotted.removeprefix("policy."))
            sizes[name] = value if _is_size(value) else None
        return cls(ranks, **sizes)

    def _share(self, total: int | None) -> int | None:
        return None if total is None else total // self.ranks

    @property
    def rank_batch(self) -> int | None:
        """This rank's share of ``policy.learn.batch_size``."""
        return self._share(self.batch)

    @property
    def rank_n_sample(self) -> int | None:
        """This rank's share of ``policy.collect.n_sample`` (env steps per iteration)."""
        return self._share(self.n_sample)

    @property
    def rank_n_episode(self) -> int | None:
        """This rank's share of ``policy.collect.n_episode``."""
        return self._share(self.n_episode)

    @property
    def rank_envs(self) -> int | None:
        """This rank's share of ``env.collector_env_num`` (its training envs)."""
        return self._share(self.envs)
