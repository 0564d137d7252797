"""Read DI-engine style Python config files and write resolved configs back as Python files and as data.

A config file is Python and runs as code when it is read, as DI-engine's are: read only the files you trust. A
resolved config is also written as plain data (:func:`save_config_data`, the ``config.json`` beside a run's
``config.py``); :func:`read_config` reads such a ``.json`` file without running anything, so what a run folder
holds can be evaluated and resumed without executing a file that came with it.
"""

from __future__ import annotations

import json
import math
import numbers
import os
import runpy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from easydict import EasyDict

from ding_dist.config.compile import to_plain
from ding_dist.config.errors import ConfigError
from ding_dist.config.shipped import find_config
from ding_dist.utils.fileio import atomic_write_text

__all__ = ["read_config", "save_config", "save_config_data"]


def read_config(path: str | os.PathLike) -> tuple[EasyDict, EasyDict]:
    """Execute the Python config file ``path`` and return its ``(main_config, create_config)``; a ``.json`` file
    (a resolved config :func:`save_config_data` wrote) is read as data instead, running nothing.

    ``path`` is found as the CLI finds CONFIG (:func:`~ding_dist.config.shipped.find_config`): a file that exists,
    else a shipped config by name (``"cartpole_ppo"``, ``"configs/cartpole_ppo_config.py"``) from any folder. The
    file is run as a module named ``__ding_dist_config__`` (so an ``if __name__ == "__main__":`` block in it does
    not start training): it can do anything its author wrote. ``create_config`` is optional and defaults to an
    empty dict. A missing file, an error while running it, or no ``main_config`` -> ConfigError naming the path.

    Example:
        >>> import tempfile, pathlib
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "my_config.py"
        >>> _ = p.write_text("main_config = dict(exp_name='demo', policy=dict(cuda=False))\\n")
        >>> main, create = read_config(p)
        >>> main.policy.cuda, dict(create)
        (False, {})
        >>> read_config("cartpole_ppo")[1].policy.type  # a shipped config, by name
        'ppo'
    """
    if not isinstance(path, (str, os.PathLike)):
        raise ConfigError(f"config path must be a str or os.PathLike, got {type(path).__name__} {path!r:.80}")
    p = find_config(path)
    if not p.is_file():
        what = "is a directory, not a file" if p.is_dir() else "does not exist"
        raise ConfigError(f"config file {str(p)!r} {what}")
    if p.suffix == ".json":
        return _read_data(p)
    if p.suffix != ".py":
        raise ConfigError(
            f"config file {str(p)!r} must be a Python file (.py) defining main_config, or a run's config.json"
        )
    try:
        namespace = runpy.run_path(str(p), run_name="__ding_dist_config__")
    except ModuleNotFoundError as e:
        if (e.name or "").split(".")[0] != "ding":
            raise _execution_error(p, e) from e
        namespace = _run_without_ding(p, e)
    except Exception as e:
        raise _execution_error(p, e) from e
    if "main_config" not in namespace:
        raise ConfigError(f"config file {str(p)!r} does not define 'main_config'")
    main, create = namespace["main_config"], namespace.get("create_config", {})
    for name, value in (("main_config", main), ("create_config", create)):
        if not isinstance(value, Mapping):
            raise ConfigError(f"config file {str(p)!r}: {name} must be a dict or EasyDict, got {type(value).__name__}")
    return EasyDict(to_plain(main)), EasyDict(to_plain(create))


def _execution_error(p: Path, e: BaseException) -> ConfigError:
    """The one line for an exception raised while a config file ran."""
    return ConfigError(f"error while executing config file {str(p)!r}: {type(e).__name__}: {e}")


def _run_without_ding(p: Path, error: ModuleNotFoundError) -> dict[str, Any]:
    """A DI-engine file that imports ``ding`` (not installed): run it with the config helpers it imports provided,
    or one line saying which imports need DI-engine (see :mod:`ding_dist.config.ding.imports`)."""
    from ding_dist.config.ding.imports import CONFIG_HELPERS, ding_helpers_only, ding_top_imports, provided_ding_helpers

    imports = ding_top_imports(p.read_text())
    if ding_helpers_only(imports):
        try:
            with provided_ding_helpers():
                return runpy.run_path(str(p), run_name="__ding_dist_config__")
        except Exception as e:
            raise _execution_error(p, e) from e
    need = [f"{m}.{n}" if n else m for m, n in imports if n not in CONFIG_HELPERS.get(m, {})]
    what = ", ".join(need) if need else str(error.name)
    raise ConfigError(
        f"config file {str(p)!r} imports DI-engine at its top ({what}) and DI-engine is not installed: ding_dist "
        "reads DI-engine's config files without it when they import only config helpers; these are DI-engine's own "
        "classes (move those imports under `if __name__ == '__main__':`, where the file uses them, or install "
        "DI-engine)"
    ) from error


