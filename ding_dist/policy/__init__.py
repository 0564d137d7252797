"""Policies (one file per algorithm) and the registry that maps ``create_config.policy.type`` to a class.

Each policy file's ``@register_policy`` registers its class; the files are found without a hand-kept list, and
imported when needed: :func:`get_policy_cls` imports the policy a config names (a run imports no other),
``POLICY_REGISTRY`` and the class names imported from here (``from ding_dist.policy import DQNPolicy``) import every
policy file of the package first (PEP 562). Adding a policy means adding its file (and its config).
"""

from __future__ import annotations

from typing import Any

from ding_dist.policy.base import Policy as Policy
from ding_dist.policy.base import action_info as action_info
from ding_dist.policy.base import hard_update as hard_update
from ding_dist.policy.base import mlp as mlp
from ding_dist.policy.base import obs_dim as obs_dim
from ding_dist.policy.base import soft_update as soft_update
from ding_dist.policy.registry import get_policy_cls as get_policy_cls
from ding_dist.policy.registry import import_builtin_policies
from ding_dist.policy.registry import import_modules as import_modules
from ding_dist.policy.registry import register_policy as register_policy

_NAMES = ["Policy", "action_info", "get_policy_cls", "hard_update", "mlp", "obs_dim", "register_policy", "soft_update"]


def _classes() -> dict[str, type[Policy]]:
    return {cls.__name__: cls for cls in import_builtin_policies().values()}


def __getattr__(name: str) -> Any:
    """``POLICY_REGISTRY`` (every built-in policy registered), a policy class by its name, a policy module, or
    ``__all__``."""
    if name == "POLICY_REGISTRY":
        return import_builtin_policies()
    if name == "__all__":
        return ["POLICY_REGISTRY", *_NAMES, *sorted(_classes())]
    if not name.startswith("_"):
        found = _classes().get(name, globals().get(name))  # a class, or a module the import just added
        if found is not None:
            return found
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), "POLICY_REGISTRY", *_classes()})
