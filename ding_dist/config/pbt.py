"""The ``pbt`` config section (population-based training): its defaults, the checks of its values and of the
hyperparameters a policy can change mid-run. What the section does: :mod:`ding_dist.worker.pbt`.

The keys (``population``, ``interval``, ``quantile``, ``hyperparams``, ``seed``) are declared once, with their
defaults, meanings and rules, in :data:`~ding_dist.config.sections.PBT_KEYS` (``ding-dist config show``,
docs/config_keys.md).

Each entry of ``hyperparams``: ``min`` and ``max`` (required), ``perturb`` (factors, default ``[0.8, 1.2]``),
``resample_probability`` (default 0), ``log`` (draw log-uniformly, default False), ``init`` (``"sample"``: each
member draws its start value from ``[min, max]``, the default; ``"config"``: every member starts from the config's).

Example:
    >>> parse_hyperparams({"learn.learning_rate": {"min": 1e-4, "max": 1e-2, "log": True}})["learn.learning_rate"].log
    True
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from easydict import EasyDict

from ding_dist.config.errors import ConfigError, raise_all
from ding_dist.config.rules import section_errors
from ding_dist.config.sections import PBT_KEYS

if TYPE_CHECKING:  # numpy is not imported to read a config
    import numpy as np

__all__ = ["HyperparamSpec", "check_pbt_config", "parse_hyperparams", "pbt_default_config", "population_error"]

SPEC_KEYS = ("min", "max", "perturb", "resample_probability", "log", "init")
DEFAULT_PERTURB = (0.8, 1.2)


def pbt_default_config() -> EasyDict:
    """Defaults of the ``pbt`` config section (:data:`~ding_dist.config.sections.PBT_KEYS`).

    Example:
        >>> pbt_default_config().population
        1
    """
    return PBT_KEYS.defaults()


@dataclass(frozen=True)
class HyperparamSpec:
    """How one hyperparameter is drawn and perturbed (one entry of ``pbt.hyperparams``)."""

    key: str
    low: float
    high: float
    perturb: tuple[float, ...] = DEFAULT_PERTURB
    resample_probability: float = 0.0
    log: bool = False
    init: str = "sample"

    def sample(self, rng: np.random.Generator) -> float:
        """A fresh value from ``[low, high]`` (log-uniform with ``log``)."""
        if self.log:
            return float(math.exp(rng.uniform(math.log(self.low), math.log(self.high))))
        return float(rng.uniform(self.low, self.high))

    def clip(self, value: float) -> float:
        return float(min(max(value, self.low), self.high))


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def parse_hyperparams(hyperparams: Mapping[str, Any]) -> dict[str, HyperparamSpec]:
    """The specs of ``pbt.hyperparams``, by key; ``ConfigError`` naming the first bad entry.

    Example:
        >>> parse_hyperparams({"learn.learning_rate": {"min": 1e-4, "max": 1e-2}})["learn.learning_rate"].perturb
        (0.8, 1.2)
    """
    if not isinstance(hyperparams, Mapping):
        raise ConfigError(f"config key 'pbt.hyperparams' must be a dict of key -> dict(min=.., max=..), got "
                          f"{hyperparams!r}")  # fmt: skip
    specs = {}
    for key, entry in hyperparams.items():
        where = f"config key 'pbt.hyperparams.{key}'"
        if not isinstance(entry, Mapping):
            raise ConfigError(f"{where} must be a dict with min and max (e.g. dict(min=1e-4, max=1e-2)), got {entry!r}")
        unknown = sorted(set(entry) - set(SPEC_KEYS))
        if unknown:
            raise ConfigError(f"{where} has unknown entries {unknown}; valid: {', '.join(SPEC_KEYS)}")
        low, high = entry.get("min"), entry.get("max")
        if not (_number(low) and _number(high) and low < high):
            raise ConfigError(f"{where} needs numbers min < max, got min={low!r}, max={high!r}")
        perturb = entry.get("perturb", DEFAULT_PERTURB)
        if (isinstance(perturb, (str, bytes)) or not isinstance(perturb, Sequence) or not perturb
                or not all(_number(f) and f > 0 for f in perturb)):  # fmt: skip
            raise ConfigError(f"{where}: perturb must be a non-empty list of positive factors, got {perturb!r}")
        prob = entry.get("resample_probability", 0.0)
        if not (_number(prob) and 0.0 <= prob <= 1.0):
            raise ConfigError(f"{where}: resample_probability must be in [0, 1], got {prob!r}")
        log = entry.get("log", False)
        if not isinstance(log, bool):
            raise ConfigError(f"{where}: log must be True or False, got {log!r}")
        if log and low <= 0:
            raise ConfigError(f"{where}: log=True needs min > 0, got min={low!r}")
        init = entry.get("init", "sample")
        if init not in ("sample", "config"):
            raise ConfigError(f"{where}: init must be 'sample' or 'config', got {init!r}")
        specs[str(key)] = HyperparamSpec(str(key), float(low), float(high), tuple(float(f) for f in perturb),
                                         float(prob), log, init)  # fmt: skip
    return specs


def check_pbt_config(
    pbt: Mapping[str, Any], policy_cls: Any, *, actors: int = 0, preempt: bool = False, policy_type: str | None = None
) -> dict[str, HyperparamSpec]:
    """Raise ``ConfigError`` naming the ``pbt.*`` key whose value is out of range, or a hyperparameter the policy
    cannot change mid-run (not in ``policy_cls.pbt_keys``; ``policy_type`` names it); return the parsed specs. A
    population (``population > 1``) trains data-parallel members that reach each exploit step at the same env step:
    ``actors`` (the actor-learner mode) and ``preempt`` (``policy.collect.preempt``) are refused with it.

    Example::

        check_pbt_config({"population": 4, "hyperparams": {"learn.batch_size": {"min": 32, "max": 256}}}, PPOPolicy)
        # ConfigError: config key 'pbt.hyperparams' names 'learn.batch_size', which policy ... cannot change mid-run
    """
    raise_all(section_errors("pbt", pbt))
    population = pbt.get("population", 1)
    if population > 1 and actors:
        raise ConfigError(
            f"config key 'pbt.population' is {population} but the run has actors (actor_learner.actors={actors}): "
            "a population trains data-parallel members only"
        )
    if population > 1 and preempt:
        raise ConfigError(f"config key 'pbt.population' is {population} with policy.collect.preempt=True: members "
                          "must reach each exploit step at the same env step; set preempt False")  # fmt: skip
    specs = parse_hyperparams(pbt.get("hyperparams") or {})
    allowed = tuple(getattr(policy_cls, "pbt_keys", ()))
    for key in specs:
        if key not in allowed:
            can = ", ".join(allowed) if allowed else "none"
            raise ConfigError(
                f"config key 'pbt.hyperparams' names {key!r}, which policy {policy_type or policy_cls.__name__!r} "
                f"cannot change mid-run; it can change: {can}"
            )
    return specs


def population_error(population: int, world_size: int) -> str | None:
    """Why ``population`` members cannot share ``world_size`` ranks (None: they can: each member takes
    ``world_size // population`` ranks).

    Example:
        >>> print(population_error(3, 4))  # doctest: +NORMALIZE_WHITESPACE
        population 3 does not divide the 4 processes: each member needs the same number of ranks; with 4
        processes use a population of 1, 2 or 4, or start 3, 6, 9 ... processes (--nproc)
    """
    if population <= 1 or (population <= world_size and world_size % population == 0):
        return None
    works = ", ".join(str(k) for k in range(1, world_size + 1) if world_size % k == 0)
    works = works.rsplit(", ", 1)[0] + " or " + works.rsplit(", ", 1)[1] if "," in works else works
    start = ", ".join(str(population * m) for m in (1, 2, 3))
    what = "is larger than" if population > world_size else "does not divide"
    return (f"population {population} {what} the {world_size} process{'es' if world_size > 1 else ''}: each member "
            f"needs the same number of ranks; with {world_size} process{'es' if world_size > 1 else ''} use a "
            f"population of {works}, or start {start} ... processes (--nproc)")  # fmt: skip
