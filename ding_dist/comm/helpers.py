"""Small helpers kept from DI-engine's API: ``error_wrapper`` and ``to_ddp_config``."""

from __future__ import annotations

import copy
import functools
import logging
from collections.abc import Callable
from typing import Any

from .link import current_link

logger = logging.getLogger(__name__)

# Per-process quantities that a run of N processes divides by N, so the global values stay the same.
DDP_SPLIT_KEYS = ("batch_size", "learn.batch_size", "collect.n_sample", "collect.n_episode")


def error_wrapper(fn: Callable[..., Any], default_ret: Any, warning_msg: str | None = None) -> Callable[..., Any]:
    """Wrap ``fn`` so an exception is logged as a warning and ``default_ret`` is returned instead.

    Use it only where a failure is truly optional; the library's own helpers never swallow errors.

    Example:
        >>> safe_int = error_wrapper(int, default_ret=-1)
        >>> safe_int("12"), safe_int("twelve")
        (12, -1)
    """
    if not callable(fn):
        raise TypeError(f"error_wrapper expects a callable, got {fn!r}")

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            logger.warning(
                "%s%s raised %s: %s; returning %r",
                f"{warning_msg} " if warning_msg else "",
                getattr(fn, "__name__", fn),
                type(exc).__name__,
                exc,
                default_ret,
            )
            return default_ret

    return wrapper


def to_ddp_config(cfg: Any, world_size: int | None = None) -> Any:
    """Return a copy of ``cfg`` with per-process sizes divided by the world size.

    Divides ``policy.batch_size``, ``policy.learn.batch_size``, ``policy.collect.n_sample`` and
    ``policy.collect.n_episode`` (those present) so N processes together use the global values, and logs
    each change. A value that the world size does not divide raises ``ConfigError`` (a ``ValueError``)
    naming it and the nearest values that split: rounding would silently change the global batch.

    Example:
        >>> from easydict import EasyDict
        >>> cfg = EasyDict(policy=dict(learn=dict(batch_size=64)))
        >>> to_ddp_config(cfg, world_size=2).policy.learn.batch_size
        32
    """
    world_size = current_link().world_size() if world_size is None else world_size
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    cfg = copy.deepcopy(cfg)
    policy = cfg.get("policy") if hasattr(cfg, "get") else None
    if world_size == 1 or policy is None:
        return cfg
    from ding_dist.config.errors import raise_all
    from ding_dist.config.rules import split_errors

    raise_all(split_errors(cfg, world_size))
    for dotted in DDP_SPLIT_KEYS:
        *parents, leaf = dotted.split(".")
        node = policy
        for key in parents:
            node = node.get(key) if hasattr(node, "get") else None
        if node is None or not hasattr(node, "get") or not isinstance(node.get(leaf), int):
            continue
        value = node[leaf]
        node[leaf] = value // world_size
        logger.info(
            "to_ddp_config: policy.%s %d -> %d per process (world size %d)", dotted, value, node[leaf], world_size
        )
    return cfg
