"""Population-based training: the exploit/explore math and the copy of a member's state through collectives.

K members train the same config side by side; every ``pbt.interval`` env steps each is scored by its latest
evaluation return, the bottom ``quantile`` of the population copies a member chosen uniformly from the top
``quantile`` (truncation selection: weights, optimizer state, hyperparameters) and then perturbs the copied
hyperparameters (explore: each multiplied by one of ``perturb``, or drawn afresh from ``[min, max]`` with
probability ``resample_probability``; always clipped to ``[min, max]``). Every random choice comes from
``numpy.random.default_rng([pbt.seed, round])`` (round 0: the members' initial values), so every rank computes the
same decisions and a population replays. The training loop's glue is :mod:`ding_dist.entry.loops.pbt`.

The ``pbt`` config section and its checks: :mod:`ding_dist.config.pbt`.

Example::

    specs = parse_hyperparams({"learn.learning_rate": {"min": 1e-4, "max": 1e-2, "log": True}})
    start = initial_values(specs, population=4, seed=0, config_values={"learn.learning_rate": 1e-3})
    plan = select_exploits([10.0, 50.0, 30.0, 20.0], quantile=0.25, rng=round_rng(0, 1))  # {0: 1}
    explore(start[1], specs, round_rng(0, 1))
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from ding_dist.comm import broadcast_object, get_rank
from ding_dist.config.pbt import HyperparamSpec

__all__ = ["copy_member_states", "explore", "initial_values", "round_rng", "select_exploits"]


def round_rng(seed: int, round_: int) -> np.random.Generator:
    """The generator of exploit round ``round_`` (0: the initial draws), the same on every rank.

    Example:
        >>> float(round_rng(0, 1).random()) == float(round_rng(0, 1).random())
        True
    """
    return np.random.default_rng([int(seed), int(round_)])


def initial_values(
    specs: Mapping[str, HyperparamSpec], population: int, seed: int, config_values: Mapping[str, float]
) -> list[dict[str, float]]:
    """Each member's start values: drawn from ``[min, max]`` (``init="sample"``) or the config's, in member order,
    keys sorted, from :func:`round_rng` ``(seed, 0)``.

    Example:
        >>> from ding_dist.config.pbt import parse_hyperparams
        >>> specs = parse_hyperparams({"learn.learning_rate": {"min": 1e-4, "max": 1e-2, "init": "config"}})
        >>> initial_values(specs, 2, 0, {"learn.learning_rate": 1e-3})
        [{'learn.learning_rate': 0.001}, {'learn.learning_rate': 0.001}]
    """
    rng = round_rng(seed, 0)
    out = []
    for _ in range(population):
        values = {}
        for key in sorted(specs):
            spec = specs[key]
            values[key] = spec.sample(rng) if spec.init == "sample" else spec.clip(float(config_values[key]))
        out.append(values)
    return out


def _score(value: Any) -> float:
    """A member's score: its evaluation return; none yet (or NaN) ranks below every real one."""
    if value is None or math.isnan(float(value)):
        return -math.inf
    return float(value)


def select_exploits(scores: Sequence[float | None], quantile: float, rng: np.random.Generator) -> dict[int, int]:
    """Truncation selection: ``{bottom member: top member it copies}``. ``n = ceil(K * quantile)`` (at most K // 2)
    members rank at the top and at the bottom (score, then the lower member index first among ties); each bottom
    member, in index order, copies one top member drawn uniformly from ``rng``, unless that one scores no higher
    (then it keeps its own state).

    Example:
        >>> select_exploits([10.0, 50.0, 30.0, 20.0], 0.25, round_rng(0, 1))
        {0: 1}
    """
    k = len(scores)
    n = min(k // 2, max(1, math.ceil(k * quantile)))
    if n == 0:
        return {}
    keyed = [_score(s) for s in scores]
    order = sorted(range(k), key=lambda i: (-keyed[i], i))  # best first
    top, bottom = order[:n], sorted(order[k - n :])
    plan = {}
    for loser in bottom:
        winner = top[int(rng.integers(n))]
        if keyed[loser] < keyed[winner]:
            plan[loser] = winner
    return plan


def explore(
    values: Mapping[str, float], specs: Mapping[str, HyperparamSpec], rng: np.random.Generator
) -> dict[str, float]:
    """Perturbed copies of ``values``: each key (sorted) multiplied by one of its ``perturb`` factors, or drawn
    afresh with probability ``resample_probability``; clipped to ``[min, max]``.

    Example:
        >>> from ding_dist.config.pbt import parse_hyperparams
        >>> specs = parse_hyperparams({"learn.clip_ratio": {"min": 0.1, "max": 0.3, "perturb": [2.0]}})
        >>> explore({"learn.clip_ratio": 0.2}, specs, round_rng(0, 1))
        {'learn.clip_ratio': 0.3}
    """
    out = {}
    for key in sorted(specs):
        spec = specs[key]
        if spec.resample_probability > 0 and rng.random() < spec.resample_probability:
            value = spec.sample(rng)
        else:
            value = float(values[key]) * spec.perturb[int(rng.integers(len(spec.perturb)))]
        out[key] = spec.clip(value)
    return out


def _to_cpu(obj: Any) -> Any:
    """``obj`` with every tensor moved to the CPU (state dicts travel pickled; a CUDA tensor must not)."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, Mapping):
        return {k: _to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_cpu(v) for v in obj)
    return obj


def copy_member_states(
    policy: Any, plan: Mapping[int, int], member: int, leads: Sequence[int], group: Any = None
) -> bool:
    """The exploit copy, collective over ``group`` (default: the world, every rank of every member): for each
    member copied (each distinct value of ``plan``, in order) one broadcast of its ``policy.state_dict()`` (weights,
    optimizer state, train iteration) from its lead rank ``leads[winner]``; every rank of a member that copies it
    loads it, bitwise. Returns True when this rank's ``member`` loaded another's state.

    Example::

        copy_member_states(policy, {0: 1}, member=my_member, leads=[0, 2])  # member 0's ranks take member 1's state
    """
    me = get_rank()
    copied = False
    for winner in sorted(set(plan.values())):
        src = leads[winner]
        state = broadcast_object(_to_cpu(policy.state_dict()) if me == src else None, src=src, group=group)
        if plan.get(member) == winner:
            policy.load_state_dict(state)
            copied = True
    return copied
