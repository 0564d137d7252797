"""Merge a user config over component defaults, apply ``--set`` overrides, and validate strictly.

DI-engine merges a user's ``main_config`` over each component's ``default_config()`` and silently keeps
any misspelled key. Here the defaults are also the schema: every key the user gives must exist in the
defaults (or sit inside an open dict, i.e. a default of ``{}``), and its value must have the default's
type. Errors name the full dotted key and suggest the closest valid one.
"""

from __future__ import annotations

import ast
import copy
import difflib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from easydict import EasyDict

from ding_dist.config.errors import ConfigError, raise_all
from ding_dist.config.rules import short_repr, value_errors
from ding_dist.config.sections import TOP_KEYS

__all__ = [
    "CREATE_SCHEMA",
    "DEFAULT_EXP_NAME",
    "apply_overrides",
    "compile_config",
    "config_errors",
    "create_config_errors",
    "parse_override",
    "validate_config",
]

DEFAULT_EXP_NAME: str = TOP_KEYS["exp_name"].default
# Top-level keys that every config may have besides the component sections.
_TOP_LEVEL_SCHEMA: dict[str, Any] = dict(TOP_KEYS.defaults())
_CREATE_KEY = "create_config"
#: The sections of ``create_config`` and the keys each may hold (DI-engine's layout; ``import_names`` is
#: accepted and unused, as every component here is registered on import).
CREATE_SCHEMA: dict[str, tuple[str, ...]] = {
    "env": ("type", "import_names"),
    "env_manager": ("type", "import_names"),
    "policy": ("type", "import_names"),
    "replay_buffer": ("type", "import_names"),
}
_MISSING = object()


def to_plain(obj: Any) -> Any:
    """Recursively turn mappings (EasyDict included) into plain dicts; lists/tuples keep their type."""
    if isinstance(obj, Mapping):
        return {k: to_plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_plain(v) for v in obj)
    return copy.deepcopy(obj)


def _join(path: Sequence[str], key: Any) -> str:
    return ".".join([*path, str(key)])


def _is_open(default: Any) -> bool:
    """A default of None, or an empty dict, accepts anything below it."""
    return default is None or (isinstance(default, Mapping) and len(default) == 0)


def _deep_merge(default: Any, user: Any) -> Any:
    """Return ``user`` merged over ``default`` (user wins); neither argument is modified."""
    if isinstance(default, Mapping) and isinstance(user, Mapping) and len(default) > 0:
        out = to_plain(default)
        for key, value in user.items():
            out[key] = _deep_merge(default[key], value) if key in default else to_plain(value)
        return out
    return to_plain(user)


