"""Q-learning and off-policy math against by-hand references (tests/policy/reference_q.py): n-step returns with
terminations and truncations inside the n steps, double-Q targets where the online and target argmax differ (every
policy that claims double Q), C51's projection, quantile Huber losses (QR-DQN, IQN, FQF), FQF's fraction loss, TD3,
SAC, retrace, prioritized replay's sampling and weights, R2D2's rescaling, targets and burn-in masks.

Each test feeds the real ``learn`` step (or the function it calls) inputs on which a wrong line gives another number,
and recomputes the result with loops from network outputs read off copies of the policy's networks.
"""

from __future__ import annotations

import copy
import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from ding_dist.data.prioritized import PrioritizedReplayBuffer
from ding_dist.data.replay import ReplayBuffer
from ding_dist.policy.acer import retrace_targets
from ding_dist.policy.c51 import C51Policy
from ding_dist.policy.dqn import DQNPolicy
from ding_dist.policy.fqf import FQFPolicy
from ding_dist.policy.iqn import IQNPolicy
from ding_dist.policy.losses import categorical_projection
from ding_dist.policy.qrdqn import QRDQNPolicy
from ding_dist.policy.r2d2 import R2D2Policy, inverse_value_rescale, value_rescale
from ding_dist.policy.rainbow import RainbowPolicy
from ding_dist.policy.rng import step_generator
from ding_dist.policy.sac import SACPolicy
from ding_dist.policy.td3 import TD3Policy
from tests.policy import reference_q as ref

OBS, ACT = gym.spaces.Box(-1.0, 1.0, (3,)), gym.spaces.Discrete(4)
BOX = gym.spaces.Box(-1.0, 1.0, (2,))
B = 24


def q_batch(n: int = B, seed: int = 0) -> dict[str, torch.Tensor]:
    """Rewards of std 3 (C51's shifted atoms fall outside [-2, 2]), a quarter terminated, and importance weights."""
    g = torch.Generator().manual_seed(seed)
    return {
        "obs": torch.randn(n, 3, generator=g),
        "action": torch.randint(0, 4, (n,), generator=g),
        "reward": 3.0 * torch.randn(n, generator=g) + 0.5,
        "next_obs": torch.randn(n, 3, generator=g),
        "discount": torch.where(torch.arange(n) % 4 == 1, 0.0, 0.9),
        "weight": torch.rand(n, generator=g) + 0.25,
    }


def make_q(cls, *, model: dict | None = None, **cfg):
    torch.manual_seed(0)
    c = cls.default_config()
    c.device = "cpu"
    c.model.update({"hidden_sizes": [16], **(model or {})})
    c.learn.update(grad_clip_norm=None, target_update_freq=1000)
    c.update(cfg)
    policy = cls(c, OBS, ACT)
    ref.perturb(policy.target_model, seed=7)  # the target net is not the online one: their greedy actions differ
    return policy


def assert_argmax_differs(q_online: torch.Tensor, q_target: torch.Tensor, at_least: int = 6) -> None:
    assert int((q_online.argmax(-1) != q_target.argmax(-1)).sum()) >= at_least


# ------------------------------------------------------------------------------------------------ n-step returns
def test_replay_n_step_returns_stop_at_terminations_and_bootstrap_truncations():
    """Two env slots over a ring that wrapped; every stored transition's return, bootstrap row and discount."""
    rows, cap_rows, n, gamma = 11, 8, 3, 0.9
    rng = np.random.default_rng(0)
    reward = rng.normal(1.0, 2.0, (rows, 2))
    terminated = np.zeros((rows, 2), bool)
    truncated = np.zeros((rows, 2), bool)
    terminated[5, 0] = terminated[9, 1] = True  # inside the n steps of several starts
    truncated[7, 0] = truncated[6, 1] = True
    buf = ReplayBuffer(cap_rows * 2, obs_shape=(2,), num_envs=2, n_step=n, gamma=gamma, seed=0)
    for t in range(rows):
        ids = np.array([[t, e] for e in range(2)], np.float32)
        buf.add(ids, np.zeros(2, np.int64), reward[t], ids + [100, 0], terminated[t], truncated[t])
    got = buf.sample(4000)
    first = rows - cap_rows  # the ring kept the newest cap_rows rows
    seen = set()
    for i in range(4000):
        t, e = (int(v) for v in got["obs"][i])
        seen.add((t, e))
        ret, last, discount = ref.n_step(
            reward[first:, e], terminated[first:, e], truncated[first:, e], gamma, n, t - first
        )
        assert float(got["reward"][i]) == pytest.approx(ret, rel=1e-5)
        assert float(got["discount"][i]) == pytest.approx(discount, rel=1e-6)
        assert int(got["next_obs"][i, 0]) == last + first + 100
    assert len(seen) == cap_rows * 2  # every stored transition was checked


