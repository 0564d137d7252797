"""FQF, SQN, BDQ and D4PG apply the same update on 2 ranks as on 1 process when the ranks learn on the two halves of
the same global batch: one ``run_ranks`` launch for all four."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch

import ding_dist as dd
from ding_dist.policy import get_policy_cls

OBS = gym.spaces.Box(-1.0, 1.0, (3,))
DISCRETE = gym.spaces.Discrete(3)
BOX = gym.spaces.Box(-2.0, 2.0, (2,))
GLOBAL_BATCH = 8
POLICIES = ("fqf", "sqn", "bdq", "d4pg")


def _global_batch(name: str, step: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(step)
    if name in ("fqf", "sqn"):
        action = torch.randint(0, 3, (GLOBAL_BATCH,), generator=g)
    elif name == "bdq":
        action = torch.randint(0, 3, (GLOBAL_BATCH, 2), generator=g).float()  # bin indices per branch
    else:
        action = torch.rand(GLOBAL_BATCH, 2, generator=g) * 2 - 1
    return {
        "obs": torch.randn(GLOBAL_BATCH, 3, generator=g),
        "next_obs": torch.randn(GLOBAL_BATCH, 3, generator=g),
        "action": action,
        "reward": torch.randn(GLOBAL_BATCH, generator=g),
        "discount": torch.where(torch.rand(GLOBAL_BATCH, generator=g) < 0.25, 0.0, 0.9),
        "weight": torch.rand(GLOBAL_BATCH, generator=g) + 0.5,  # importance weights (D4PG's default)
    }


def _updates() -> dict[str, np.ndarray]:
    """Three learn calls (FQF and BDQ: a hard target copy after the second) on this rank's rows."""
    rank, world = dd.get_rank(), dd.get_world_size()
    rows = slice(rank * GLOBAL_BATCH // world, (rank + 1) * GLOBAL_BATCH // world)
    out = {}
    for name in POLICIES:
        cls = get_policy_cls(name)
        cfg = cls.default_config()
        cfg.device = "cpu"
        cfg.model.update(hidden_sizes=[16], head_hidden_sizes=[16], actor_hidden_sizes=[16], critic_hidden_sizes=[16])
        cfg.model.update(num_quantiles=4, quantile_embedding_size=8, action_bins_per_branch=3, head_layer_num=1)
        cfg.learn.update(batch_size=GLOBAL_BATCH, target_update_freq=2, learning_rate_fraction=1e-2)
        torch.manual_seed(rank)  # different initial draws: distribute() gives every rank rank 0's parameters
        policy = cls(cfg, OBS, DISCRETE if name in ("fqf", "sqn") else BOX)
        for step in range(3):
            policy.learn({k: v[rows] for k, v in _global_batch(name, step).items()})
        if name == "sqn":
            nets = [policy.model, policy.log_alpha]
        else:
            nets = [policy.actor, policy.critic] if name == "d4pg" else [policy.model]
        out[name] = torch.cat([p.detach().flatten() for net in nets for p in net.parameters()]).numpy()
    return out


def test_two_ranks_on_halves_of_the_batch_update_as_one_process(run_ranks):
    whole = _updates()
    assert sorted(whole) == sorted(POLICIES)
    r0, r1 = run_ranks(_updates, 2)
    for name, params in whole.items():
        np.testing.assert_array_equal(r0[name], r1[name], err_msg=name)
        np.testing.assert_allclose(r0[name], params, rtol=1e-5, atol=1e-6 * np.abs(params).max(), err_msg=name)
