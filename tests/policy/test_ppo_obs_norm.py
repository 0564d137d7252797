"""PPO with ``model.obs_norm``: statistics merged over real gloo ranks once per learn, identical, checkpointed."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch

from ding_dist.comm import get_rank
from ding_dist.policy.ppo import PPOPolicy

OBS = gym.spaces.Box(-np.inf, np.inf, (3,), np.float64)
ACT = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)


def _policy() -> PPOPolicy:
    cfg = PPOPolicy.default_config()
    cfg.device = "cpu"
    cfg.model.obs_norm = True
    cfg.learn.update(epoch_per_collect=1, batch_size=8)
    return PPOPolicy(cfg, OBS, ACT)


def _rollout(policy: PPOPolicy, rank: int, T: int = 8, N: int = 2) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(rank)
    obs = rng.normal(5.0 * (rank + 1), 1.0 + rank, (T, N, 3))
    actions, extras = zip(*(policy.collect_action(o, 0) for o in obs))
    return {
        "obs": obs,
        "action": np.stack(actions),
        "reward": rng.normal(size=(T, N)).astype(np.float32),
        "next_obs": obs,
        "terminated": np.zeros((T, N), bool),
        "truncated": np.zeros((T, N), bool),
        "logp": np.stack([e["logp"] for e in extras]),
        "value": np.stack([e["value"] for e in extras]),
        "last_obs": obs[-1],
    }


def _learn_twice() -> dict[str, np.ndarray]:
    torch.manual_seed(0)
    policy = _policy()
    rank = get_rank()
    for _ in range(2):
        policy.learn(_rollout(policy, rank))
    state = policy.state_dict()["obs_norm"]
    return {k: v.numpy().copy() for k, v in state.items()}


def test_two_ranks_share_identical_observation_statistics(run_ranks):
    a, b = run_ranks(_learn_twice, 2)
    for key in ("count", "mean", "m2"):
        np.testing.assert_array_equal(a[key], b[key])
    assert float(a["count"]) == 2 * 2 * 8 * 2  # ranks x learns x T x N observations
    assert 5.0 < a["mean"].mean() < 10.0  # between the two ranks' means: pooled, not per rank


def test_statistics_are_frozen_between_collection_and_learning_and_restored_from_state_dict():
    policy = _policy()
    rollout = _rollout(policy, 0)
    assert float(policy.obs_norm.count) == 0  # collected, pending: not used before the learn's sync
    policy.learn(rollout)
    assert float(policy.obs_norm.count) == 16
    restored = _policy()
    restored.load_state_dict(policy.state_dict())
    torch.testing.assert_close(restored.obs_norm.mean, policy.obs_norm.mean)
    np.testing.assert_allclose(restored.eval_action(rollout["obs"][0]), policy.eval_action(rollout["obs"][0]))
