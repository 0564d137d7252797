"""PG (REINFORCE): Monte-Carlo returns over episodes that span rollouts, the step once n_episode episodes are
complete, the loss against a hand computation, DI-engine's own CartPole file, training to a threshold (quality)."""

from __future__ import annotations

import copy
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch.distributions import Categorical

from ding_dist.entry import pipeline
from ding_dist.entry.pipeline import load_config
from ding_dist.policy import get_policy_cls
from ding_dist.policy.pg import PGPolicy, episode_minibatches, episode_returns

REPO = Path(__file__).resolve().parents[2]
DING_PG = REPO / "tests" / "config" / "ding_files" / "cartpole_pg_config.py"
OBS = gym.spaces.Box(-1.0, 1.0, (3,))
ACT = gym.spaces.Discrete(3)


def make(n_episode: int = 1, **learn) -> PGPolicy:
    torch.manual_seed(0)
    cfg = PGPolicy.default_config()
    cfg.model.hidden_sizes = [8]
    cfg.collect.update(n_episode=n_episode, discount_factor=0.5)
    cfg.learn.update(grad_clip_norm=None, entropy_weight=0.3)
    cfg.learn.update(learn)
    return PGPolicy(cfg, OBS, ACT)


def rollout(t: int, n: int, ends: list[tuple[int, int]], seed: int = 0, after: dict | None = None) -> dict:
    """A rollout of ``t`` steps of ``n`` envs ending episodes at ``ends`` (step, env), continuing ``after``."""
    rng = np.random.default_rng(seed)
    done = np.zeros((t, n), bool)
    for step, env in ends:
        done[step, env] = True
    obs = rng.uniform(-1, 1, (t + 1, n, 3)).astype(np.float32)
    if after is not None:
        obs[0] = after["next_obs"][-1]
    return {
        "obs": obs[:-1],
        "next_obs": obs[1:],
        "action": rng.integers(0, 3, (t, n)),
        "reward": rng.integers(1, 4, (t, n)).astype(np.float32),
        "terminated": done,
        "truncated": np.zeros((t, n), bool),
    }


def test_registered_with_di_engine_defaults_and_returns():
    assert get_policy_cls("pg") is PGPolicy and PGPolicy.on_policy
    cfg = PGPolicy.default_config()
    assert (cfg.learn.entropy_weight, cfg.learn.grad_clip_norm, cfg.collect.discount_factor) == (0.01, 5.0, 0.99)
    np.testing.assert_allclose(episode_returns(np.array([1.0, 2.0, 4.0]), 0.5), [3.0, 4.0, 4.0])


def test_an_episode_spanning_two_rollouts_gets_its_whole_return_and_the_hand_computed_loss():
    policy = make(n_episode=1)
    first = rollout(3, 1, [], seed=0)
    second = rollout(2, 1, [(1, 0)], seed=1, after=first)
    model = copy.deepcopy(policy.model)
    policy.learn(first)  # no episode complete: no step
    assert policy.train_iter == 0 and all(p.grad is None for p in policy.model.parameters())
    stats = policy.learn(second)  # the episode of 5 steps ends: one step on it
    assert policy.train_iter == 1

    obs = torch.as_tensor(np.concatenate([first["obs"][:, 0], second["obs"][:, 0]]))
    action = torch.as_tensor(np.concatenate([first["action"][:, 0], second["action"][:, 0]]))
    r = np.concatenate([first["reward"][:, 0], second["reward"][:, 0]])
    g = torch.as_tensor([sum(r[k] * 0.5 ** (k - t) for k in range(t, 5)) for t in range(5)], dtype=torch.float32)
    dist = Categorical(logits=model(obs))
    policy_loss = -(dist.log_prob(action) * g).mean()
    loss = policy_loss - 0.3 * dist.entropy().mean()
    grads = torch.autograd.grad(loss, list(model.parameters()))
    assert stats["loss"].item() == pytest.approx(loss.item(), rel=1e-5)
    assert stats["return_mean"].item() == pytest.approx(g.mean().item(), rel=1e-6)
    for p, grad in zip(policy.model.parameters(), grads):
        torch.testing.assert_close(p.grad, grad, rtol=1e-5, atol=1e-7)


def test_steps_once_n_episode_episodes_are_complete_and_keeps_the_open_ones():
    policy = make(n_episode=3)
    first = rollout(4, 2, [(1, 0), (3, 1)])
    policy.learn(first)  # 2 complete episodes, env 0's next one open (2 steps)
    assert policy.train_iter == 0
    second = rollout(4, 2, [(0, 0)], seed=1, after=first)
    policy.learn(second)  # the 3rd ends: a step on all 3 (2 + 4 + 3 steps)
    assert policy.train_iter == 1
    assert sorted(len(v[0]) for v in policy._open.values()) == [3, 4]  # env 0: 3 open steps, env 1: 4
    policy.learn(rollout(2, 2, [(0, 0), (0, 1)], seed=2, after=second))  # 2 more: not yet 3
    assert policy.train_iter == 1
    with pytest.raises(ValueError, match="does not continue the last one"):  # e.g. another actor's chunk
        policy.learn(rollout(2, 2, [], seed=3))


