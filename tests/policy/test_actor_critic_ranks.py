"""World-size invariance of the actor-critic policies (TD3, DDPG, A2C, PG, PPO-PG; off-policy PPO, PPG and ACER from
``replay_cases.py``): 2 ranks, each learning on its share of the same global data with the per-rank config
``split_plan`` gives it, apply the update one process applies to the whole. All policies in one launch."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from easydict import EasyDict

import ding_dist as dd
from ding_dist.config.split import split_plan
from ding_dist.policy.a2c import A2CPolicy
from ding_dist.policy.ddpg import DDPGPolicy
from ding_dist.policy.pg import PGPolicy
from ding_dist.policy.ppo_pg import PPOPGPolicy
from ding_dist.policy.td3 import TD3Policy
from tests.policy import replay_cases  # off-policy PPO, PPG, ACER: their cases join this launch

OBS = gym.spaces.Box(-1.0, 1.0, (3,))
BOX = gym.spaces.Box(-2.0, 2.0, (2,))
DISCRETE = gym.spaces.Discrete(3)
BATCH = 32  # global replay batch
N_ENVS, STEPS = 4, 8  # global rollout: 4 env columns of 8 steps


def _params(*modules: torch.nn.Module) -> np.ndarray:
    return torch.cat([p.detach().flatten() for m in modules for p in m.parameters()]).numpy()


def _replay_updates(cls: type, updates: int = 4) -> tuple[int, np.ndarray]:
    """``updates`` learn calls on this rank's rows of fixed global batches (the smoothing noise drawn for the
    global batch), TD3's delayed actor update included."""
    rank, world = dd.get_rank(), dd.get_world_size()
    cfg = cls.default_config()
    cfg.device = "cpu"
    cfg.model.update(actor_hidden_sizes=[8], critic_hidden_sizes=[8])
    cfg.learn.update(batch_size=BATCH, target_theta=0.1)
    torch.manual_seed(rank)  # different initial weights and noise seeds: distribute gives every rank rank 0's
    policy = cls(cfg, OBS, BOX)  # the run's totals: the policy's plan holds this rank's share
    local = policy.plan.rank_batch
    assert local == split_plan(EasyDict(env=dict(collector_env_num=2), policy=cfg), world).rank_batch
    g = torch.Generator().manual_seed(0)
    for _ in range(updates):
        whole = {
            "obs": torch.randn(BATCH, 3, generator=g),
            "action": torch.rand(BATCH, 2, generator=g) * 2 - 1,
            "reward": torch.randn(BATCH, generator=g),
            "next_obs": torch.randn(BATCH, 3, generator=g),
            "discount": torch.where(torch.rand(BATCH, generator=g) < 0.2, 0.0, 0.99),
        }
        policy.learn({k: v[rank * local : (rank + 1) * local] for k, v in whole.items()})
    return local, _params(policy.actor, policy.critic, policy.actor_target, policy.critic_target)


def _rollout(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    t, n = STEPS, N_ENVS
    return {
        "obs": rng.uniform(-1, 1, (t, n, 3)).astype(np.float32),
        "next_obs": rng.uniform(-1, 1, (t, n, 3)).astype(np.float32),
        "action": rng.integers(0, 3, (t, n)),
        "logp": np.full((t, n), -1.1, np.float32),
        "value": rng.normal(size=(t, n)).astype(np.float32),
        "reward": (rng.normal(size=(t, n)) + 2.0 * np.arange(n)).astype(np.float32),
        "terminated": rng.uniform(size=(t, n)) < 0.2,
        "truncated": rng.uniform(size=(t, n)) < 0.05,
        "last_obs": rng.uniform(-1, 1, (n, 3)).astype(np.float32),
    }


def _rollout_updates(
    cls: type, rollouts: int = 3, learn: dict | None = None, **collect
) -> tuple[list[int], np.ndarray]:
    """``rollouts`` learn calls on this rank's env columns of fixed global rollouts (A2C: one step each, advantages
    normalized over the global rollout; PG, PPO-PG: steps once the ranks hold ``n_episode`` complete episodes; the
    ranks' episodes differ in length, so PPO-PG weights each rank's minibatch share by its samples)."""
    rank, world = dd.get_rank(), dd.get_world_size()
    cfg = cls.default_config()
    cfg.device = "cpu"
    cfg.model.hidden_sizes = [8]
    cfg.collect.update(n_sample=N_ENVS * STEPS, **collect)
    cfg.learn.update(learn or {})
    if cls is A2CPolicy:
        cfg.learn.adv_norm = True
    envs = split_plan(EasyDict(env=dict(collector_env_num=N_ENVS), policy=cfg), world).rank_envs
    torch.manual_seed(rank)
    policy = cls(cfg, OBS, DISCRETE)
    cols = slice(rank * envs, (rank + 1) * envs)
    whole = None
    for i in range(rollouts):
        last, whole = whole, _rollout(i)
        if last is not None:  # consecutive rollouts of the same envs
            whole["obs"][0] = last["next_obs"][-1]
        policy.learn({k: v[:, cols] if k != "last_obs" else v[cols] for k, v in whole.items()})
    return [envs, policy.train_iter], _params(policy.model)


def _all_updates() -> dict:
    torch.set_num_threads(1)
    return {
        "td3": _replay_updates(TD3Policy),
        "ddpg": _replay_updates(DDPGPolicy),
        "a2c": _rollout_updates(A2CPolicy),
        "pg": _rollout_updates(PGPolicy, n_episode=6),
        # DI-engine's minibatches of a global 16 over the ranks' episodes (a rank may hold none of a minibatch)
        "pg_minibatch": _rollout_updates(PGPolicy, learn=dict(batch_size=16), n_episode=6),
        # one global minibatch of every sample (at most 3 * 32 = 96), 2 epochs: the update of one process exactly
        "ppo_pg": _rollout_updates(PPOPGPolicy, learn=dict(batch_size=128, epoch_per_collect=2), n_episode=6),
        **replay_cases.all_updates(),
    }


def test_two_ranks_apply_the_update_of_one_process(run_ranks):
    torch.manual_seed(0)
    whole = _all_updates()
    split = run_ranks(_all_updates, 2)
    assert whole["td3"][0] == whole["ddpg"][0] == BATCH and split[0]["td3"][0] == split[1]["ddpg"][0] == BATCH // 2
    assert whole["a2c"][0] == [N_ENVS, 3] and split[0]["a2c"][0] == split[1]["a2c"][0] == [N_ENVS // 2, 3]
    assert whole["pg"][0][0] == N_ENVS and split[0]["pg"][0][0] == split[1]["pg"][0][0] == N_ENVS // 2
    assert split[0]["pg"][0][1] == split[1]["pg"][0][1] == whole["pg"][0][1] == 2  # steps at the same rollouts
    assert split[0]["pg_minibatch"][0][1] == split[1]["pg_minibatch"][0][1] == whole["pg_minibatch"][0][1] == 6
    assert split[0]["ppo_pg"][0][1] == split[1]["ppo_pg"][0][1] == whole["ppo_pg"][0][1] == 4  # 2 x 2 epochs
    for key in ("ppo_offpolicy", "ppg_offpolicy", "acer"):
        assert whole[key][0] == replay_cases.BATCH and split[0][key][0] == split[1][key][0] == replay_cases.BATCH // 2
    for key, (_, params) in whole.items():
        np.testing.assert_array_equal(split[0][key][1], split[1][key][1], err_msg=key)
        np.testing.assert_allclose(split[0][key][1], params, rtol=1e-5, atol=1e-6, err_msg=key)