def test_dqn_initial_priority_uses_the_replays_n_step_target():
    policy = make_q(DQNPolicy, nstep=3, discount_factor=0.9)
    steps, envs = 6, 2
    g = torch.Generator().manual_seed(3)
    rollout = {
        "obs": torch.randn(steps, envs, 3, generator=g).numpy(),
        "next_obs": torch.randn(steps, envs, 3, generator=g).numpy(),
        "action": torch.randint(0, 4, (steps, envs), generator=g).numpy(),
        "reward": (2.0 * torch.randn(steps, envs, generator=g)).numpy(),
        "terminated": np.zeros((steps, envs), bool),
        "truncated": np.zeros((steps, envs), bool),
    }
    rollout["terminated"][2, 0] = rollout["truncated"][1, 1] = True
    got = policy.initial_priority(rollout)
    with torch.no_grad():
        for e in range(envs):
            for t in range(steps):
                ret, last, d = ref.n_step(
                    rollout["reward"][:, e], rollout["terminated"][:, e], rollout["truncated"][:, e], 0.9, 3, t
                )
                o2 = torch.as_tensor(rollout["next_obs"][last, e : e + 1])
                y = ref.double_q_target([ret], [d], ref.f64(policy.model(o2)), ref.f64(policy.target_model(o2)))
                q = float(policy.model(torch.as_tensor(rollout["obs"][t, e : e + 1]))[0, rollout["action"][t, e]])
                assert float(got[t, e]) == pytest.approx(abs(q - y[0]), rel=1e-4, abs=1e-5)


# ------------------------------------------------------------------------------------------------ double-Q targets
@pytest.mark.parametrize("double", [True, False])
def test_dqn_learn_is_the_weighted_huber_on_the_double_q_target(double):
    policy = make_q(DQNPolicy, priority=True, priority_IS_weight=True)
    policy.cfg.learn.double = double
    b = q_batch()
    with torch.no_grad():
        q_on, q_tg = ref.f64(policy.model(b["next_obs"])), ref.f64(policy.target_model(b["next_obs"]))
        assert_argmax_differs(torch.as_tensor(q_on), torch.as_tensor(q_tg))
        y = ref.double_q_target(ref.f64(b["reward"]), ref.f64(b["discount"]), q_on, q_tg, double)
        q = ref.f64(policy.model(b["obs"]))[np.arange(B), b["action"].numpy()]
    td = q - y
    assert np.abs(td).max() > 1 and np.abs(td).min() < 1  # both sides of the Huber threshold
    expected = np.mean([ref.huber(d) * w for d, w in zip(td, ref.f64(b["weight"]))])
    stats = policy.learn(b)
    assert float(stats["loss"]) == pytest.approx(expected, rel=1e-5)
    np.testing.assert_allclose(ref.f64(stats["priority"]), np.abs(td), rtol=1e-5, atol=1e-6)


def _c51_reference(policy, b, online=None, target=None) -> np.ndarray:
    """Per-sample cross-entropy of C51 / Rainbow by hand, from the given (noisy) network copies."""
    online, target = online or policy.model, target or policy.target_model
    support = ref.f64(policy.model.support)
    q_on, q_tg = online(b["next_obs"]), target(b["next_obs"])
    assert_argmax_differs(q_on, q_tg)
    probs = ref.f64(target(b["next_obs"], full=True).softmax(-1))
    a_star = q_on.argmax(-1).numpy()  # the online net picks, the target net's distribution is projected
    projected = ref.project(probs[np.arange(B), a_star], ref.f64(b["reward"]), ref.f64(b["discount"]), support)
    return projected, a_star


