"""The package's layers import downward only, and no modules import each other in a circle.

Layers, bottom up: ``comm``; ``sync``, ``data``, ``envs``, ``optim``; ``policy``, ``utils``; ``config``,
``worker``; ``entry``, ``compat``. Every import counts, also one inside a function (such imports are how
circles hide). ``ding_dist/__init__.py``, the facade that re-exports names lazily, and ``ding_dist/_lazy.py``, the
lazy-import helper every layer uses, belong to no layer; the helper imports nothing of the package.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "ding_dist"
LAYER = {
    "comm": 0,
    "sync": 1,
    "data": 1,
    "envs": 1,
    "optim": 1,
    "policy": 2,
    "utils": 2,
    "config": 3,
    "worker": 3,
    "entry": 4,
    "compat": 4,
    "configs": 4,
}


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The ding_dist modules ``name`` imports (module level and inside functions)."""
    out = set()
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(parts + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target.startswith("ding_dist") and target != name:
                out.add(target)
    return out


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _layer(name: str) -> int | None:
    parts = name.split(".")
    return LAYER.get(parts[1]) if len(parts) > 1 else None


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_every_package_is_in_a_layer():
    packages = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert packages <= set(LAYER), sorted(packages - set(LAYER))


def test_no_import_runs_up_the_layers():
    upward = [
        f"{name} -> {target}"
        for name, targets in sorted(_graph().items())
        for target in sorted(targets)
        if _layer(name) is not None and _layer(target) is not None and _layer(target) > _layer(name)
    ]
    assert upward == []


def test_no_import_circle():
    assert _cycles(_graph()) == []


def test_the_checks_see_what_they_look_for():
    # the graph reads relative, absolute and function-level imports, and the cycle search finds a circle
    graph = _graph()
    assert "ding_dist.comm.link" in graph["ding_dist.comm.devices"]
    assert "ding_dist.entry.experiment" in graph["ding_dist.entry.pipeline"]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _layer("ding_dist.entry.cli") == 4 and _layer("ding_dist.comm.init") == 0


def test_the_lazy_import_helper_imports_nothing_of_the_package():
    assert _graph()["ding_dist._lazy"] == set()