def test_di_engine_pg_file_gets_di_engines_meaning():
    cfg = load_config(DING_PG)
    p = cfg.policy
    assert (cfg.env.id, cfg.create_config.policy.type) == ("CartPole-v0", "pg")
    assert (p.model.hidden_sizes, p.collect.n_episode, p.collect.discount_factor) == ([128, 128, 64, 64], 80, 0.9)
    assert (p.learn.learning_rate, p.learn.entropy_weight, p.learn.grad_clip_norm) == (0.001, 0.001, 5.0)
    assert p.learn.batch_size == 64  # DI-engine's PG loops over minibatches of it


def _di_engine_split(length: int, split_size: int, order: np.ndarray) -> list[np.ndarray]:
    """DI-engine 0.5.3's ``split_data_generator`` (ding/utils/default_helper.py), its loop written out."""
    out = []
    for i in range(0, length, split_size):
        if i + split_size > length:
            i = length - split_size
        out.append(order[i : i + split_size])
    return out


@pytest.mark.parametrize(("total", "batch", "sizes"), [(200, 64, [64] * 4), (128, 64, [64, 64]), (7, 3, [3] * 3)])
def test_minibatches_are_di_engines_loop(total, batch, sizes):
    minibatches = episode_minibatches(total, batch, seed=5)
    order = np.random.default_rng(5).permutation(total)
    assert [len(mb) for mb in minibatches] == sizes
    for mine, ref in zip(minibatches, _di_engine_split(total, batch, order), strict=True):
        np.testing.assert_array_equal(mine, ref)
    assert set(np.concatenate(minibatches)) == set(range(total))  # every sample, the tail's overlap aside
    np.testing.assert_array_equal(episode_minibatches(5, 8, seed=0)[0], np.arange(5))  # fewer: one step on all
    np.testing.assert_array_equal(episode_minibatches(5, None, seed=0)[0], np.arange(5))


def test_batch_size_takes_di_engines_adam_steps_on_the_collected_episodes():
    """10 samples, batch_size 4: DI-engine's loop takes 3 Adam steps (order[0:4], order[4:8], order[6:10])."""
    policy = make(n_episode=2, batch_size=4, learning_rate=0.05)
    data = rollout(5, 2, [(4, 0), (4, 1)])
    model = copy.deepcopy(policy.model)
    torch.manual_seed(123)
    stats = policy.learn(data)
    assert policy.train_iter == 3

    torch.manual_seed(123)
    order = np.random.default_rng(int(torch.randint(0, 2**62, ()))).permutation(10)  # the seed learn draws
    obs = torch.as_tensor(np.concatenate([data["obs"][:, 0], data["obs"][:, 1]]))  # env 0's episode, then env 1's
    action = torch.as_tensor(np.concatenate([data["action"][:, 0], data["action"][:, 1]]))
    g = torch.as_tensor(np.concatenate([episode_returns(data["reward"][:, n], 0.5) for n in (0, 1)]))
    adam = torch.optim.Adam(model.parameters(), lr=0.05)
    losses = []
    for mb in _di_engine_split(10, 4, order):
        dist = Categorical(logits=model(obs[mb]))
        loss = -(dist.log_prob(action[mb]) * g[mb]).mean() - 0.3 * dist.entropy().mean()
        adam.zero_grad()
        loss.backward()
        adam.step()
        losses.append(loss.item())
    for mine, ref in zip(policy.model.parameters(), model.parameters()):
        torch.testing.assert_close(mine, ref, rtol=1e-5, atol=1e-6)
    assert stats["loss"].item() == pytest.approx(np.mean(losses), rel=1e-5)  # the mean over the steps


def test_di_engine_pg_file_trains(tmp_path):
    result = pipeline.train(
        str(DING_PG), max_env_steps=384, exp_dir=tmp_path / "r", overrides=["policy.collect.n_episode=2"]
    )
    assert result["env_steps"] == 384 and result["train_iters"] >= 1


@pytest.mark.quality
def test_cartpole_reaches_its_threshold(tmp_path):
    result = pipeline.train(str(REPO / "configs" / "cartpole_pg_config.py"), exp_dir=tmp_path, max_env_steps=500_000)
    assert result["stopped_by"] == "stop_value", result["eval_history"]
    print(f"reached the threshold in {result['env_steps']} env steps, {result['wall_time_s']:.1f} s")  # for docs/rl.md


def test_box_actions_learn_and_stay_in_bounds():
    torch.manual_seed(0)
    cfg = PGPolicy.default_config()
    cfg.model.hidden_sizes = [8]
    cfg.collect.n_episode = 1
    box = gym.spaces.Box(-1.0, 1.0, (2,))
    policy = PGPolicy(cfg, OBS, box)
    r = rollout(3, 2, [(2, 0)])
    r["action"] = np.random.default_rng(0).normal(size=(3, 2, 2)).astype(np.float32)
    policy.learn(r)
    assert policy.train_iter == 1 and policy.model.log_std.grad is not None
    assert np.abs(policy.eval_action(r["obs"][0])).max() <= 1.0
