"""The shipped configs by name: ``cartpole_ppo`` -> the installed ``cartpole_ppo_config.py``.

The shipped configs (the source tree's ``configs/``) are installed as the package ``ding_dist.configs`` and
read through ``importlib.resources``, so a wheel or a ``pip install .`` finds them from any folder. One lookup,
:func:`find_config`, serves the CLI (``ding-dist train cartpole_ppo``) and the Python API
(``read_config("cartpole_ppo")``, ``train("configs/cartpole_ppo_config.py")`` outside the clone).

Example:
    >>> find_config("cartpole_ppo").name
    'cartpole_ppo_config.py'
"""

from __future__ import annotations

import difflib
import importlib.resources
import os
from pathlib import Path

from ding_dist.config.errors import ConfigError

__all__ = ["configs_dir", "find_config", "shipped_names"]


def configs_dir() -> Path:
    """The folder of the shipped configs: the installed package ``ding_dist.configs``, or a source checkout's
    ``configs/`` when ding_dist runs uninstalled (e.g. ``PYTHONPATH=.``).

    Example:
        >>> (configs_dir() / "cartpole_ppo_config.py").is_file()
        True
    """
    try:
        root = importlib.resources.files("ding_dist.configs")
    except ModuleNotFoundError:  # not installed: the checkout's folder, beside the package
        return Path(__file__).resolve().parents[2] / "configs"
    if not isinstance(root, Path):  # e.g. inside a zip archive: ranks need a file path to read
        raise ConfigError(f"the shipped configs are not in a folder ({root}): install ding_dist unzipped")
    return root


def shipped_names() -> list[str]:
    """The names ``find_config`` takes for the shipped configs (``cartpole_ppo`` for cartpole_ppo_config.py).

    Example:
        >>> "cartpole_ppo" in shipped_names()
        True
    """
    return [p.name.removesuffix("_config.py") for p in sorted(configs_dir().glob("*_config.py"))]


def find_config(arg: str | os.PathLike) -> Path:
    """CONFIG as the CLI takes it: the file ``arg`` when it exists; else, for a bare name or ``configs/NAME``,
    the shipped config of that name (``cartpole_ppo``, ``cartpole_ppo_config`` or ``cartpole_ppo_config.py``).
    Anything else is returned as given, for ``read_config`` to report.

    Example:
        >>> find_config("configs/pendulum_sac_config.py").name
        'pendulum_sac_config.py'
        >>> find_config("my_configs/mine.py")
        PosixPath('my_configs/mine.py')
    """
    path = Path(arg)
    if path.exists() or path.is_absolute() or len(path.parts) > 2 or path.parts[:-1] not in ((), ("configs",)):
        return path
    name = path.name.removesuffix(".py").removesuffix("_config")
    shipped = configs_dir() / f"{name}_config.py"
    if shipped.is_file():
        return shipped
    if len(path.parts) == 1 and path.suffix != ".py":  # a name, not a file: the closest names first, then all
        names = shipped_names()
        close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
        mean = f"did you mean {' or '.join(repr(n) for n in close)}? " if close else ""
        raise ConfigError(f"config file {str(path)!r} does not exist and is not a shipped config; {mean}"
                          f"the shipped configs: {', '.join(names)}")  # fmt: skip
    return path
