"""Global sizes shared out over processes: what each of N data-parallel ranks (or learners) takes.

A config states global quantities: the minibatch (``policy.learn.batch_size``), the env steps of one
iteration (``policy.collect.n_sample``) and the training envs (``env.collector_env_num``). N processes
each take ``1/N`` of every one, so every env's rollout keeps its length ``T = n_sample / collector_env_num``
(GAE and V-trace see the same horizon on 1 and N processes) and N ranks together apply the update of one.
A size N does not divide is refused, naming the nearest sizes that split (rounding would silently change
the global batch or the horizon).

The pipelines keep the config's totals and read each rank's share from one
:class:`~ding_dist.utils.plan.Plan` (:func:`split_plan`: ``plan.rank_batch``, ``plan.rank_envs``, ...); a
policy computes the same plan over its sync group. :func:`split_config` writes the shares into a copy of the
config, for scripts that size things from the config themselves (never hand that copy to a policy: a policy's
config holds run totals).

DI-engine's ``to_ddp_config`` divides the batch and ``n_sample`` but keeps ``collector_env_num`` per process,
so its rollouts get N times shorter with N processes; :func:`to_ddp_config` here keeps that meaning for
DI-engine-style scripts that call it themselves.

Example::

    plan = split_plan(global_cfg, parts=2)      # plan.rank_batch, plan.rank_n_sample, plan.rank_envs
    cfg = split_config(global_cfg, parts=2)     # a copy holding those shares
"""

from __future__ import annotations

import copy
import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any

from ding_dist.config.errors import raise_all
from ding_dist.utils.plan import PLAN_KEYS, Plan, dotted_get

__all__ = ["DDP_SPLIT_KEYS", "SPLIT_KEYS", "split_config", "split_errors", "split_plan", "to_ddp_config"]

logger = logging.getLogger(__name__)

#: What DI-engine's ``to_ddp_config`` divides (the batch and the samples of one iteration).
DDP_SPLIT_KEYS = ("policy.batch_size", "policy.learn.batch_size", "policy.collect.n_sample", "policy.collect.n_episode")
#: What the pipelines divide: the same, and the training envs (so the rollout horizon stays).
SPLIT_KEYS = (*DDP_SPLIT_KEYS, "env.collector_env_num")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _counts(values: Sequence[int], most: int = 12) -> str:
    """``"1, 2, 4 or 8"``: the counts that divide every one of ``values`` (the divisors of their gcd), the first
    ``most`` of them."""
    g = math.gcd(*values)
    counts = [str(d) for d in range(1, g + 1) if g % d == 0][:most]
    return counts[0] if len(counts) == 1 else f"{', '.join(counts[:-1])} or {counts[-1]}"


def split_errors(cfg: Mapping, parts: int, flag: str = "--nproc", keys: Sequence[str] = SPLIT_KEYS) -> list[str]:
    """One message per global size in ``keys`` that ``parts`` processes cannot share evenly, saying what to set: the
    nearest sizes that split (``--set KEY=...``), and in the last message the counts of ``flag`` (the option that
    sets ``parts``, e.g. ``--learners``) that split every size of the config.

    Example:
        >>> split_errors({"policy": {"learn": {"batch_size": 256}}, "env": {"collector_env_num": 8}}, 4)
        []
        >>> error = split_errors({"policy": {"learn": {"batch_size": 256}}, "env": {"collector_env_num": 8}}, 64)
        >>> error[0].split(": ", 1)[1]
        '--set env.collector_env_num=64; or --nproc 1, 2, 4 or 8, which split every size'
    """
    errors, sizes = [], []
    for dotted in keys:
        value = dotted_get(cfg, dotted)
        if not _is_int(value) or value < 1:
            continue
        sizes.append(value)
        if value % parts:
            low, high = value - value % parts, value - value % parts + parts
            near = f"{low} or {high}" if low > 0 else str(high)
            errors.append(f"{dotted}={value} cannot be split over {parts} processes: --set {dotted}={near}")
    if errors:
        errors[-1] += f"; or {flag} {_counts(sizes)}, which split every size"
    return errors


