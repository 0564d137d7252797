"""A call that falls back to a default value when it raises: ``error_wrapper``, kept from DI-engine's
``ding.utils.pytorch_ddp_dist_helper`` (its ``to_ddp_config`` is a config operation: :mod:`ding_dist.config.split`)."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)


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
