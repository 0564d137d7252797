"""DI-engine config files that import ``ding`` at their top, read without DI-engine installed.

A config file of DI-engine's model zoo that imports ``ding`` only for config helpers (``EasyDict`` as
``ding.utils`` re-exports it, ``deep_merge_dicts``) runs here with those helpers provided; any other ``ding``
import at the top (model classes, workers, entries) is one line saying what the file imports and what to do:
those files build DI-engine objects, which ding_dist does not have. Imports under ``if __name__ ==
"__main__":`` never run when a config is read, so they need nothing.

Example:
    >>> src = "from ding.utils import deep_merge_dicts\\nmain_config = deep_merge_dicts({'a': 1}, {'b': 2})\\n"
    >>> ding_top_imports(src)
    [('ding.utils', 'deep_merge_dicts')]
"""

from __future__ import annotations

import ast
import contextlib
import copy
import sys
import types
from collections.abc import Iterator, Mapping
from typing import Any

from easydict import EasyDict

__all__ = ["CONFIG_HELPERS", "ding_top_imports", "ding_helpers_only", "provided_ding_helpers"]


def _deep_update(original: dict, new: Mapping) -> dict:
    for key, value in new.items():
        if isinstance(value, Mapping) and isinstance(original.get(key), Mapping):
            _deep_update(original[key], value)
        else:
            original[key] = copy.deepcopy(value)
    return original


def _deep_merge_dicts(original: Mapping | None, new: Mapping | None) -> dict:
    """DI-engine's ``deep_merge_dicts``: a deep copy of ``original`` with ``new`` merged in, key by key."""
    return _deep_update(copy.deepcopy(dict(original or {})), new or {})


#: The config helpers a DI-engine config may import from ``ding`` (module -> names), and what stands in for them.
CONFIG_HELPERS: dict[str, dict[str, Any]] = {
    "ding.utils": {"EasyDict": EasyDict, "deep_merge_dicts": _deep_merge_dicts},
    "ding.utils.default_helper": {"deep_merge_dicts": _deep_merge_dicts},
}


def ding_top_imports(source: str) -> list[tuple[str, str]]:
    """``(module, name)`` of every ``ding`` import at the module level of ``source`` (``import ding.x``: name '')."""
    found = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "ding" and not node.level:
            found += [(node.module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(alias.name, "") for alias in node.names if alias.name.split(".")[0] == "ding"]
    return found


def ding_helpers_only(imports: list[tuple[str, str]]) -> bool:
    """Whether every import in ``imports`` is one of :data:`CONFIG_HELPERS`."""
    return bool(imports) and all(name in CONFIG_HELPERS.get(module, {}) for module, name in imports)


@contextlib.contextmanager
def provided_ding_helpers() -> Iterator[None]:
    """``ding`` modules holding only :data:`CONFIG_HELPERS`, importable while the block runs (then removed)."""
    added = {}
    for module, names in CONFIG_HELPERS.items():
        parts = module.split(".")
        for i in range(1, len(parts) + 1):
            name = ".".join(parts[:i])
            if name not in sys.modules and name not in added:
                added[name] = types.ModuleType(name)
                added[name].__path__ = []  # a package: its submodules import
        vars(added.get(module, sys.modules.get(module))).update(names)
    sys.modules.update(added)
    try:
        yield
    finally:
        for name in added:
            sys.modules.pop(name, None)
