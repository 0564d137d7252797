"""IMPALA: V-trace against hand-computed values, one update against a numpy V-trace (vector and image
observations), the policy's updates on a real rollout, and adv_norm on two ranks equal to one process."""

from __future__ import annotations

import copy
import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from ding_dist.envs import env_seeds, make_vec_env
from ding_dist.policy import IMPALAPolicy, get_policy_cls
from ding_dist.policy.impala import vtrace
from ding_dist.worker import Collector
from tests.policy import reference


def _ones(t: int = 3) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return torch.ones(t, 1), torch.full((t, 1), 0.9), torch.zeros(t, 1)  # reward, discount, value


def test_vtrace_on_policy_gives_discounted_returns():
    reward, discount, value = _ones()
    vs, adv = vtrace(torch.zeros(3, 1), reward, discount, value, torch.zeros(1))
    assert vs[:, 0].tolist() == pytest.approx([1 + 0.9 + 0.81, 1 + 0.9, 1.0])
    assert adv[:, 0].tolist() == pytest.approx([1 + 0.9 * 1.9, 1 + 0.9 * 1.0, 1.0])
    vs, _ = vtrace(torch.zeros(3, 1), reward, discount, value, torch.full((1,), 10.0))  # bootstrap from V(x_T)
    assert vs[2, 0].item() == pytest.approx(1 + 0.9 * 10)


def test_vtrace_truncates_and_weights_off_policy_steps():
    reward, discount, value = _ones(2)
    half = torch.full((2, 1), math.log(0.5))  # pi / mu = 0.5: rho = 0.5, c = 0.5
    vs, adv = vtrace(half, reward, discount, value, torch.zeros(1))
    assert vs[:, 0].tolist() == pytest.approx([0.5 + 0.9 * 0.5 * 0.5, 0.5])
    assert adv[:, 0].tolist() == pytest.approx([0.5 * (1 + 0.9 * 0.5), 0.5])
    big = torch.full((2, 1), math.log(4.0))  # pi / mu = 4 is truncated to rho_bar = c_bar = 1: on-policy values
    assert vtrace(big, reward, discount, value, torch.zeros(1))[0][:, 0].tolist() == pytest.approx([1.9, 1.0])
    cut = torch.tensor([[0.0], [0.9]])  # step 0 ended its episode: nothing flows back across it
    assert vtrace(torch.zeros(2, 1), reward, cut, value, torch.zeros(1))[0][:, 0].tolist() == pytest.approx([1, 1])


def test_impala_learns_from_a_rollout_in_whole_env_columns():
    assert get_policy_cls("impala") is IMPALAPolicy and IMPALAPolicy.on_policy
    venv = make_vec_env({"id": "CartPole-v1"}, 4)
    cfg = IMPALAPolicy.default_config()
    cfg.learn.update(epoch_per_collect=1, batch_size=64)  # one minibatch: the whole 16 x 4 rollout
    torch.manual_seed(0)
    policy = IMPALAPolicy(cfg, venv.single_observation_space, venv.single_action_space)
    rollout = Collector(venv, policy, env_seeds(0, 0, "collector", 4)).collect(16, 0)
    venv.close()
    before = [p.detach().clone() for p in policy.model.parameters()]
    first = policy.learn(rollout)  # it acts with the policy that collected the rollout: pi / mu = 1
    assert first["rho_mean"].item() == pytest.approx(1.0, abs=1e-5) and policy.train_iter == 1
    assert any(not torch.equal(a, b) for a, b in zip(before, policy.model.parameters()))
    policy.cfg.learn.update(epoch_per_collect=3, batch_size=32)  # 16 steps x 2 env columns per minibatch
    stats = policy.learn(rollout)
    assert policy.train_iter == 1 + 3 * 2  # 3 epochs x (4 env columns / 2 per minibatch)
    assert set(stats) == {"loss", "policy_loss", "value_loss", "entropy", "rho_mean"}
    assert all(torch.isfinite(v) for v in stats.values())
    assert stats["rho_mean"].item() != pytest.approx(1.0, abs=1e-5)  # now off-policy: the weights moved


