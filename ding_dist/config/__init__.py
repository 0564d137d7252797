"""Configuration: read DI-engine style Python configs, merge them over defaults, validate strictly.

The DI-engine translation (``translate_ding_config``, ``translate_if_ding``: :mod:`ding_dist.config.ding`) is
imported on first use (PEP 562): only DI-engine files need it (:func:`looks_like_ding` tells them apart).

Example:
    >>> from ding_dist.config import compile_config
    >>> cfg = compile_config({"policy": {"lr": 0.1}}, {}, defaults={"policy": {"lr": 0.01}})
    >>> cfg.policy.lr
    0.1
"""

from typing import Any

from ding_dist.config.compile import (
    CREATE_SCHEMA,
    DEFAULT_EXP_NAME,
    apply_overrides,
    compile_config,
    config_errors,
    create_config_errors,
    parse_override,
    validate_config,
)
from ding_dist.config.ding_marks import looks_like_ding
from ding_dist.config.errors import ConfigError, raise_all
from ding_dist.config.loader import read_config, save_config, save_config_data
from ding_dist.config.rules import VALUE_RULES, check_values, value_errors
from ding_dist.config.split import split_config, split_errors, to_ddp_config
from ding_dist.config.sync_rules import check_sync_config

__all__ = [
    "CREATE_SCHEMA",
    "ConfigError",
    "config_errors",
    "create_config_errors",
    "raise_all",
    "value_errors",
    "DEFAULT_EXP_NAME",
    "VALUE_RULES",
    "apply_overrides",
    "check_sync_config",
    "check_values",
    "compile_config",
    "parse_override",
    "read_config",
    "save_config_data",
    "save_config",
    "validate_config",
    "looks_like_ding",
    "translate_ding_config",
    "translate_if_ding",
    "split_config",
    "split_errors",
    "to_ddp_config",
]

_TRANSLATION = ("translate_ding_config", "translate_if_ding")


def __getattr__(name: str) -> Any:
    if name in _TRANSLATION:
        from ding_dist.config import ding

        value = getattr(ding, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
