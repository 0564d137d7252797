"""The one exception type of the config package."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["ConfigError", "raise_all"]


class ConfigError(ValueError):
    """A config file or value is wrong; the message names the key/path and what was expected.

    ``errors`` lists every problem found (one for most errors; :func:`raise_all` gathers several).

    Example:
        >>> raise ConfigError("unknown config key 'policy.lr' (did you mean 'policy.learn.lr'?)")
        Traceback (most recent call last):
        ...
        ding_dist.config.errors.ConfigError: unknown config key 'policy.lr' (did you mean 'policy.learn.lr'?)
    """

    def __init__(self, message: str, errors: Sequence[str] | None = None) -> None:
        super().__init__(message)
        self.errors: list[str] = list(errors) if errors else [message]


def raise_all(errors: Sequence[str]) -> None:
    """Raise one :class:`ConfigError` for every message in ``errors`` (nothing when it is empty).

    One error keeps its own line; several are ``"N config errors: a; b; ..."``, so the CLI still prints
    one line and a user fixes a file in one go.

    Example:
        >>> raise_all(["config key 'a' must be >= 1, got 0", "unknown config key 'b'"])
        Traceback (most recent call last):
        ...
        ding_dist.config.errors.ConfigError: 2 config errors: config key 'a' must be >= 1, got 0; unknown config key 'b'
    """
    if len(errors) == 1:
        raise ConfigError(errors[0])
    if errors:
        raise ConfigError(f"{len(errors)} config errors: " + "; ".join(errors), errors)
