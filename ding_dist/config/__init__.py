"""Configuration: read DI-engine style Python configs, merge them over defaults, validate strictly.

Example:
    >>> from ding_dist.config import compile_config
    >>> cfg = compile_config({"policy": {"lr": 0.1}}, {}, defaults={"policy": {"lr": 0.01}})
    >>> cfg.policy.lr
    0.1
"""

from ding_dist.config.compile import (
    DEFAULT_EXP_NAME,
    apply_overrides,
    compile_config,
    parse_override,
    validate_config,
)
from ding_dist.config.ding_dialect import looks_like_ding, translate_ding_config, translate_if_ding
from ding_dist.config.errors import ConfigError
from ding_dist.config.loader import read_config, save_config
from ding_dist.config.rules import VALUE_RULES, check_values

__all__ = [
    "ConfigError",
    "DEFAULT_EXP_NAME",
    "VALUE_RULES",
    "apply_overrides",
    "check_values",
    "compile_config",
    "parse_override",
    "read_config",
    "save_config",
    "validate_config",
    "looks_like_ding",
    "translate_ding_config",
    "translate_if_ding",
]