# ------------------------------------------------------------------------------------------ overrides
def _parse_value(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    return text


def parse_override(text: str) -> tuple[tuple[str, ...], Any]:
    """Parse ``"a.b.c=value"`` into ``(("a", "b", "c"), value)``.

    The value is read as a Python literal (``64``, ``1e-3``, ``True``, ``[1, 2]``, ``'x'``); ``true``,
    ``false``, ``none`` and ``null`` in any case are also understood; anything else stays a string.

    Example:
        >>> parse_override("policy.learn.batch_size=64")
        (('policy', 'learn', 'batch_size'), 64)
        >>> parse_override("env.env_id=CartPole-v1")
        (('env', 'env_id'), 'CartPole-v1')
    """
    if not isinstance(text, str):
        raise ConfigError(f"override must be a string 'key.path=value', got {short_repr(text)}")
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(
            f"bad override {short_repr(text)}: expected 'key.path=value', e.g. 'policy.learn.batch_size=64'"
        )
    parts = tuple(key.split("."))
    for part in parts:
        if not part or not part.isidentifier():
            raise ConfigError(
                f"bad override {short_repr(text)}: key path {short_repr(key)} must be dot-separated identifiers "
                "(e.g. 'policy.learn.batch_size')"
            )
    return parts, _parse_value(raw.strip())


def _default_at(schema: Any, parts: Sequence[str]) -> Any:
    node = schema
    for part in parts:
        if not isinstance(node, Mapping) or part not in node:
            return _MISSING
        node = node[part]
    return node


def apply_overrides(cfg: dict, overrides: Iterable[str], schema: Mapping | None = None) -> dict:
    """Apply ``"a.b=value"`` overrides to the plain dict ``cfg`` in place and return it.

    Missing intermediate dicts are created (validation then reports an unknown key with a suggestion).
    When ``schema`` says a key's default is a string, the raw text is kept as a string, so
    ``--set exp_name=2024`` does not turn into an int.

    Example:
        >>> apply_overrides({"policy": {"learn": {"batch_size": 32}}}, ["policy.learn.batch_size=64"])
        {'policy': {'learn': {'batch_size': 64}}}
    """
    _check_overrides(overrides)
    for text in overrides:
        parts, value = parse_override(text)
        if schema is not None and isinstance(_default_at(schema, parts), str) and not isinstance(value, str):
            value = text.partition("=")[2].strip()
        node = cfg
        for i, part in enumerate(parts[:-1]):
            child = node.get(part, _MISSING)
            if child is _MISSING:
                child = node[part] = {}
            elif not isinstance(child, dict):
                raise ConfigError(
                    f"bad override {short_repr(text)}: {'.'.join(parts[: i + 1])!r} is {short_repr(child)}, "
                    "not a dict, so it has no sub-keys"
                )
            node = child
        node[parts[-1]] = value
    return cfg


def _check_overrides(overrides: Any) -> None:
    if isinstance(overrides, (str, bytes)) or not isinstance(overrides, Iterable):
        raise ConfigError(f"overrides must be a sequence of 'key=value' strings, got {short_repr(overrides)}")


# ----------------------------------------------------------------------------------------- validation
def _all_paths(schema: Mapping, path: tuple[str, ...] = ()) -> list[str]:
    out = []
    for key, value in schema.items():
        out.append(_join(path, key))
        if isinstance(value, Mapping) and len(value) > 0:
            out.extend(_all_paths(value, (*path, str(key))))
    return out


def _suggest(key: str, path: tuple[str, ...], siblings: Iterable[Any], all_paths: list[str]) -> str | None:
    names = [str(s) for s in siblings]
    close = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
    if close:
        return _join(path, close[0])
    # The key may be right but misplaced (e.g. 'policy.batch_size' for 'policy.learn.batch_size').
    leaves = {p.rsplit(".", 1)[-1]: p for p in reversed(all_paths)}
    close = difflib.get_close_matches(key, list(leaves), n=1, cutoff=0.75)
    return leaves[close[0]] if close else None


def _type_name(value: Any) -> str:
    return type(value).__name__


def _type_error(key: str, value: Any, default: Any) -> str | None:
    """The message when ``value`` does not fit the type of ``default``, else None."""
    if default is None:
        return None
    if isinstance(default, bool):
        ok, expected = isinstance(value, bool), "bool"
    elif isinstance(default, int):
        ok, expected = isinstance(value, int) and not isinstance(value, bool), "int"
    elif isinstance(default, float):
        ok, expected = isinstance(value, (int, float)) and not isinstance(value, bool), "float"
    elif isinstance(default, str):
        ok, expected = isinstance(value, str), "str"
    elif isinstance(default, (list, tuple)):
        ok, expected = isinstance(value, (list, tuple)), "list or tuple"
    elif isinstance(default, Mapping):
        ok, expected = isinstance(value, Mapping), "dict"
    else:
        ok, expected = isinstance(value, type(default)), _type_name(default)
    if ok:
        return None
    return f"config key {key!r} = {short_repr(value)} has type {_type_name(value)}, expected {expected}"


def _unknown_key(full: str, key: str, path: tuple[str, ...], schema: Mapping, all_paths: list[str]) -> str:
    hint = _suggest(key, path, schema.keys(), all_paths)
    if hint:
        return f"unknown config key {full!r} (did you mean {hint!r}?)"
    where = f"under {'.'.join(path)!r}" if path else "at the top level"
    valid = ", ".join(sorted(str(k) for k in schema)) or "(none)"
    return f"unknown config key {full!r}; valid keys {where}: {valid}"


def _validate(
    value: Mapping, schema: Mapping, path: tuple[str, ...], all_paths: list[str], errors: dict[str, str]
) -> None:
    """Add ``{dotted key: message}`` to ``errors`` for every unknown or mistyped key below ``value``."""
    for key, sub in value.items():
        full = _join(path, key)
        if key not in schema:
            errors[full] = _unknown_key(full, str(key), path, schema, all_paths)
            continue
        default = schema[key]
        problem = _type_error(full, sub, default)
        if problem:
            errors[full] = problem
        elif isinstance(default, Mapping) and not _is_open(default):
            _validate(sub, default, (*path, str(key)), all_paths, errors)


def config_errors(cfg: Mapping, schema: Mapping) -> dict[str, str]:
    """``{dotted key: message}`` for every unknown or mistyped key of ``cfg`` against ``schema``.

    Example:
        >>> errors = config_errors({"lr": "x", "batch_sise": 1}, {"lr": 0.01, "batch_size": 32})
        >>> for key, message in errors.items():
        ...     print(key, "->", message)
        lr -> config key 'lr' = 'x' has type str, expected float
        batch_sise -> unknown config key 'batch_sise' (did you mean 'batch_size'?)
    """
    errors: dict[str, str] = {}
    _validate(cfg, schema, (), _all_paths(schema), errors)
    return errors


def validate_config(cfg: Mapping, schema: Mapping) -> None:
    """Check every key of ``cfg`` (recursively) against ``schema`` (the merged defaults).

    Rules: unknown key -> ConfigError naming it and the closest valid key; a value must have the
    default's type (int is fine for float, bool is not fine for int, list and tuple are interchangeable,
    a default of None accepts anything, a default of ``{}`` is an open dict).

    Example:
        >>> validate_config({"lr": 0.1}, {"lr": 0.01, "batch_size": 32})
        >>> validate_config({"batch_sise": 64}, {"lr": 0.01, "batch_size": 32})
        Traceback (most recent call last):
        ...
        ding_dist.config.errors.ConfigError: unknown config key 'batch_sise' (did you mean 'batch_size'?)

    Several problems are one ConfigError listing all of them.
    """
    raise_all(list(config_errors(cfg, schema).values()))


def _env_managers() -> list[str]:
    from ding_dist.envs.env import ENV_MANAGERS  # gymnasium: only once a config is compiled

    return sorted(ENV_MANAGERS)


def create_config_errors(create: Mapping) -> list[str]:
    """One message per unknown section or key of ``create_config`` and per unknown ``env_manager.type``.

    Example:
        >>> create_config_errors({"env_manger": {"type": "sync"}, "policy": {"type": "dqn"}})
        ["unknown config key 'create_config.env_manger' (did you mean 'create_config.env_manager'?)"]
    """
    errors = []
    for section, body in create.items():
        name = f"{_CREATE_KEY}.{section}"
        if section not in CREATE_SCHEMA:
            close = difflib.get_close_matches(str(section), list(CREATE_SCHEMA), n=1, cutoff=0.6)
            hint = f" (did you mean '{_CREATE_KEY}.{close[0]}'?)" if close else f"; valid: {', '.join(CREATE_SCHEMA)}"
            errors.append(f"unknown config key {name!r}{hint}")
            continue
        if not isinstance(body, Mapping):
            errors.append(f"config key {name!r} = {short_repr(body)} must be a dict such as {{'type': ...}}")
            continue
        for key in body:
            if key not in CREATE_SCHEMA[section]:
                close = difflib.get_close_matches(str(key), CREATE_SCHEMA[section], n=1, cutoff=0.6)
                valid = ", ".join(CREATE_SCHEMA[section])
                hint = f" (did you mean '{name}.{close[0]}'?)" if close else f"; valid: {valid}"
                errors.append(f"unknown config key '{name}.{key}'{hint}")
    manager = (create.get("env_manager") or {}) if isinstance(create.get("env_manager"), Mapping) else {}
    if manager.get("type") is not None:
        known = _env_managers()
        if manager["type"] not in known:
            close = difflib.get_close_matches(str(manager["type"]), known, n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            errors.append(
                f"config key 'create_config.env_manager.type' must be one of {known}, got "
                f"{short_repr(manager['type'])}{hint}"
            )
    return errors


# ------------------------------------------------------------------------------------------- compile
def compile_config(
    main_config: Mapping,
    create_config: Mapping | None,
    *,
    defaults: Mapping[str, Mapping],
    seed: int | None = None,
    overrides: Sequence[str] = (),
) -> EasyDict:
    """Merge ``main_config`` over ``defaults``, apply ``overrides``, validate, and return an EasyDict.

    ``defaults`` maps each top-level section to the default config of the component chosen for it.
    Besides those sections the top level may hold ``exp_name`` (str) and ``seed`` (int). The result has
    ``cfg.seed`` (the ``seed`` argument, else the config's, else 0), ``cfg.exp_name`` (default
    ``'default_experiment'``) and ``cfg.create_config`` (a copy of ``create_config``; an override
    ``create_config.env.type=...`` edits it). A ``create_config`` key inside ``main_config`` (as
    :func:`save_config` writes it) is used when the ``create_config`` argument is None. Besides its
    type, every value must lie in the range its key's rule gives (:func:`~ding_dist.config.rules.value_errors`)
    (e.g. ``batch_size >= 1``, learning rates > 0). ``create_config`` may only hold the sections and keys of
    :data:`CREATE_SCHEMA`, with a known ``env_manager.type``. Every problem found is reported in one
    :class:`ConfigError` (one line).

    Example:
        >>> defaults = {"policy": {"learn": {"batch_size": 32, "lr": 1e-3}}, "env": {"env_kwargs": {}}}
        >>> cfg = compile_config({"policy": {"learn": {"lr": 0.01}}}, {"policy": {"type": "dqn"}},
        ...                      defaults=defaults, seed=3, overrides=["policy.learn.batch_size=64"])
        >>> cfg.policy.learn.batch_size, cfg.policy.learn.lr, cfg.seed, cfg.create_config.policy.type
        (64, 0.01, 3, 'dqn')
    """
    if not isinstance(main_config, Mapping):
        raise ConfigError(f"main_config must be a dict, got {_type_name(main_config)}")
    if not isinstance(defaults, Mapping):
        raise ConfigError(f"defaults must map section names to default dicts, got {_type_name(defaults)}")
    for section, default in defaults.items():
        if not isinstance(default, Mapping):
            raise ConfigError(f"defaults[{section!r}] must be a dict, got {_type_name(default)}")
        if section in _TOP_LEVEL_SCHEMA or section == _CREATE_KEY:
            raise ConfigError(f"defaults may not define the reserved top-level key {section!r}")
    overrides = () if overrides is None else overrides
    _check_overrides(overrides)
    overrides = list(overrides)
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ConfigError(f"seed must be an int, got {short_repr(seed)} ({_type_name(seed)})")

    user = to_plain(main_config)
    embedded_create = user.pop(_CREATE_KEY, None)
    if create_config is None:
        create_config = embedded_create if embedded_create is not None else {}
    if not isinstance(create_config, Mapping):
        raise ConfigError(f"create_config must be a dict, got {_type_name(create_config)}")

    schema: dict[str, Any] = {**_TOP_LEVEL_SCHEMA, **{k: to_plain(v) for k, v in defaults.items()}}
    merged = {key: to_plain(value) for key, value in defaults.items()}
    for key, value in user.items():
        merged[key] = _deep_merge(schema[key], value) if key in schema else value

    create = to_plain(create_config)
    main_overrides, create_overrides = [], []
    for text in overrides:
        if isinstance(text, str) and text.strip().startswith(_CREATE_KEY + "."):
            create_overrides.append(text.strip()[len(_CREATE_KEY) + 1 :])
        else:
            main_overrides.append(text)
    apply_overrides(merged, main_overrides, schema)
    apply_overrides(create, create_overrides)

    errors = config_errors(merged, schema)
    if seed is not None:
        merged["seed"] = seed
    merged.setdefault("seed", 0)
    merged.setdefault("exp_name", DEFAULT_EXP_NAME)
    problems = [*errors.values(), *value_errors(merged, schema, skip=errors, create=create)]
    problems += create_config_errors(create)
    raise_all(problems)
    merged[_CREATE_KEY] = create
    return EasyDict(merged)