def _literal(value: Any, key: str, indent: int) -> str:
    """Python source for ``value`` that evaluates back to an equal value."""
    pad, inner = " " * indent, " " * (indent + 4)
    if value is None or isinstance(value, (bool, str)):
        return repr(value)
    if isinstance(value, numbers.Integral):
        return repr(int(value))
    if isinstance(value, numbers.Real):
        f = float(value)
        if math.isnan(f):
            return "float('nan')"
        if math.isinf(f):
            return "float('inf')" if f > 0 else "-float('inf')"
        return repr(f)
    if isinstance(value, Mapping):
        if not value:
            return "{}"
        lines = []
        for k, v in value.items():
            if not (k is None or isinstance(k, (str, int, float, bool))):
                raise ConfigError(f"cannot save config key {key!r}: sub-key {k!r} is not a str or number")
            lines.append(f"{inner}{k!r}: {_literal(v, f'{key}.{k}' if key else str(k), indent + 4)},\n")
        return "{\n" + "".join(lines) + pad + "}"
    if isinstance(value, (list, tuple)):
        open_, close = ("[", "]") if isinstance(value, list) else ("(", ")")
        if not value:
            return open_ + close
        items = "".join(f"{inner}{_literal(v, f'{key}[{i}]', indent + 4)},\n" for i, v in enumerate(value))
        return open_ + "\n" + items + pad + close
    raise ConfigError(
        f"cannot save config key {key!r}: value {value!r} of type {type(value).__name__} is not a plain "
        "literal (dict, list, tuple, str, int, float, bool or None)"
    )


def save_config(cfg: Mapping, path: str | os.PathLike) -> Path:
    """Write the resolved config ``cfg`` atomically as a Python file that :func:`read_config` loads back.

    The file defines ``main_config`` (all of ``cfg``) and ``create_config`` (``cfg.create_config``, or an
    empty dict); ``read_config(path)`` returns ``(main, create)`` with ``main == cfg``.

    Example:
        >>> import tempfile, pathlib
        >>> cfg = EasyDict(exp_name="demo", seed=1, create_config={"policy": {"type": "dqn"}})
        >>> p = save_config(cfg, pathlib.Path(tempfile.mkdtemp()) / "config.py")
        >>> read_config(p)[0] == cfg
        True
    """
    if not isinstance(cfg, Mapping):
        raise ConfigError(f"save_config expects a dict/EasyDict config, got {type(cfg).__name__}")
    plain = to_plain(cfg)
    create = plain.pop("create_config", None)
    parts = [
        '"""Resolved ding_dist config, written by ding_dist.config.save_config.',
        "",
        "Load it with ding_dist.config.read_config(path) or pass this file to `ding-dist train`.",
        '"""',
        "",
        "from easydict import EasyDict",
        "",
        f"main_config = EasyDict({_literal(plain, '', 0)})",
    ]
    if create is not None:
        parts += [
            f"create_config = EasyDict({_literal(create, 'create_config', 0)})",
            "main_config.create_config = create_config",
        ]
    else:
        parts.append("create_config = EasyDict({})")
    return atomic_write_text(path, "\n".join(parts) + "\n")


def _read_data(p: Path) -> tuple[EasyDict, EasyDict]:
    """``(main_config, create_config)`` of a config saved as data (:func:`save_config_data`)."""
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ConfigError(f"config file {str(p)!r} is not a readable JSON config ({type(e).__name__}: {e})") from None
    if not isinstance(data, dict) or data.get("format") != _DATA_FORMAT or not isinstance(data.get("config"), dict):
        raise ConfigError(f"config file {str(p)!r} is not a config ding_dist saved as data (config.json)")
    main = EasyDict(data["config"])
    return main, EasyDict(main.get("create_config") or {})


_DATA_FORMAT = "ding_dist.config"


def save_config_data(cfg: Mapping, path: str | os.PathLike) -> Path:
    """Write the resolved config ``cfg`` atomically as JSON that :func:`read_config` reads back without running
    code (``main == cfg``, tuples as lists). A value JSON cannot hold as it is (a non-string key) is a ConfigError.

    Example:
        >>> import tempfile, pathlib
        >>> cfg = EasyDict(exp_name="demo", seed=1, create_config={"policy": {"type": "dqn"}})
        >>> p = save_config_data(cfg, pathlib.Path(tempfile.mkdtemp()) / "config.json")
        >>> read_config(p)[0] == cfg, read_config(p)[1]
        (True, {'policy': {'type': 'dqn'}})
    """
    if not isinstance(cfg, Mapping):
        raise ConfigError(f"save_config_data expects a dict/EasyDict config, got {type(cfg).__name__}")
    plain = to_plain(cfg)
    _check_keys(plain, "")
    _literal(plain, "", 0)  # the same plain literals save_config takes, or one error naming the key
    text = json.dumps({"format": _DATA_FORMAT, "version": 1, "config": plain}, indent=1)  # in the config's order
    return atomic_write_text(path, text + "\n")


def _check_keys(value: Any, key: str) -> None:
    if isinstance(value, Mapping):
        for k, v in value.items():
            if not isinstance(k, str):
                raise ConfigError(f"cannot save config key {key!r} as data: sub-key {k!r} is not a str")
            _check_keys(v, f"{key}.{k}" if key else k)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _check_keys(v, f"{key}[{i}]")
