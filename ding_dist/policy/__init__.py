"""Policies (one file per algorithm) and the registry that maps ``create_config.policy.type`` to a class.

Every module of this package is imported here, so each policy file's ``@register_policy`` has run once
``ding_dist.policy`` is imported: adding a policy means adding its file (and its config). The registered classes
are exported under their class names (``from ding_dist.policy import DQNPolicy``).
"""

from __future__ import annotations

from ding_dist.policy.base import Policy, action_info, hard_update, mlp, obs_dim, soft_update
from ding_dist.policy.registry import POLICY_REGISTRY, get_policy_cls, import_modules, register_policy

import_modules(__path__, __name__)
globals().update({cls.__name__: cls for cls in POLICY_REGISTRY.values()})

__all__ = [
    "POLICY_REGISTRY",
    "Policy",
    "action_info",
    "get_policy_cls",
    "hard_update",
    "mlp",
    "obs_dim",
    "register_policy",
    "soft_update",
    *sorted({cls.__name__ for cls in POLICY_REGISTRY.values()}),
]