def _divide(cfg: Any, parts: int, keys: Sequence[str], flag: str, why: str, in_place: bool = False) -> Any:
    cfg = cfg if in_place else copy.deepcopy(cfg)
    if parts == 1 or not hasattr(cfg, "get"):
        return cfg
    raise_all(split_errors(cfg, parts, flag, keys))
    for dotted in keys:
        *parents, leaf = dotted.split(".")
        node = dotted_get(cfg, ".".join(parents)) if parents else cfg
        if isinstance(node, Mapping) and _is_int(node.get(leaf)):
            value = node[leaf]
            node[leaf] = value // parts
            logger.info("%s: %s %d -> %d per process (%d processes)", why, dotted, value, node[leaf], parts)
    return cfg


def split_plan(cfg: Any, parts: int, flag: str = "--nproc") -> Plan:
    """The :class:`~ding_dist.utils.plan.Plan` of a config's run totals over ``parts`` data-parallel ranks (or
    learners: ``flag="--learners"``); the config is not changed. A size ``parts`` does not divide raises
    ``ConfigError`` naming the nearest ones that do, and the option counts that divide every size.

    Example:
        >>> plan = split_plan({"env": {"collector_env_num": 8}, "policy": {"collect": {"n_sample": 256}}}, parts=2)
        >>> plan.rank_envs, plan.rank_n_sample   # 128 steps per env either way
        (4, 128)
    """
    if isinstance(parts, bool) or not isinstance(parts, int) or parts < 1:
        raise ValueError(f"parts must be an int >= 1, got {parts!r}")
    raise_all(split_errors(cfg, parts, flag, SPLIT_KEYS))
    plan = Plan.of(cfg, parts)
    if parts > 1:
        for name, dotted in PLAN_KEYS.items():
            if getattr(plan, name) is not None:
                total, share = getattr(plan, name), getattr(plan, f"rank_{name}")
                logger.info("%s=%d: %d per process (%d processes)", dotted, total, share, parts)
    return plan


def split_config(cfg: Any, parts: int, flag: str = "--nproc") -> Any:
    """A copy of ``cfg`` with this process's share of every global size in :data:`SPLIT_KEYS` (``parts``
    data-parallel ranks, or learners: ``flag="--learners"``); a size ``parts`` does not divide raises
    ``ConfigError`` naming the nearest ones that do.

    Example:
        >>> from easydict import EasyDict
        >>> cfg = EasyDict(env=dict(collector_env_num=8), policy=dict(collect=dict(n_sample=256)))
        >>> part = split_config(cfg, parts=2)
        >>> part.env.collector_env_num, part.policy.collect.n_sample   # 16 steps per env either way
        (4, 128)
    """
    if isinstance(parts, bool) or not isinstance(parts, int) or parts < 1:
        raise ValueError(f"parts must be an int >= 1, got {parts!r}")
    return _divide(cfg, parts, SPLIT_KEYS, flag, "split_config")


def to_ddp_config(cfg: Any, world_size: int | None = None, in_place: bool = False) -> Any:
    """Return a copy of ``cfg`` (``in_place``: ``cfg`` itself, as DI-engine does) with DI-engine's per-process sizes
    divided by the world size.

    Divides ``policy.batch_size``, ``policy.learn.batch_size``, ``policy.collect.n_sample`` and
    ``policy.collect.n_episode`` (those present) so N processes together use the global values, and logs
    each change; ``env.collector_env_num`` stays per process, as in DI-engine (the pipelines split it too:
    :func:`split_config`). A value that the world size does not divide raises ``ConfigError`` (a
    ``ValueError``) naming it and the nearest values that split: rounding would silently change the global batch.

    Example:
        >>> from easydict import EasyDict
        >>> cfg = EasyDict(policy=dict(learn=dict(batch_size=64)))
        >>> to_ddp_config(cfg, world_size=2).policy.learn.batch_size
        32
    """
    if world_size is None:
        from ding_dist.comm import get_world_size  # torch only when the running world is asked

        world_size = get_world_size()
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    return _divide(cfg, world_size, DDP_SPLIT_KEYS, "--nproc", "to_ddp_config", in_place)
