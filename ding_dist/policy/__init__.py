"""Policies (one file per algorithm) and the registry that maps ``create_config.policy.type`` to a class."""

from __future__ import annotations

import importlib.util

from ding_dist.policy.base import Policy, action_info, hard_update, mlp, obs_dim, soft_update
from ding_dist.policy.c51 import C51Policy
from ding_dist.policy.discrete_sac import DiscreteSACPolicy
from ding_dist.policy.dqn import DQNPolicy
from ding_dist.policy.impala import IMPALAPolicy
from ding_dist.policy.iqn import IQNPolicy
from ding_dist.policy.mdqn import MDQNPolicy
from ding_dist.policy.ppo import PPOPolicy
from ding_dist.policy.qrdqn import QRDQNPolicy
from ding_dist.policy.rainbow import RainbowPolicy
from ding_dist.policy.sql import SQLPolicy

#: ``create_config.policy.type`` -> policy class.
POLICY_REGISTRY: dict[str, type[Policy]] = {"dqn": DQNPolicy, "ppo": PPOPolicy, "impala": IMPALAPolicy}

if importlib.util.find_spec("ding_dist.policy.sac") is not None:  # added by its own file when present
    from ding_dist.policy.sac import SACPolicy

    POLICY_REGISTRY["sac"] = SACPolicy

# Value-based policies, under DI-engine's type names.
POLICY_REGISTRY["c51"] = C51Policy
POLICY_REGISTRY["qrdqn"] = QRDQNPolicy
POLICY_REGISTRY["mdqn"] = MDQNPolicy
POLICY_REGISTRY["iqn"] = IQNPolicy
POLICY_REGISTRY["rainbow"] = RainbowPolicy
POLICY_REGISTRY["sql"] = SQLPolicy
POLICY_REGISTRY["discrete_sac"] = DiscreteSACPolicy
POLICY_REGISTRY["sac_discrete"] = DiscreteSACPolicy  # the type name of DI-engine's older cartpole_sac_config.py

# Distributional and branching value-based policies (issue 23), under DI-engine's type names.
from ding_dist.policy.bdq import BDQPolicy  # noqa: E402
from ding_dist.policy.d4pg import D4PGPolicy  # noqa: E402
from ding_dist.policy.fqf import FQFPolicy  # noqa: E402
from ding_dist.policy.sqn import SQNPolicy  # noqa: E402

POLICY_REGISTRY["fqf"] = FQFPolicy
POLICY_REGISTRY["sqn"] = SQNPolicy
POLICY_REGISTRY["bdq"] = BDQPolicy
POLICY_REGISTRY["d4pg"] = D4PGPolicy

# Actor-critic policies, under DI-engine's type names.
from ding_dist.policy.a2c import A2CPolicy  # noqa: E402
from ding_dist.policy.ddpg import DDPGPolicy  # noqa: E402
from ding_dist.policy.pg import PGPolicy  # noqa: E402
from ding_dist.policy.ppo_pg import PPOPGPolicy  # noqa: E402
from ding_dist.policy.td3 import TD3Policy  # noqa: E402

POLICY_REGISTRY["td3"] = TD3Policy
POLICY_REGISTRY["ddpg"] = DDPGPolicy
POLICY_REGISTRY["a2c"] = A2CPolicy
POLICY_REGISTRY["pg"] = PGPolicy
POLICY_REGISTRY["ppo_pg"] = PPOPGPolicy

# On-policy actor-critic variants learning from replay (issue 23), under DI-engine's type names.
from ding_dist.policy.acer import ACERPolicy  # noqa: E402
from ding_dist.policy.ppg import PPGOffPolicy  # noqa: E402
from ding_dist.policy.ppo_offpolicy import PPOOffPolicy  # noqa: E402

POLICY_REGISTRY["ppo_offpolicy"] = PPOOffPolicy
POLICY_REGISTRY["ppg_offpolicy"] = PPGOffPolicy
POLICY_REGISTRY["acer"] = ACERPolicy

# Recurrent replay (issue 25): R2D2, sequences from data/sequence_replay.py.
from ding_dist.policy.r2d2 import R2D2Policy  # noqa: E402

POLICY_REGISTRY["r2d2"] = R2D2Policy


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
    "ACERPolicy",
    "BDQPolicy",
    "C51Policy",
    "D4PGPolicy",
    "DiscreteSACPolicy",
    "DQNPolicy",
    "FQFPolicy",
    "IMPALAPolicy",
    "IQNPolicy",
    "MDQNPolicy",
    "PPGOffPolicy",
    "PPOOffPolicy",
    "PPOPolicy",
    "QRDQNPolicy",
    "RainbowPolicy",
    "SQLPolicy",
    "SQNPolicy",
    "Policy",
    "action_info",
    "get_policy_cls",
    "hard_update",
    "mlp",
    "obs_dim",
    "register_policy",
    "soft_update",
]
