"""What a user configures means the same on 1 and N processes: the same data gives the same update."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from easydict import EasyDict

import ding_dist as dd
from ding_dist.config import read_config
from ding_dist.config.split import split_plan
from ding_dist.entry import train
from ding_dist.policy.impala import IMPALAPolicy
from ding_dist.policy.ppo import PPOPolicy
from ding_dist.worker import Collector
from tests.entry.test_pipeline import CONFIGS, tiny_dqn, tiny_ppo

OBS = gym.spaces.Box(-1.0, 1.0, (3,))
ACT = gym.spaces.Discrete(3)
#: The global config's sizes: 4 envs, 64 env steps per iteration, so a rollout horizon of T = 16 steps.
N_ENVS, N_SAMPLE = 4, 64


def _rollout(t: int, n_envs: int) -> dict[str, np.ndarray]:
    """A fixed rollout ``[t, n_envs]`` with advantages far from zero mean (normalization matters)."""
    rng = np.random.default_rng(0)
    return {
        "obs": rng.uniform(-1, 1, size=(t, n_envs, 3)).astype(np.float32),
        "next_obs": rng.uniform(-1, 1, size=(t, n_envs, 3)).astype(np.float32),
        "action": rng.integers(0, 3, size=(t, n_envs)),
        "logp": np.log(rng.uniform(0.1, 0.6, size=(t, n_envs))).astype(np.float32),
        "value": rng.normal(size=(t, n_envs)).astype(np.float32),
        "reward": (rng.normal(size=(t, n_envs)) + 3.0 * np.arange(n_envs)).astype(np.float32),
        "terminated": rng.uniform(size=(t, n_envs)) < 0.1,
        "truncated": rng.uniform(size=(t, n_envs)) < 0.05,
        "last_obs": rng.uniform(-1, 1, size=(n_envs, 3)).astype(np.float32),
    }


def _first_update(policy_cls: type, adv_norm: bool, batch_size: int = N_SAMPLE) -> tuple[list[int], np.ndarray]:
    """One learn call on this rank's share, as the pipeline splits a global config: its per-rank config comes
    from ``split_plan`` (what ``DataParallelLoop`` calls), its rollout has that share's shape. ``batch_size``
    below ``N_SAMPLE``: minibatches of fewer env columns than a rank holds (IMPALA: planned over the global ones)."""
    rank, world = dd.get_rank(), dd.get_world_size()
    cfg = policy_cls.default_config()
    cfg.device = "cpu"
    cfg.model.hidden_sizes = [16]
    # N_SAMPLE: one minibatch of the whole (global) rollout per epoch, whatever the shuffle
    cfg.learn.update(epoch_per_collect=3, batch_size=batch_size, adv_norm=adv_norm, grad_clip_norm=None)
    cfg.collect.n_sample = N_SAMPLE
    plan = split_plan(EasyDict(env=dict(collector_env_num=N_ENVS), policy=cfg), world)
    envs, steps = plan.rank_envs, -(-plan.rank_n_sample // plan.rank_envs)
    whole = _rollout(N_SAMPLE // N_ENVS, N_ENVS)
    cols = slice(rank * envs, (rank + 1) * envs)
    share = {k: v[:, cols] if k != "last_obs" else v[cols] for k, v in whole.items()}
    assert share["reward"].shape == (steps, envs)
    torch.manual_seed(0)
    policy = policy_cls(cfg, OBS, ACT)  # the run's totals
    policy.learn(share)
    return [steps, envs, policy.plan.rank_batch, policy.train_iter], torch.cat(
        [p.detach().flatten() for p in policy.model.parameters()]
    ).numpy()


def _first_updates() -> dict:
    torch.set_num_threads(1)
    return {
        **{
            (name, adv_norm, N_SAMPLE): _first_update(cls, adv_norm)
            for name, cls in (("ppo", PPOPolicy), ("impala", IMPALAPolicy))
            for adv_norm in (True, False)
        },
        # IMPALA's minibatches of 1 and 2 env columns of 16 steps, smaller than one rank's 2 columns (a rank may
        # hold none of a minibatch): 4 and 2 updates per pass on 1 process and on 2 ranks
        **{("impala", True, batch): _first_update(IMPALAPolicy, True, batch) for batch in (16, 32)},
    }


def test_first_ppo_and_impala_updates_of_two_ranks_equal_one_process(run_ranks):
    whole = _first_updates()
    split = run_ranks(_first_updates, 2)
    for key, (shape, params) in whole.items():
        batch, updates = key[2], 3 * N_ENVS // (key[2] // 16)  # 3 passes of minibatches of whole columns
        assert shape == [16, 4, batch, updates], key  # one process: 16 steps of 4 envs
        for rank in (0, 1):  # the same horizon and updates: half the envs, half the batch
            assert split[rank][key][0] == [16, 2, batch // 2, updates], key
        np.testing.assert_array_equal(split[0][key][1], split[1][key][1])
        np.testing.assert_allclose(
            split[0][key][1], params, rtol=1e-6, atol=1e-6 * np.abs(params).max(), err_msg=str(key)
        )


def _first_rollout(exp_dir) -> tuple[np.ndarray, np.ndarray]:
    """The first rollout's observations and actions of this rank's collector in a 1-iteration PPO run."""
    seen = []
    collect = Collector.collect

    def recording(self, *args, **kwargs):
        rollout = collect(self, *args, **kwargs)
        seen.append((rollout["obs"].copy(), rollout["action"].copy()))
        return rollout

    Collector.collect = recording
    try:
        main, create = tiny_ppo()  # 4 envs, n_sample 128: 32 steps per env
        main.policy.eval.eval_freq = 0
        main.policy.other.checkpoint = dict(freq=0)
        train((main, create), seed=0, exp_dir=f"{exp_dir}/w{dd.get_world_size()}", max_env_steps=128)
    finally:
        Collector.collect = collect
    assert len(seen) == 1
    return seen[0]


def test_the_pipeline_keeps_the_horizon_and_ranks_collect_different_episodes(run_ranks, tmp_path):
    obs, _ = _first_rollout(tmp_path)
    (obs0, act0), (obs1, act1) = run_ranks(_first_rollout, 2, tmp_path)
    assert obs.shape == (32, 4, 4)  # one process: 4 envs, 32 steps each
    assert obs0.shape == obs1.shape == (32, 2, 4)  # two ranks: 2 envs each, the same 32 steps (not 16)
    assert not np.array_equal(obs0[0], obs1[0])  # each rank's envs have seed streams of their own
    assert not np.array_equal(act0, act1)


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


def _loop_policy_sizes(tmp_path) -> dict:
    """What the data-parallel loop's policy sees: the run's totals in its config, this rank's share in its plan, and
    SQN's exploration schedule at global env step 3000 (before the plan, a rank's policy held its share of
    ``n_sample``, so the schedule counted N times the updates on N ranks)."""
    from ding_dist.entry.loops.data_parallel import DataParallelLoop

    seen: dict = {}
    run = DataParallelLoop.run

    def keeping_run(self):
        p = self.policy
        seen.update(n_sample=p.cfg.collect.n_sample, batch=p.cfg.learn.batch_size, rank_batch=p.plan.rank_batch,
                    rank_n_sample=p.plan.rank_n_sample, envs=self.collector.num_envs,
                    share=p.policy_share(3000))  # fmt: skip
        return run(self)

    DataParallelLoop.run = keeping_run
    try:
        main, create = read_config(CONFIGS / "cartpole_sqn_config.py")
        main.env.update(collector_env_num=4, evaluator_env_num=1, n_evaluator_episode=1)
        main.policy.model.hidden_sizes = [16]
        main.policy.learn.update(learning_starts=1000, update_per_collect=4, batch_size=32)
        main.policy.collect.n_sample = 64
        main.policy.other.eps = {"decay": 2000}
        main.policy.eval.eval_freq = 0
        train((main, create), seed=0, exp_dir=tmp_path / f"w{dd.get_world_size()}", max_env_steps=64)
    finally:
        DataParallelLoop.run = run
    return seen


def test_the_loop_hands_its_policy_the_run_totals_and_a_plan_of_shares(run_ranks, tmp_path):
    one = _loop_policy_sizes(tmp_path)
    two = run_ranks(_loop_policy_sizes, 2, tmp_path)
    # by hand: updates at env step 3000 = (3000 - 1000) * 4 / 64 = 125; share = 1 / (2000 - 125)
    assert one == {"n_sample": 64, "batch": 32, "rank_batch": 32, "rank_n_sample": 64, "envs": 4, "share": 1 / 1875}
    expected = {"n_sample": 64, "batch": 32, "rank_batch": 16, "rank_n_sample": 32, "envs": 2, "share": 1 / 1875}
    assert two == [expected, expected]