def test_c51_projection_by_hand_with_atoms_between_on_and_outside_the_support():
    support = torch.linspace(-2.0, 2.0, 5)
    g = torch.Generator().manual_seed(2)
    probs = torch.rand(6, 5, generator=g).softmax(-1)
    reward = torch.tensor([0.3, -1.7, 2.5, -3.0, 1.0, 0.0])  # between atoms, near the ends, beyond both ends, on
    discount = torch.tensor([0.9, 0.9, 0.9, 0.5, 0.0, 0.5])
    got = categorical_projection(probs, reward, discount, support)
    expected = ref.project(ref.f64(probs), ref.f64(reward), ref.f64(discount), ref.f64(support))
    np.testing.assert_allclose(ref.f64(got), expected, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(expected.sum(1), 1.0)


def test_c51_learn_is_the_cross_entropy_with_the_projected_double_q_target():
    policy = make_q(C51Policy, model={"n_atom": 5, "v_min": -2.0, "v_max": 2.0})
    b = q_batch()
    with torch.no_grad():
        projected, _ = _c51_reference(policy, b)
        log_p = ref.f64(policy.model(b["obs"], full=True).log_softmax(-1))[np.arange(B), b["action"].numpy()]
    expected = np.mean([-(projected[i] * log_p[i]).sum() for i in range(B)])
    assert float(policy.learn(b)["loss"]) == pytest.approx(expected, rel=1e-5)


def test_rainbow_learn_is_c51_on_the_double_q_target_under_the_update_noise():
    policy = make_q(RainbowPolicy, model={"n_atom": 5, "v_min": -2.0, "v_max": 2.0})
    b = q_batch()
    online, target = copy.deepcopy(policy.model), copy.deepcopy(policy.target_model)
    noise = step_generator(policy.noise_seed, 0)
    with torch.no_grad():
        online.sample_noise(noise)
        target.sample_noise(noise)
        projected, _ = _c51_reference(policy, b, online, target)
        online.sample_noise(noise)
        log_p = ref.f64(online(b["obs"], full=True).log_softmax(-1))[np.arange(B), b["action"].numpy()]
    per_sample = [-(projected[i] * log_p[i]).sum() for i in range(B)]
    expected = np.mean([w * x for w, x in zip(ref.f64(b["weight"]), per_sample)])
    assert float(policy.learn(b)["loss"]) == pytest.approx(expected, rel=1e-5)


def test_qrdqn_learn_is_the_quantile_huber_loss_at_the_midpoints_on_the_double_q_target():
    policy = make_q(QRDQNPolicy, model={"num_quantiles": 5})
    b = q_batch()
    with torch.no_grad():
        assert_argmax_differs(policy.model(b["next_obs"]), policy.target_model(b["next_obs"]))
        a_star = policy.model(b["next_obs"]).argmax(-1).numpy()
        z_next = ref.f64(policy.target_model(b["next_obs"], full=True))[np.arange(B), a_star]
        z = ref.f64(policy.model(b["obs"], full=True))[np.arange(B), b["action"].numpy()]
    r, d = ref.f64(b["reward"]), ref.f64(b["discount"])
    target = [[r[i] + d[i] * z_next[i, j] for j in range(5)] for i in range(B)]
    tau = [[(k + 0.5) / 5 for k in range(5)]] * B
    expected = ref.quantile_huber(z, target, tau).mean()
    assert float(policy.learn(b)["loss"]) == pytest.approx(expected, rel=1e-5)


def test_iqn_learn_is_the_quantile_huber_loss_at_the_drawn_fractions_on_the_double_q_target():
    policy = make_q(IQNPolicy, model={"num_quantiles": 4, "quantile_embedding_size": 6, "head_hidden_sizes": [8]})
    policy.cfg.learn.kappa = 2.0
    b = q_batch()
    tau, tau_next = policy.draw_fractions(B)
    with torch.no_grad():
        assert_argmax_differs(policy.model(b["next_obs"]), policy.target_model(b["next_obs"]))
        a_star = policy.model(b["next_obs"]).argmax(-1).numpy()
        z_next = ref.f64(policy.target_model(b["next_obs"], tau_next))[np.arange(B), :, a_star]
        z = ref.f64(policy.model(b["obs"], tau))[np.arange(B), :, b["action"].numpy()]
    r, d = ref.f64(b["reward"]), ref.f64(b["discount"])
    target = [[r[i] + d[i] * z_next[i, j] for j in range(4)] for i in range(B)]
    expected = ref.quantile_huber(z, target, ref.f64(tau), kappa=2.0).mean()
    assert float(policy.learn(b)["loss"]) == pytest.approx(expected, rel=1e-5)


def test_fqf_learn_is_the_quantile_loss_and_the_papers_fraction_loss_on_the_double_q_target():
    model = {"num_quantiles": 4, "quantile_embedding_size": 6, "head_hidden_sizes": [8]}
    policy = make_q(FQFPolicy, model=model)
    policy.cfg.learn.ent_coef = 0.3
    with torch.no_grad():  # fractions far from uniform
        policy.model.fraction.weight.normal_(0.0, 1.0)
    b = q_batch()
    with torch.no_grad():
        assert_argmax_differs(policy.model(b["next_obs"]), policy.target_model(b["next_obs"]))
        a_star = policy.model(b["next_obs"]).argmax(-1).numpy()
        z_next = ref.f64(policy.target_model(b["next_obs"], full=True)[2])[np.arange(B), :, a_star]
        tau, tau_hat, values, inner, entropy = (ref.f64(x) for x in policy.model(b["obs"], full=True))
    a = b["action"].numpy()
    z, z_inner = values[np.arange(B), :, a], inner[np.arange(B), :, a]
    r, d = ref.f64(b["reward"]), ref.f64(b["discount"])
    target = [[r[i] + d[i] * z_next[i, j] for j in range(4)] for i in range(B)]
    quantile = ref.quantile_huber(z, target, tau_hat).mean()
    fraction = (ref.fqf_fraction_loss(tau, z, z_inner) - 0.3 * entropy).mean()
    stats = policy.learn(b)
    assert float(stats["fraction_loss"]) == pytest.approx(fraction, rel=1e-5, abs=1e-7)
    assert float(stats["loss"]) == pytest.approx(quantile + fraction, rel=1e-5)


# ------------------------------------------------------------------------------------------------ R2D2
def test_value_rescaling_and_its_inverse_by_hand():
    x = torch.tensor([-250.0, -3.0, -0.4, 0.0, 0.7, 5.0, 1000.0], dtype=torch.float64)
    np.testing.assert_allclose(ref.f64(value_rescale(x)), [ref.h(v) for v in x.tolist()], rtol=1e-12)
    y = value_rescale(x)
    inverse = [ref.h_inv(v) for v in y.tolist()]
    np.testing.assert_allclose(ref.f64(inverse_value_rescale(y)), inverse, rtol=1e-9, atol=1e-12)


def _r2d2_batch(steps: int = 5, n: int = 4) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(4)
    valid = torch.tensor([5, 5, 3, 4])
    mask = torch.arange(steps).unsqueeze(0) < valid.unsqueeze(1)
    terminated = torch.zeros(n, steps, dtype=torch.bool)
    terminated[2, 2] = True  # sequence 2 ends in a termination, sequence 3 is cut short without one
    return {
        "obs": torch.randn(n, steps + 1, 3, generator=g),
        "action": torch.randint(0, 4, (n, steps), generator=g) * mask,
        "reward": 4.0 * torch.randn(n, steps, generator=g) * mask,
        "terminated": terminated,
        "mask": mask,
        "burnin": torch.tensor([2, 0, 1, 2]),
        "h": torch.randn(n, 6, generator=g),
        "c": torch.randn(n, 6, generator=g),
        "weight": torch.rand(n, generator=g) + 0.5,
    }


def test_r2d2_learn_is_the_masked_rescaled_n_step_double_q_loss_after_burn_in():
    torch.manual_seed(0)
    cfg = R2D2Policy.default_config()
    cfg.device = "cpu"
    cfg.model.update(hidden_sizes=[8], lstm_size=6)
    cfg.sequence.update(seq_len=5, burnin=2, overlap=2)
    cfg.update(nstep=2, discount_factor=0.9, priority=True, priority_IS_weight=True)
    cfg.learn.update(batch_size=4, grad_clip_norm=None, target_update_freq=1000)
    policy = R2D2Policy(cfg, OBS, ACT)
    ref.perturb(policy.target_model, scale=1.0, seed=7)
    b = _r2d2_batch()
    start = (b["h"], b["c"])
    with torch.no_grad():
        q_on, _ = policy.model(b["obs"].transpose(0, 1), start)  # [L+1, B, A]
        q_tg, _ = policy.target_model(b["obs"].transpose(0, 1), start)
    assert_argmax_differs(q_on.reshape(-1, 4), q_tg.reshape(-1, 4))
    q_on, q_tg = ref.f64(q_on), ref.f64(q_tg)
    per_seq, priority = [], []
    for s in range(4):
        valid = int(b["mask"][s].sum())
        boot = [q_tg[t, s, int(np.argmax(q_on[t, s]))] for t in range(6)]  # the online net picks
        ended = bool(b["terminated"][s, valid - 1])
        y = ref.r2d2_targets(ref.f64(b["reward"][s]), boot, valid, ended, 0.9, 2, 1e-3)
        td = [q_on[t, s, int(b["action"][s, t])] - y[t] for t in range(int(b["burnin"][s]), valid)]
        per_seq.append(float(b["weight"][s]) * sum(d * d for d in td) / len(td))  # learn.loss "mse", R2D2's default
        priority.append(0.9 * max(abs(d) for d in td) + 0.1 * sum(abs(d) for d in td) / len(td))
    stats = policy.learn(b)
    assert float(stats["loss"]) == pytest.approx(np.mean(per_seq), rel=1e-5)
    np.testing.assert_allclose(ref.f64(stats["priority"]), priority, rtol=1e-5)


# ------------------------------------------------------------------------------------------------ TD3 / SAC
def _box_batch(n: int = 16, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {
        "obs": torch.randn(n, 3, generator=g),
        "action": torch.rand(n, 2, generator=g) * 2 - 1,
        "reward": 2.0 * torch.randn(n, generator=g),
        "next_obs": torch.randn(n, 3, generator=g),
        "discount": torch.where(torch.arange(n) % 4 == 1, 0.0, 0.9),
    }


def test_td3_critic_target_is_the_twin_minimum_at_the_clipped_smoothed_action_and_the_actor_is_delayed():
    torch.manual_seed(0)
    cfg = TD3Policy.default_config()
    cfg.model.update(actor_hidden_sizes=[8], critic_hidden_sizes=[8])
    cfg.learn.update(noise_sigma=0.6, grad_clip_norm=None, actor_update_freq=2)
    cfg.learn.noise_range.update(min=-0.5, max=0.5)
    policy = TD3Policy(cfg, gym.spaces.Box(-1.0, 1.0, (3,)), BOX)
    with torch.no_grad():  # the target actor's actions lie near the bounds, so the clip to [-1, 1] matters too
        policy.actor_target.net[-1].bias.fill_(1.2)
    b = _box_batch()
    raw = torch.randn(16, 2, generator=step_generator(policy._noise_seed, 0)).numpy() * 0.6
    assert (np.abs(raw) > 0.5).sum() >= 4  # some noise is clipped
    critic, critic_target = copy.deepcopy(policy.critic), copy.deepcopy(policy.critic_target)
    actor_before = [p.detach().clone() for p in policy.actor.parameters()]
    with torch.no_grad():
        mu = ref.f64(policy.actor_target(b["next_obs"]))
        smoothed = np.array([[min(max(mu[i, j] + min(max(raw[i, j], -0.5), 0.5), -1), 1) for j in range(2)]
                             for i in range(16)])  # fmt: skip
        q1n, q2n = (ref.f64(q) for q in critic_target(b["next_obs"], torch.as_tensor(smoothed, dtype=torch.float32)))
        assert int((q1n < q2n).sum()) not in (0, 16)  # the minimum picks from both critics
        y = [float(b["reward"][i]) + float(b["discount"][i]) * min(q1n[i], q2n[i]) for i in range(16)]
        q1, q2 = (ref.f64(q) for q in critic(b["obs"], b["action"]))
    expected = np.mean([(q1[i] - y[i]) ** 2 for i in range(16)]) + np.mean([(q2[i] - y[i]) ** 2 for i in range(16)])
    stats = policy.learn(b)
    assert float(stats["critic_loss"]) == pytest.approx(expected, rel=1e-5)
    assert float(stats["target_q_mean"]) == pytest.approx(np.mean(y), rel=1e-5, abs=1e-6)
    for p, p0 in zip(policy.actor.parameters(), actor_before):  # update 1 of 2: the actor waits
        torch.testing.assert_close(p.detach(), p0)
    actor_now = copy.deepcopy(policy.actor)
    b2 = _box_batch(seed=1)
    stats = policy.learn(b2)  # update 2 of 2: the actor maximizes Q1 of the critic this update just stepped
    with torch.no_grad():
        q1_pi, q2_pi = (ref.f64(q) for q in policy.critic(b2["obs"], actor_now(b2["obs"])))
    assert np.abs(q1_pi - q2_pi).min() > 1e-4  # Q2 in place of Q1 would give another loss
    assert float(stats["actor_loss"]) == pytest.approx(-np.mean(q1_pi), rel=1e-5)
    assert not all(torch.equal(p, p0) for p, p0 in zip(policy.actor.parameters(), actor_before))


def test_sac_losses_are_the_twin_minimum_soft_target_entropy_term_and_alpha_loss_by_hand():
    torch.manual_seed(0)
    cfg = SACPolicy.default_config()
    cfg.model.update(actor_hidden_sizes=[8], critic_hidden_sizes=[8])
    cfg.learn.update(alpha=0.3, auto_alpha=True, grad_clip_norm=None)
    policy = SACPolicy(cfg, gym.spaces.Box(-1.0, 1.0, (3,)), BOX)
    ref.perturb(policy.critic_target, scale=0.3, seed=7)  # the twin target critics then disagree on which is smaller
    ref.perturb(policy.critic.q2, scale=0.5, seed=3)  # and so do the online ones, at the actor's actions
    b = _box_batch()
    actor, critic, critic_target = (copy.deepcopy(m) for m in (policy.actor, policy.critic, policy.critic_target))
    log_alpha = float(policy.log_alpha.value.detach())
    torch.manual_seed(11)
    noise_next, noise_pi = torch.randn(16, 2), torch.randn(16, 2)  # the two draws learn makes, in its order
    torch.manual_seed(11)
    stats = policy.learn(b)
    alpha = math.exp(log_alpha)
    with torch.no_grad():
        mean_n, log_std_n = (ref.f64(x) for x in actor(b["next_obs"]))
        u_n = mean_n + np.exp(log_std_n) * noise_next.numpy()
        logp_n = [ref.squashed_log_prob(mean_n[i], log_std_n[i], noise_next[i]) for i in range(16)]
        next_action = torch.as_tensor(np.tanh(u_n), dtype=torch.float32)
        q1n, q2n = (ref.f64(q) for q in critic_target(b["next_obs"], next_action))
        assert int((q1n < q2n).sum()) not in (0, 16)
        r, d = ref.f64(b["reward"]), ref.f64(b["discount"])
        y = [r[i] + d[i] * (min(q1n[i], q2n[i]) - alpha * logp_n[i]) for i in range(16)]
        q1, q2 = (ref.f64(q) for q in critic(b["obs"], b["action"]))
        mean, log_std = (ref.f64(x) for x in actor(b["obs"]))
        u = mean + np.exp(log_std) * noise_pi.numpy()
        logp = [ref.squashed_log_prob(mean[i], log_std[i], noise_pi[i]) for i in range(16)]
        pq1, pq2 = (ref.f64(q) for q in policy.critic(b["obs"], torch.as_tensor(np.tanh(u), dtype=torch.float32)))
        assert int((pq1 < pq2).sum()) not in (0, 16)  # the actor's minimum picks from both critics
    critic_loss = np.mean([(q1[i] - y[i]) ** 2 for i in range(16)]) + np.mean([(q2[i] - y[i]) ** 2 for i in range(16)])
    actor_loss = np.mean([alpha * logp[i] - min(pq1[i], pq2[i]) for i in range(16)])
    alpha_loss = np.mean([-log_alpha * (logp[i] + policy.target_entropy) for i in range(16)])
    assert policy.target_entropy == -2.0
    assert float(stats["critic_loss"]) == pytest.approx(critic_loss, rel=1e-5)
    assert float(stats["actor_loss"]) == pytest.approx(actor_loss, rel=1e-4, abs=1e-6)
    assert float(stats["alpha_loss"]) == pytest.approx(alpha_loss, rel=1e-4, abs=1e-6)
    assert float(stats["entropy"]) == pytest.approx(-np.mean(logp), rel=1e-5)
    assert float(policy.log_alpha.value.detach()) != log_alpha  # auto_alpha stepped the temperature


# ------------------------------------------------------------------------------------------------ retrace (ACER)
def test_retrace_targets_by_hand_on_random_chunks():
    steps, cols, gamma = 7, 3, 0.9
    g = torch.Generator().manual_seed(5)
    q, v, r, v_next = (torch.randn(steps, cols, generator=g) for _ in range(4))
    rho = torch.rand(steps, cols, generator=g) * 2.5  # on both sides of the trace cut at 1
    terminated = torch.zeros(steps, cols, dtype=torch.bool)
    cut = torch.zeros(steps, cols, dtype=torch.bool)
    cut[-1] = True
    terminated[3, 0] = terminated[5, 2] = True
    cut[2, 1] = cut[4, 2] = True  # truncations: the next step starts another episode
    got = retrace_targets(q, v, r, rho, terminated, cut, v_next, gamma)
    for c in range(cols):
        expected = ref.retrace(*(ref.f64(x[:, c]) for x in (q, v, r, rho)), terminated[:, c], cut[:, c],
                               ref.f64(v_next[:, c]), gamma)  # fmt: skip
        np.testing.assert_allclose(ref.f64(got[:, c]), expected, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------------------------------------ prioritized replay
def _filled_per(priority: np.ndarray, alpha: float, beta: float, anneal: int = 0) -> PrioritizedReplayBuffer:
    rows, envs = priority.shape
    buf = PrioritizedReplayBuffer(
        ReplayBuffer(rows * envs, obs_shape=(1,), num_envs=envs, seed=0), alpha=alpha, beta=beta, anneal_step=anneal
    )
    zeros = np.zeros((rows, envs))
    buf.add(
        {
            "obs": np.arange(rows * envs, dtype=np.float32).reshape(rows, envs, 1),
            "action": zeros.astype(np.int64),
            "reward": zeros,
            "next_obs": zeros[..., None].astype(np.float32),
            "terminated": zeros.astype(bool),
            "truncated": zeros.astype(bool),
        },
        priority=priority,
    )
    return buf


def test_prioritized_replay_samples_p_alpha_over_the_sum_with_weights_n_p_to_minus_beta_over_the_max():
    delta = np.array([[0.05, 3.0], [1.0, 12.0], [0.4, 0.0], [7.0, 2.0]])  # |TD errors| of 8 transitions
    alpha, beta, eps = 0.6, 0.4, 1e-6
    buf = _filled_per(delta, alpha, beta, anneal=10)
    probs = ref.per_probabilities(delta.reshape(-1), alpha, eps)
    counts = np.zeros(8)
    for k in range(40):
        index, weights = buf.sample_indices(500)
        b = beta + (1 - beta) * min(1.0, k / 10)  # beta anneals over 10 draws
        np.testing.assert_allclose(weights, ref.per_weights(probs, b)[index], rtol=1e-9)
        counts += np.bincount(index, minlength=8)
    freq = counts / counts.sum()
    sigma = np.sqrt(probs * (1 - probs) / counts.sum())  # stratified draws vary less than this
    assert np.all(np.abs(freq - probs) < 4 * sigma + 1e-4)
    batch, weights, index = buf.sample(8)
    np.testing.assert_array_equal(batch["obs"][:, 0].numpy(), index)  # index i is row * envs + env


def test_prioritized_replay_priorities_after_an_update_are_abs_delta_plus_eps_to_alpha():
    buf = _filled_per(np.ones((2, 2)), 0.5, 1.0)
    buf.update_priorities(np.array([0, 3]), np.array([-8.0, 0.25]))
    probs = ref.per_probabilities([8.0, 1.0, 1.0, 0.25], 0.5, 1e-6)
    index, weights = buf.sample_indices(4)
    np.testing.assert_allclose(weights, ref.per_weights(probs, 1.0)[index], rtol=1e-9)
    np.testing.assert_allclose(buf.tree.leaves(np.arange(4)) / buf.tree.total, probs, rtol=1e-9)
