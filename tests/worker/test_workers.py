"""Collector, evaluator and learner on real CartPole envs and real processes (gloo)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from ding_dist.comm import get_rank
from ding_dist.data.replay import ReplayBuffer
from ding_dist.envs import env_seeds, make_vec_env
from ding_dist.policy import DQNPolicy, PPOPolicy
from ding_dist.worker import Collector, Evaluator, Learner, reduce_log


class FixedPolicy:
    """Always action 1, greedy or not: CartPole then fails in ~10 steps, deterministically per seed."""

    device = torch.device("cpu")

    def collect_action(self, obs, env_step):
        return np.ones(len(obs), dtype=np.int64), {"tag": np.full(len(obs), env_step)}

    def eval_action(self, obs):
        return np.ones(len(obs), dtype=np.int64)

    def to_env_action(self, action):
        return action


def test_collector_rollout_layout_and_final_obs():
    venv = make_vec_env({"id": "CartPole-v1"}, 3)
    col = Collector(venv, FixedPolicy(), env_seeds(0, 0, "collector", 3))
    ro = col.collect(40, env_step=123)
    assert ro["obs"].shape == (40, 3, 4) and ro["reward"].shape == (40, 3) and ro["last_obs"].shape == (3, 4)
    assert (ro["tag"] == 123).all()  # the policy's extras are stored per step
    done = ro["terminated"] | ro["truncated"]
    assert done.any()
    # Within an episode next_obs[t] == obs[t+1]; at an episode end next_obs is the final (failing) obs,
    # while obs[t+1] is a fresh reset state.
    for t in range(39):
        for e in range(3):
            if done[t, e]:
                assert abs(ro["next_obs"][t, e, 2]) > 0.2  # pole angle beyond CartPole's 12-degree limit
                assert np.abs(ro["obs"][t + 1, e]).max() <= 0.05
            else:
                np.testing.assert_array_equal(ro["next_obs"][t, e], ro["obs"][t + 1, e])
    returns, lengths = col.pop_episodes()
    assert len(returns) == int(done.sum()) and returns == [float(n) for n in lengths]
    assert col.pop_episodes() == ([], [])
    col.close()


def _start_seed(seed: int, k: int) -> int:
    """The reset seed of the k-th episode of an evaluation env seeded ``seed``, derived by hand."""
    return seed if k == 0 else int(np.random.SeedSequence([seed, k]).generate_state(1)[0] >> 1)


def _fixed_policy_returns(seed: int, episodes: int) -> list[float]:
    """Returns of ``episodes`` CartPole episodes under action 1, episode k of a fresh env reset with
    ``episode_seed(seed, k)`` (k = 0: ``seed`` itself; then a stream derived by hand here: SeedSequence([seed, k]))."""
    env = gym.make("CartPole-v1")
    returns = []
    for k in range(episodes):
        env.reset(seed=_start_seed(seed, k))
        total, done = 0.0, False
        while not done:
            _, reward, terminated, truncated, _ = env.step(1)
            total, done = total + reward, terminated or truncated
        returns.append(total)
    env.close()
    return returns


def test_evaluator_runs_exactly_the_requested_episodes():
    seeds = env_seeds(0, 0, "evaluator", 3)
    ev, twin = (
        Evaluator(make_vec_env({"id": "CartPole-v1"}, 3), FixedPolicy(), n_episode=7, seeds=seeds, stop_value=5)
        for _ in range(2)
    )
    result = ev.evaluate()
    # 7 episodes over 3 envs: 3 on env 0, 2 on envs 1 and 2, each episode from its own seed. A CartPole return is
    # the episode's length; they are listed in their planned order (each env's first episode, env by env, then each
    # env's second, ...), whichever ends first, each with its reset seed. The second evaluation goes on with each
    # env's next episodes (3-5 on env 0, 2-3 on envs 1 and 2).
    expected, expected_seeds = [], []
    for evaluation in range(2):
        planned = []
        for i, n in enumerate([3, 2, 2]):
            returns = _fixed_policy_returns(seeds[i], 2 * n)[evaluation * n : (evaluation + 1) * n]
            planned += [(k, i, r, _start_seed(seeds[i], evaluation * n + k)) for k, r in enumerate(returns)]
        expected.append([r for _, _, r, _ in sorted(planned)])
        expected_seeds.append([s for _, _, _, s in sorted(planned)])
    assert expected[0] != expected[1]  # the fixed policy's returns differ between those seeds
    assert result["returns"] == expected[0] and result["lengths"] == [int(r) for r in expected[0]]
    assert result["seeds"] == expected_seeds[0] and result["seeds"][:3] == seeds  # env i's first episode: seeds[i]
    assert result["mean_return"] == pytest.approx(np.mean(expected[0]))
    # fake link: evaluate_and_share is evaluate plus a no-op broadcast (the twin evaluates the same episodes)
    assert twin.evaluate() == result
    mean, stop = ev.evaluate_and_share()
    second = twin.evaluate()
    assert second["returns"] == expected[1]
    assert mean == second["mean_return"] == pytest.approx(np.mean(expected[1])) and stop is (mean >= 5)
    ev.close()
    twin.close()
    with pytest.raises(RuntimeError, match="no env"):
        Evaluator(None, FixedPolicy(), 3).evaluate()


def test_learner_counts_updates_and_averages_stats():
    torch.manual_seed(0)
    cfg = DQNPolicy.default_config()
    policy = DQNPolicy(cfg, gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2))
    buf = ReplayBuffer(100, (4,), num_envs=2, seed=0)
    for _ in range(10):
        buf.add(np.random.rand(2, 4), [0, 1], [1.0, 1.0], np.random.rand(2, 4), [False, True], [False, False])
    learner = Learner(policy)
    learner.train_replay(buf, n_updates=5, rank_batch=8)
    assert policy.train_iter == 5
    stats = learner.pop_stats()
    assert set(stats) == {"train/loss", "train/q_mean"} and learner.pop_stats() == {}


def _reduce_on_rank():
    rank = get_rank()
    return reduce_log({"episodes": rank + 1, "ret": 10.0 * rank}, {"train/loss": float(rank)})


def test_reduce_log_sums_and_averages_across_ranks(run_ranks):
    results = run_ranks(_reduce_on_rank, 2)
    assert results[0] == results[1] == {"episodes": 3.0, "ret": 10.0, "train/loss": 0.5}
    with pytest.raises(ValueError, match="both"):
        reduce_log({"a": 1}, {"a": 2})


def _ppo_evaluator(with_env: bool) -> Evaluator:
    torch.manual_seed(0)
    cfg = PPOPolicy.default_config()
    venv = make_vec_env({"id": "CartPole-v1"}, 2) if with_env else None
    policy = PPOPolicy(cfg, gym.spaces.Box(-5, 5, (4,)), gym.spaces.Discrete(2))
    return Evaluator(venv, policy, n_episode=2, seeds=[1, 2], stop_value=20.0)


def _evaluate_on_rank0_only():
    return _ppo_evaluator(with_env=get_rank() == 0).evaluate_and_share()


def test_evaluation_result_is_broadcast_from_rank0(run_ranks):
    (m0, s0), (m1, s1) = run_ranks(_evaluate_on_rank0_only, 2)
    local = _ppo_evaluator(with_env=True)
    expected = local.evaluate()["mean_return"]  # the same policy and seeds on this process
    local.close()
    assert m0 == m1 == expected and s0 is s1 is (expected >= 20.0)


class _FourStepGame(gym.Env):
    """A 'game' of 4 steps paying 3 each; metadata asks the collector to log the statistics wrapper's values."""

    metadata = {"ding_dist.episode_statistics": True}
    observation_space = gym.spaces.Box(-1.0, 1.0, (1,))
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.zeros(1, np.float32), 3.0, self.t == 4, False, {}


def _clipped_game():
    env = gym.wrappers.RecordEpisodeStatistics(_FourStepGame())  # sees the real rewards
    return gym.wrappers.TransformReward(env, np.sign)  # what the learner gets


def test_collector_logs_the_real_game_score_when_learning_from_clipped_rewards():
    from ding_dist.policy import DQNPolicy

    venv = gym.vector.SyncVectorEnv([_clipped_game, _clipped_game], autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    cfg = DQNPolicy.default_config()
    cfg.device = "cpu"
    policy = DQNPolicy(cfg, venv.single_observation_space, venv.single_action_space)
    collector = Collector(venv, policy, seeds=[0, 1])
    rollout = collector.collect(n_steps=8, env_step=0)
    assert set(rollout["reward"].ravel().tolist()) == {1.0}  # the learner sees clipped rewards
    assert collector.pop_episodes() == ([12.0, 12.0, 12.0, 12.0], [4, 4, 4, 4])  # the logs, the real score
