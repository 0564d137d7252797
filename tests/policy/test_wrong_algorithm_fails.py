"""Quality learning checks that tell a right algorithm from a wrong one.

Each check trains the package's algorithm and a deliberately broken copy of it (one line patched in the test) on a
tiny task where that line matters, at equal env steps over seeds, and asserts the gap; so a change that breaks the
line in the package fails the first half. Both are in the ``quality`` set (CI leaves them out), each well under a
minute on one core.

* PPO's advantage normalization without the mean subtracted, on a one-step bandit whose rewards carry a constant
  offset of 10 (the value head starts at 0, so every advantage is about +10 at first: without centring, every
  action taken is reinforced and the context signal of +-0.5 drowns). Measured 2026-12-03 at 2048 env steps
  (greedy accuracy over 64 evaluation episodes): correct 1.0, 1.0, 1.0 (seeds 0-2); mean not subtracted 0.47,
  0.55, 0.0, 0.42, 0.53 (seeds 0-4). Removing only the std division changes nothing here (1.0 on seeds 0-2): PPO's
  Adam divides each parameter's step by its own gradient scale, so a constant scale on the advantages cancels;
  no check for it is possible on a task where Adam is used, and none is written.
* DQN's double-Q target on Sutton & Barto's maximization-bias MDP (Example 6.7).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from easydict import EasyDict

from ding_dist.entry import pipeline
from ding_dist.policy.dqn import DQNPolicy
from ding_dist.policy.ppo import PPOPolicy

pytestmark = pytest.mark.quality

# ---------------------------------------------------------------------------------------------------------------
# PPO: advantage normalization must subtract the minibatch mean.

CONTEXTS = 4
OFFSET = 10.0


class OffsetBandit(gym.Env):
    """One-step episodes: a one-hot context of ``CONTEXTS``; reward ``OFFSET + 1`` for the matching action, else
    ``OFFSET``. The greedy evaluation return minus ``OFFSET`` is the policy's accuracy."""

    observation_space = gym.spaces.Box(0.0, 1.0, (CONTEXTS,), np.float32)
    action_space = gym.spaces.Discrete(CONTEXTS)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.context = int(self.np_random.integers(CONTEXTS))
        return np.eye(CONTEXTS, dtype=np.float32)[self.context], {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        reward = OFFSET + float(int(action) == self.context)
        obs, _ = self.reset()
        return obs, reward, True, False, {}


if "OffsetBandit-v0" not in gym.registry:
    gym.register("OffsetBandit-v0", entry_point=OffsetBandit, max_episode_steps=1)


def _ppo_accuracy(seed: int, tmp_path) -> float:
    main = EasyDict(
        dict(
            exp_name="offset_bandit_ppo",
            env=dict(id="OffsetBandit-v0", collector_env_num=4, evaluator_env_num=4, n_evaluator_episode=64),
            policy=dict(
                model=dict(hidden_sizes=[64, 64], activation="tanh"),
                learn=dict(epoch_per_collect=10, batch_size=64, learning_rate=1e-3, adv_norm=True),
                collect=dict(n_sample=256),
                eval=dict(eval_freq=10**9),  # one evaluation, at the end
            ),
        )
    )
    create = EasyDict(dict(env=dict(type="gymnasium"), env_manager=dict(type="sync"), policy=dict(type="ppo")))
    result = pipeline.train((main, create), seed=seed, max_env_steps=2048, exp_dir=tmp_path / f"seed{seed}")
    return result["last_eval_return"] - OFFSET


def test_ppo_without_advantage_centring_learns_worse(tmp_path, monkeypatch):
    correct = [_ppo_accuracy(seed, tmp_path / "correct") for seed in range(3)]
    right_stats = PPOPolicy.global_minibatch_stats

    def mean_not_subtracted(self, adv, n=None):
        mean, std = right_stats(self, adv, n)
        return torch.zeros_like(mean), std

    monkeypatch.setattr(PPOPolicy, "global_minibatch_stats", mean_not_subtracted)
    broken = [_ppo_accuracy(seed, tmp_path / "broken") for seed in range(3)]
    print(f"greedy accuracy at 2048 env steps: correct {correct}, mean not subtracted {broken}")
    assert min(correct) > 0.9, correct  # chance is 1/4
    assert max(broken) < 0.75, broken
    assert np.mean(correct) - np.mean(broken) > 0.4


# ---------------------------------------------------------------------------------------------------------------
# DQN: the double-Q target (online net picks, target net scores) against max over the target net.

B_ACTIONS = 30
LEFT = 0  # in A: action 0 goes to B (reward 0), every other action ends the episode with reward 0
A_OBS, B_OBS = np.array([1.0, 0.0], np.float32), np.array([0.0, 1.0], np.float32)
EPSILON = 0.1
# By hand (discount 1): every action in B ends with a reward of mean -0.1, so Q*(A, left) = -0.1 < Q*(A, right) = 0;
# an epsilon-greedy policy that knows Q* takes left at A only when it explores and draws action 0: EPSILON / 30.
Q_LEFT_TRUE = -0.1
LEFT_RATE_OPTIMAL = EPSILON / B_ACTIONS


class MaximizationBias(gym.Env):
    """Sutton & Barto's Example 6.7: from A, 'left' leads to B, whose ``B_ACTIONS`` actions all end the episode
    with a reward drawn from N(-0.1, 1); any other action at A ends it with 0."""

    observation_space = gym.spaces.Box(0.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(B_ACTIONS)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.in_b = False
        return A_OBS, {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        if self.in_b:
            return B_OBS, float(self.np_random.normal(-0.1, 1.0)), True, False, {}
        if int(action) == LEFT:
            self.in_b = True
            return B_OBS, 0.0, False, False, {}
        return A_OBS, 0.0, True, False, {}


def _dqn_bias(double: bool, seed: int, env_steps: int = 3000) -> tuple[float, float]:
    """Mean of Q(A, left) - Q*(A, left) over the last 3/4 of the run, and the rate of 'left' taken at A there."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    cfg = DQNPolicy.default_config()
    cfg.discount_factor = 1.0
    cfg.model.hidden_sizes = [16]
    cfg.learn.update(double=double, learning_rate=3e-2, loss="mse", target_update_freq=300, batch_size=32)
    cfg.learn.grad_clip_norm = None
    env = MaximizationBias()
    policy = DQNPolicy(cfg, env.observation_space, env.action_space)
    policy.fixed_epsilon = EPSILON
    replay: list[tuple] = []
    obs, _ = env.reset(seed=seed)
    q_left, took_left = [], []
    for step in range(env_steps):
        action = int(policy.collect_action(obs[None], step)[0][0])
        if not env.in_b and step >= env_steps // 4:
            took_left.append(action == LEFT)
        next_obs, reward, terminated, _, _ = env.step(action)
        replay.append((obs, action, reward, next_obs, 0.0 if terminated else 1.0))
        obs = env.reset()[0] if terminated else next_obs
        if len(replay) >= 64:  # one update per env step on a uniform batch of the whole replay
            rows = [replay[i] for i in rng.integers(len(replay), size=32)]
            o, a, r, o2, d = (torch.as_tensor(np.array(col), dtype=torch.float32) for col in zip(*rows))
            policy.learn({"obs": o, "action": a, "reward": r, "next_obs": o2, "discount": d})
        if step >= env_steps // 4 and step % 10 == 0:
            with torch.no_grad():
                q_left.append(policy.model(torch.as_tensor(A_OBS[None]))[0, LEFT].item())
    return float(np.mean(q_left)) - Q_LEFT_TRUE, float(np.mean(took_left))


def test_double_dqn_overestimates_left_far_less():
    torch.set_num_threads(1)
    single = [_dqn_bias(False, seed) for seed in range(3)]
    double = [_dqn_bias(True, seed) for seed in range(3)]
    print(f"(Q(A,left) - Q*, left rate at A): single {single}, double {double}")
    single_bias, single_left = np.mean(single, axis=0)
    double_bias, double_left = np.mean(double, axis=0)
    assert single_bias > 0.15  # max over 30 noisy estimates of -0.1 lifts Q(A, left) above 0: left looks best
    assert double_bias < 0.6 * single_bias
    assert single_left > 0.15 > 3 * LEFT_RATE_OPTIMAL
    assert double_left < 0.5 * single_left
