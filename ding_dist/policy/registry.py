"""The policy registry: ``create_config.policy.type`` -> policy class, filled by a decorator next to each class.

A policy file registers its class where it defines it::

    @register_policy("dqn")
    class DQNPolicy(QLearningPolicy): ...

and the package's modules are found without a hand-kept import list: :func:`get_policy_cls` imports the module named
like the type first (``ding_dist/policy/dqn.py`` for ``"dqn"``: a run imports the one policy it trains), and every
module of the package when that does not register the name (:func:`import_builtin_policies`), as
``ding_dist.policy.POLICY_REGISTRY``, the package's class names and a registration from outside the package do. The
class carries its config defaults (:meth:`Policy.default_config`); DI-engine's other names for the same algorithm go in
``aliases``.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TypeVar

from ding_dist.policy.base import Policy

__all__ = ["POLICY_REGISTRY", "get_policy_cls", "import_builtin_policies", "import_modules", "register_policy"]

#: ``create_config.policy.type`` -> policy class (each alias is a key of its own): the policies imported so far
#: (``ding_dist.policy.POLICY_REGISTRY`` imports them all first).
POLICY_REGISTRY: dict[str, type[Policy]] = {}

_PACKAGE = __name__.rpartition(".")[0]  # ding_dist.policy, whose modules hold the built-in policies
_PATH = [str(Path(__file__).resolve().parent)]
_all_imported = False

P = TypeVar("P", bound=type[Policy])


def _add(name: str, cls: type[Policy]) -> None:
    if not isinstance(name, str) or not name:
        raise ValueError(f"a policy type must be a non-empty string, got {name!r}")
    if not (isinstance(cls, type) and issubclass(cls, Policy)):
        raise TypeError(f"policy class must subclass ding_dist.policy.Policy, got {cls!r}")
    if inspect.isabstract(cls):
        missing = ", ".join(sorted(cls.__abstractmethods__))
        raise TypeError(f"policy class {cls.__name__} is abstract (it does not define {missing}); register a leaf")
    known = POLICY_REGISTRY.get(name)
    if known is not None and known.__qualname__ != cls.__qualname__:
        raise ValueError(f"policy type {name!r} is already {known.__module__}.{known.__qualname__}; pick another name")
    POLICY_REGISTRY[name] = cls


def register_policy(name: str, cls: type[Policy] | None = None, *, aliases: Sequence[str] = ()) -> Callable[[P], P]:
    """Make a policy class available as ``create_config.policy.type = name`` (and each of ``aliases``).

    A decorator next to the class, or a call with the class (a policy defined outside ``ding_dist``). A name taken by
    another class is an error (a copied decorator); registering the same class again is a no-op.

    Example::

        @register_policy("my_dqn", aliases=("my_double_dqn",))
        class MyDQNPolicy(DQNPolicy): ...

        register_policy("other_dqn", OtherDQNPolicy)  # the call form
    """

    def decorate(c: P) -> P:
        if not c.__module__.startswith(f"{_PACKAGE}."):  # a name a built-in policy holds is taken, imported or not
            import_builtin_policies()
        for n in (name, *aliases):
            _add(n, c)
        return c

    if cls is not None:
        decorate(cls)  # type: ignore[arg-type]
    return decorate


def get_policy_cls(name: str) -> type[Policy]:
    """The policy class registered under ``name``; a clear error listing the registered names.

    Example::

        get_policy_cls("dqn")  # DQNPolicy
    """
    if name not in POLICY_REGISTRY and isinstance(name, str) and name.isidentifier() and not name.startswith("_"):
        if name in _module_names():  # the module named like the type: the one policy a run imports
            importlib.import_module(f"{_PACKAGE}.{name}")
        if name not in POLICY_REGISTRY:  # another module's name or alias (ppg_offpolicy, sac_discrete), or none
            import_builtin_policies()
    try:
        return POLICY_REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown policy type {name!r}; registered: {sorted(POLICY_REGISTRY)}") from None


def _module_names() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(_PATH) if not m.name.startswith("_"))


def import_builtin_policies() -> dict[str, type[Policy]]:
    """Import every module of :mod:`ding_dist.policy` (once), so each built-in policy is registered; returns
    :data:`POLICY_REGISTRY`.

    Example::

        sorted(import_builtin_policies())  # ['a2c', 'acer', 'bdq', ...]
    """
    global _all_imported
    if not _all_imported:
        import_modules(_PATH, _PACKAGE)
        _all_imported = True
    return POLICY_REGISTRY


def import_modules(path: Iterable[str], package: str) -> list[str]:
    """Import every public module (name not starting with ``_``) of ``package`` found on ``path``, in name order, so
    their ``@register_policy`` decorators run; returns their names.

    Example::

        import_modules(ding_dist.policy.__path__, "ding_dist.policy")  # ['a2c', 'acer', ...]
    """
    names = sorted(m.name for m in pkgutil.iter_modules(list(path)) if not m.name.startswith("_"))
    for name in names:
        importlib.import_module(f"{package}.{name}")
    return names
