"""Names of a package imported on first use (PEP 562), so importing the package stays cheap (no torch).

It imports nothing of ding_dist, so every layer may use it.

Example (in a package's ``__init__.py``)::

    _NAMES = {"ReplayBuffer": ".replay"}
    __all__ = sorted(_NAMES)
    __getattr__, __dir__ = lazy_names(__name__, _NAMES)
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(package: str, where: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of ``package``: name ``n`` comes from module ``where[n]``
    (relative to the package, e.g. ``".replay"``) on first use, and is then kept in the package."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *where})

    return __getattr__, __dir__
