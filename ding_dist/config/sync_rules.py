"""The ``policy.sync`` block: an algorithm of the registry and only the options it takes.

The registry of :mod:`ding_dist.sync.algorithms` says what is valid: an algorithm's ``options`` (for its
state) and ``optimizer_options`` (for the optimizer it needs, e.g. qadam's ``warmup_steps``). The sync
package is imported when a block is checked, not with this module, so reading a config never imports torch.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from ding_dist.config.errors import ConfigError

__all__ = ["check_sync_config"]


def check_sync_config(sync: Mapping[str, Any]) -> None:
    """Raise ``ConfigError`` naming ``policy.sync.algorithm`` or the option that the algorithm does not take.

    Example:
        >>> check_sync_config({"algorithm": "bytegrad", "options": {"error_feedback": True}})
        >>> check_sync_config({"algorithm": "qadam", "options": {"warmup_steps": 10}})
    """
    from ding_dist.sync import available_algorithms, get_algorithm  # torch: only when a block is checked

    name = sync.get("algorithm", "gradient_allreduce")
    try:
        algo = get_algorithm(name)
    except (ValueError, TypeError):
        close = difflib.get_close_matches(str(name), available_algorithms(), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError(
            f"config key 'policy.sync.algorithm' must be one of {available_algorithms()}, got {name!r}{hint}"
        ) from None
    valid = set(algo.options) | set(algo.optimizer_options)
    for key in sync.get("options") or {}:
        if key not in valid:
            close = difflib.get_close_matches(key, sorted(valid), n=1)
            hint = f" (did you mean 'policy.sync.options.{close[0]}'?)" if close else ""
            raise ConfigError(
                f"unknown config key 'policy.sync.options.{key}' for algorithm {algo.name!r}; "
                f"valid options: {', '.join(sorted(valid)) or 'none'}{hint}"
            )
