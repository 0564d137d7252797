"""World-size cases of the actor-critics that learn from their own replay (off-policy PPO, PPG, ACER), run inside
``tests/policy/test_actor_critic_ranks.py``'s one launch: 2 ranks, each stepping on its half of the same global
batches of the per-rank share ``split_plan`` gives it, apply the update one process applies to the whole (ACER
with its trust-region projection active). Not a test module itself (no launch of its own)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from easydict import EasyDict

import ding_dist as dd
from ding_dist.config.split import split_plan
from ding_dist.policy.acer import ACERPolicy
from ding_dist.policy.ppg import PPGOffPolicy
from ding_dist.policy.ppo_offpolicy import PPOOffPolicy

OBS = gym.spaces.Box(-1.0, 1.0, (3,))
DISCRETE = gym.spaces.Discrete(3)
BATCH = 8  # global batch (ACER: chunks)


def _params(*modules: torch.nn.Module) -> np.ndarray:
    """Parameters and the last step's gradients (Adam's first steps barely see a gradient's scale; the gradients do)."""
    params = [p for m in modules for p in m.parameters()]
    grads = [torch.zeros_like(p) if p.grad is None else p.grad for p in params]
    return torch.cat([t.detach().flatten() for t in params + grads]).numpy()


def _policy(cls: type, **learn) -> tuple[object, int]:
    rank, world = dd.get_rank(), dd.get_world_size()
    cfg = cls.default_config()
    cfg.device = "cpu"
    cfg.model.hidden_sizes = [8]
    cfg.learn.update(batch_size=BATCH, **learn)
    local = split_plan(EasyDict(env=dict(collector_env_num=2), policy=cfg), world).rank_batch
    torch.manual_seed(rank)  # different initial weights: distribute gives every rank rank 0's
    policy = cls(cfg, OBS, DISCRETE)  # the run's totals
    assert policy.plan.rank_batch == local
    return policy, local


def _mine(whole: dict[str, torch.Tensor], local: int) -> dict[str, torch.Tensor]:
    rank = dd.get_rank()
    return {k: v[rank * local : (rank + 1) * local] for k, v in whole.items()}


def _flat_batch(g: torch.Generator) -> dict[str, torch.Tensor]:
    return {
        "obs": torch.rand(BATCH, 3, generator=g) * 2 - 1,
        "action": torch.randint(0, 3, (BATCH,), generator=g),
        "logp": -torch.rand(BATCH, generator=g) * 2,
        "value": torch.randn(BATCH, generator=g),
        "adv": torch.randn(BATCH, generator=g),
    }


def _ppo_offpolicy() -> tuple[int, np.ndarray]:
    policy, local = _policy(PPOOffPolicy, adv_norm=True)
    g = torch.Generator().manual_seed(0)
    for _ in range(3):
        policy.update(_mine(_flat_batch(g), local))
    return local, _params(policy.model)


def _ppg() -> tuple[int, np.ndarray]:
    policy, local = _policy(PPGOffPolicy, adv_norm=True)
    g = torch.Generator().manual_seed(1)
    for _ in range(2):
        policy.policy_step(_mine(_flat_batch(g), local))
        policy.value_step(_mine(_flat_batch(g), local))
        aux = _flat_batch(g)
        aux["old_logits"] = torch.randn(BATCH, 3, generator=g)
        policy.aux_step(_mine(aux, local))
    return local, _params(policy.model)


def _acer() -> tuple[int, np.ndarray]:
    policy, local = _policy(ACERPolicy, unroll_len=3, trust_region_value=0.05, target_theta=0.5, entropy_weight=0.1)
    g = torch.Generator().manual_seed(2)
    for _ in range(3):
        whole = {
            "obs": torch.rand(BATCH, 3, 3, generator=g) * 2 - 1,
            "next_obs": torch.rand(BATCH, 3, 3, generator=g) * 2 - 1,
            "action": torch.randint(0, 3, (BATCH, 3), generator=g),
            "reward": torch.randn(BATCH, 3, generator=g),
            "terminated": torch.rand(BATCH, 3, generator=g) < 0.2,
            "truncated": torch.rand(BATCH, 3, generator=g) < 0.1,
            "probs": torch.softmax(torch.randn(BATCH, 3, 3, generator=g) * 2, -1),
        }
        policy.update(_mine(whole, local))
    return local, _params(policy.actor, policy.critic, policy.avg_actor)


def all_updates() -> dict[str, tuple[int, np.ndarray]]:
    """``{policy type: (this rank's batch, its parameters after the steps)}`` for the three policies."""
    return {"ppo_offpolicy": _ppo_offpolicy(), "ppg_offpolicy": _ppg(), "acer": _acer()}