# --- one update against an independent numpy V-trace ----------------------------------------------------------

GAMMA, RHO_BAR, C_BAR, LAM = 0.9, 1.5, 0.7, 0.8
VALUE_WEIGHT, ENTROPY_WEIGHT = 0.7, 0.05
IMAGE = gym.spaces.Box(0, 255, (4, 36, 36), np.uint8)  # the Nature-CNN's smallest input
VECTOR = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
ACTIONS = gym.spaces.Discrete(3)


def _rollout(obs_space: gym.Space, t: int, n: int, seed: int = 0, reward_offset: float = 0.0) -> dict[str, np.ndarray]:
    """A ``[t, n]`` rollout with terminations, truncations and behavior probabilities far from pi's."""
    rng = np.random.default_rng(seed)

    def obs(*shape: int) -> np.ndarray:
        if obs_space.dtype == np.uint8:
            return rng.integers(0, 256, (*shape, *obs_space.shape), dtype=np.uint8)
        return rng.uniform(-1, 1, (*shape, *obs_space.shape)).astype(np.float32)

    terminated, truncated = np.zeros((t, n), bool), np.zeros((t, n), bool)
    terminated[1, 0] = terminated[t - 2, n - 1] = True
    truncated[2, 1 % n] = truncated[t - 3, 0] = True
    return {
        "obs": obs(t, n),
        "next_obs": obs(t, n),
        "last_obs": obs(n),
        "action": rng.integers(0, ACTIONS.n, (t, n)),
        "logp": np.log(rng.uniform(0.05, 0.95, (t, n))).astype(np.float32),  # pi / mu from ~0.35 to ~7
        "reward": (rng.normal(size=(t, n)) + reward_offset * np.arange(n)).astype(np.float32),
        "terminated": terminated,
        "truncated": truncated,
    }


def _impala(obs_space: gym.Space, batch_size: int, **learn) -> IMPALAPolicy:
    torch.manual_seed(0)
    cfg = IMPALAPolicy.default_config()
    cfg.device = "cpu"
    cfg.model.hidden_sizes = [16]
    cfg.collect.discount_factor = GAMMA
    cfg.learn.update(epoch_per_collect=1, batch_size=batch_size, rho_bar=RHO_BAR, c_bar=C_BAR, vtrace_lambda=LAM,
                     value_weight=VALUE_WEIGHT, entropy_weight=ENTROPY_WEIGHT, grad_clip_norm=None)  # fmt: skip
    cfg.learn.update(learn)
    return IMPALAPolicy(cfg, obs_space, ACTIONS)


def _numpy_vtrace(ro, value, pi_logp, final_value, last_value) -> tuple[np.ndarray, np.ndarray]:
    """V-trace targets and advantages from the definition (a sum over the rest of the rollout, not a recursion):
    ``v_s = V_s + sum_{t >= s} (prod_{s <= i < t} gamma_i c_i) delta_t``."""
    t_len, n = value.shape
    ratio = np.exp(pi_logp.astype(np.float64) - ro["logp"])
    rho, c = np.minimum(RHO_BAR, ratio), LAM * np.minimum(C_BAR, ratio)
    reward = ro["reward"] + GAMMA * final_value * ro["truncated"]  # a truncation bootstraps from V(final obs)
    g = GAMMA * ~(ro["terminated"] | ro["truncated"])  # and, like a termination, ends the episode
    next_value = np.concatenate([value[1:], last_value[None]])
    delta = rho * (reward + g * next_value - value)
    vs = np.empty((t_len, n))
    for s in range(t_len):
        weight = np.ones(n)
        vs[s] = value[s]
        for t in range(s, t_len):
            vs[s] += weight * delta[t]
            weight = weight * g[t] * c[t]
    next_vs = np.concatenate([vs[1:], last_value[None]])
    return vs, rho * (reward + g * next_vs - value)


@pytest.mark.parametrize(("obs_space", "adv_norm"), [(VECTOR, False), (IMAGE, False), (VECTOR, True)],
                         ids=["vector", "image", "vector-adv_norm"])  # fmt: skip
