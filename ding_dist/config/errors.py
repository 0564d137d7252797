"""The one exception type of the config package."""

from __future__ import annotations

__all__ = ["ConfigError"]


class ConfigError(ValueError):
    """A config file or value is wrong; the message names the key/path and what was expected.

    Example:
        >>> raise ConfigError("unknown config key 'policy.lr' (did you mean 'policy.learn.lr'?)")
        Traceback (most recent call last):
        ...
        ding_dist.config.errors.ConfigError: unknown config key 'policy.lr' (did you mean 'policy.learn.lr'?)
    """
