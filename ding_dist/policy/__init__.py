"""Policies (one file per algorithm) and the registry that maps ``create_config.policy.type`` to a class."""

from __future__ import annotations

import importlib.util

from ding_dist.policy.base import Policy, action_info, hard_update, mlp, obs_dim, soft_update
from ding_dist.policy.dqn import DQNPolicy
from ding_dist.policy.impala import IMPALAPolicy
from ding_dist.policy.ppo import PPOPolicy

#: ``create_config.policy.type`` -> policy class.
POLICY_REGISTRY: dict[str, type[Policy]] = {"dqn": DQNPolicy, "ppo": PPOPolicy, "impala": IMPALAPolicy}

if importlib.util.find_spec("ding_dist.policy.sac") is not None:  # added by its own file when present
    from ding_dist.policy.sac import SACPolicy

    POLICY_REGISTRY["sac"] = SACPolicy


def register_policy(name: str, cls: type[Policy]) -> None:
    """Make ``cls`` available as ``create_config.policy.type = name``.

    Example::

        register_policy("my_dqn", MyDQNPolicy)
    """
    if not (isinstance(cls, type) and issubclass(cls, Policy)):
        raise TypeError(f"policy class must subclass ding_dist.policy.Policy, got {cls!r}")
    POLICY_REGISTRY[name] = cls


def get_policy_cls(name: str) -> type[Policy]:
    """The policy class registered under ``name``; a clear error listing the registered names.

    Example::

        get_policy_cls("dqn")  # DQNPolicy
    """
    try:
        return POLICY_REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown policy type {name!r}; registered: {sorted(POLICY_REGISTRY)}") from None


__all__ = [
    "POLICY_REGISTRY",
    "DQNPolicy",
    "IMPALAPolicy",
    "PPOPolicy",
    "Policy",
    "action_info",
    "get_policy_cls",
    "hard_update",
    "mlp",
    "obs_dim",
    "register_policy",
    "soft_update",
]
