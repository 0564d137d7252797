"""Configuration: read DI-engine style Python configs, merge them over defaults, validate strictly.

:func:`load_config` is the one way from a config (a file, a shipped config's name, a dict) to a run's compiled
config (:mod:`ding_dist.config.compiled`); :func:`read_config` and :func:`save_config` read and write config files
as they are. The schema step it runs, :func:`~ding_dist.config.compile.compile_config` (a config merged over the
defaults you give), lives in :mod:`ding_dist.config.compile`; DI-engine's files are translated by
:mod:`ding_dist.config.ding`, imported for those files only.

Example:
    >>> from ding_dist.config import load_config
    >>> cfg = load_config("cartpole_ppo", seed=1, overrides=["policy.learn.batch_size=128"])
    >>> cfg.seed, cfg.policy.learn.batch_size
    (1, 128)
"""

from ding_dist.config.compile import (
    CREATE_SCHEMA,
    DEFAULT_EXP_NAME,
    apply_overrides,
    config_errors,
    create_config_errors,
    parse_override,
    validate_config,
)
from ding_dist.config.compiled import CompiledConfig, ConfigSource, is_compiled, load_config, run_defaults
from ding_dist.config.errors import ConfigError, raise_all
from ding_dist.config.loader import read_config, save_config, save_config_data
from ding_dist.config.rules import check_values, value_errors
from ding_dist.config.split import split_config, split_errors, to_ddp_config
from ding_dist.config.sync_rules import check_sync_config

__all__ = [
    "CREATE_SCHEMA",
    "CompiledConfig",
    "ConfigError",
    "ConfigSource",
    "DEFAULT_EXP_NAME",
    "apply_overrides",
    "check_sync_config",
    "check_values",
    "config_errors",
    "create_config_errors",
    "is_compiled",
    "load_config",
    "parse_override",
    "raise_all",
    "read_config",
    "run_defaults",
    "save_config",
    "save_config_data",
    "split_config",
    "split_errors",
    "to_ddp_config",
    "validate_config",
    "value_errors",
]
