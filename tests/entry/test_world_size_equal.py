"""What a user configures means the same on 1 and N processes: the same data gives the same update."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

import ding_dist as dd
from ding_dist.entry import train
from ding_dist.policy.ppo import PPOPolicy
from tests.entry.test_pipeline import tiny_dqn, tiny_ppo

OBS = gym.spaces.Box(-1.0, 1.0, (3,))
ACT = gym.spaces.Discrete(3)
T, N_ENVS = 16, 4


def _rollout() -> dict[str, np.ndarray]:
    """A fixed rollout ``[T, N_ENVS]`` with advantages far from zero mean (normalization matters)."""
    rng = np.random.default_rng(0)
    return {
        "obs": rng.uniform(-1, 1, size=(T, N_ENVS, 3)).astype(np.float32),
        "next_obs": rng.uniform(-1, 1, size=(T, N_ENVS, 3)).astype(np.float32),
        "action": rng.integers(0, 3, size=(T, N_ENVS)),
        "logp": np.log(np.full((T, N_ENVS), 1 / 3, dtype=np.float32)),
        "value": rng.normal(size=(T, N_ENVS)).astype(np.float32),
        "reward": (rng.normal(size=(T, N_ENVS)) + 3.0 * np.arange(N_ENVS)).astype(np.float32),
        "terminated": rng.uniform(size=(T, N_ENVS)) < 0.1,
        "truncated": np.zeros((T, N_ENVS), bool),
        "last_obs": rng.uniform(-1, 1, size=(N_ENVS, 3)).astype(np.float32),
    }


def _ppo_update(adv_norm: bool) -> np.ndarray:
    """One PPO learn call on this rank's share of the envs (all of them on one process)."""
    rank, world = dd.get_rank(), dd.get_world_size()
    torch.manual_seed(0)
    cfg = PPOPolicy.default_config()
    cfg.device = "cpu"
    cfg.model.hidden_sizes = [16]
    # One minibatch of the whole (global) rollout per epoch: its composition does not depend on the shuffle.
    cfg.learn.update(epoch_per_collect=3, batch_size=T * N_ENVS // world, adv_norm=adv_norm, grad_clip_norm=None)
    policy = PPOPolicy(cfg, OBS, ACT)
    share = N_ENVS // world
    part = {k: v[:, rank * share : (rank + 1) * share] for k, v in _rollout().items() if k != "last_obs"}
    part["last_obs"] = _rollout()["last_obs"][rank * share : (rank + 1) * share]
    policy.learn(part)
    return torch.cat([p.detach().flatten() for p in policy.model.parameters()]).numpy()


@pytest.mark.parametrize("adv_norm", [True, False])
def test_ppo_update_split_over_two_ranks_equals_one_process(run_ranks, adv_norm):
    whole = _ppo_update(adv_norm)
    split = run_ranks(_ppo_update, 2, adv_norm)
    np.testing.assert_array_equal(split[0], split[1])
    np.testing.assert_allclose(split[0], whole, rtol=1e-5, atol=1e-6)


def _minibatch_stats():
    torch.manual_seed(0)
    cfg = PPOPolicy.default_config()
    cfg.device = "cpu"
    cfg.model.hidden_sizes = [8]
    policy = PPOPolicy(cfg, OBS, ACT)
    full = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4) ** 1.5  # [epochs, minibatches, batch]
    r = dd.get_rank()
    mean, std = policy.global_minibatch_stats(full[..., 2 * r : 2 * r + 2])
    return mean.numpy(), std.numpy()


def test_advantage_statistics_are_those_of_the_global_minibatch(run_ranks):
    full = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4) ** 1.5
    for mean, std in run_ranks(_minibatch_stats, 2):
        np.testing.assert_allclose(mean, full.mean(-1).numpy(), rtol=1e-6)
        np.testing.assert_allclose(std, full.std(-1).numpy(), rtol=1e-6)


def _dqn_updates_per_env_step(tmp_path):
    main, create = tiny_dqn()
    # 8 envs per rank and n_sample 8: on 2 ranks each rank's 4 steps round up to a whole vector step (8),
    # so an iteration holds 16 global env steps, twice what n_sample asks for.
    main.env.collector_env_num = 8
    main.policy.collect.n_sample = 8
    main.policy.learn.update(update_per_collect=1, learning_starts=0)
    main.policy.eval.eval_freq = 0
    main.policy.other.checkpoint.freq = 0
    main.env.stop_value = None
    exp_dir = tmp_path / f"w{dd.get_world_size()}"
    result = train((main, create), seed=0, exp_dir=exp_dir, max_env_steps=2048)
    return result["env_steps"], result["train_iters"]


def test_dqn_updates_per_env_step_do_not_depend_on_the_world_size(run_ranks, tmp_path):
    # update_per_collect=1 per n_sample=8 global env steps: 2048 / 8 = 256 updates, on 1 and on 2 processes
    assert _dqn_updates_per_env_step(tmp_path) == (2048, 256)
    assert run_ranks(_dqn_updates_per_env_step, 2, tmp_path) == [(2048, 256), (2048, 256)]


def test_a_run_stopped_by_stop_value_logs_its_last_episodes(tmp_path):
    main, create = tiny_ppo()
    main.policy.other = dict(log_freq=10**9)  # no periodic log: only the final one counts the episodes
    main.policy.eval.eval_freq = 256
    main.env.stop_value = -1.0  # the first evaluation stops the run
    stopped = train((main, create), seed=0, exp_dir=tmp_path / "stopped")
    assert (stopped["stopped_by"], stopped["env_steps"]) == ("stop_value", 256)
    main.env.stop_value = None
    budget = train((main, create), seed=0, exp_dir=tmp_path / "budget", max_env_steps=256)
    assert budget["env_steps"] == 256
    assert stopped["episodes"] == budget["episodes"]
    assert stopped["episodes"] > 0