def test_one_update_matches_a_numpy_vtrace_with_ends_truncation_and_clipped_weights(obs_space, adv_norm):
    t_len, n = 7, 3
    ro = _rollout(obs_space, t_len, n)
    ro["reward"] = (10.0 * ro["reward"] + 2.0).astype(np.float32)  # advantages of std far from 1
    policy = _impala(obs_space, batch_size=t_len * n, adv_norm=adv_norm)  # one minibatch: the rollout, one update
    net = copy.deepcopy(policy.model)  # the network before the update, for the reference

    def flat(x: np.ndarray) -> torch.Tensor:  # [T, N, ...] -> [T * N, ...], the reference's own reshape
        return torch.as_tensor(x.reshape(-1, *x.shape[2:]))

    with torch.no_grad():
        value = net(flat(ro["obs"]))[1].reshape(t_len, n).double().numpy()
        final_value = net(flat(ro["next_obs"]))[1].reshape(t_len, n).double().numpy()
        last_value = net(torch.as_tensor(ro["last_obs"]))[1].double().numpy()
    head, v = net(flat(ro["obs"]))
    dist = net.distribution(head)
    logp = dist.log_prob(flat(ro["action"]))
    pi_logp = logp.detach().reshape(t_len, n).double().numpy()
    ratio = np.exp(pi_logp - ro["logp"])
    assert (ratio > RHO_BAR).any() and (ratio < C_BAR).any() and ((ratio > C_BAR) & (ratio < RHO_BAR)).any()
    vs, adv = _numpy_vtrace(ro, value, pi_logp, final_value, last_value)
    assert adv.std() > 5  # the normalization's division matters
    if adv_norm:
        adv = reference.normalized(adv)
    policy_loss = -(torch.as_tensor(adv.reshape(-1), dtype=torch.float32) * logp).mean()
    value_loss = 0.5 * ((torch.as_tensor(vs.reshape(-1), dtype=torch.float32) - v) ** 2).mean()
    (policy_loss + VALUE_WEIGHT * value_loss - ENTROPY_WEIGHT * dist.entropy().mean()).backward()

    stats = policy.learn(ro)
    assert policy.train_iter == 1
    assert stats["policy_loss"].item() == pytest.approx(policy_loss.item(), rel=1e-5, abs=1e-6)
    assert stats["value_loss"].item() == pytest.approx(value_loss.item(), rel=1e-5)
    for mine, ref in zip(policy.model.parameters(), net.parameters()):  # the gradient of the update
        torch.testing.assert_close(mine.grad, ref.grad, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize(("config", "updates"), [("pong_impala_config.py", 16), ("cartpole_impala_config.py", 8)])
def test_updates_per_env_step_are_those_of_one_process_on_1_2_4_and_8_ranks(config, updates):
    """The minibatch plan ``learn`` makes from the run's totals over N ranks (``split_plan``): the same
    updates of the same global minibatch on any number of ranks (before: a floor of one column per rank, so 8 ranks
    of pong_impala made 4 updates of 1024 where one process makes 16 of 256)."""
    from pathlib import Path

    from ding_dist.config import load_config
    from ding_dist.config.split import split_plan
    from ding_dist.policy.impala import column_minibatches

    cfg = load_config(Path(__file__).resolve().parents[2] / "configs" / config)
    steps = cfg.policy.collect.n_sample // cfg.env.collector_env_num
    for world in (1, 2, 4, 8):
        split = split_plan(cfg, world)
        assert split.rank_n_sample // split.rank_envs == steps  # the horizon stays
        epochs = cfg.policy.learn.epoch_per_collect
        plan = column_minibatches(split.rank_envs * world, steps, split.batch, epochs, seed=world)
        assert len(plan) == updates and {len(mb) * steps for mb in plan} == {cfg.policy.learn.batch_size}, world
        cover = np.concatenate(plan[: len(plan) // epochs])
        assert len(set(cover)) == len(cover)  # a pass uses each column at most once
