"""DQN: epsilon schedule, acting, the double-DQN target, target-network updates, learning."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from ding_dist.policy.dqn import DQNPolicy, QNetwork
from ding_dist.policy.exploration import apex_epsilon, epsilon_schedule
from tests.policy import reference

OBS, ACT = gym.spaces.Box(-1.0, 1.0, (3,)), gym.spaces.Discrete(4)


def make(**learn) -> DQNPolicy:
    torch.manual_seed(0)
    cfg = DQNPolicy.default_config()
    cfg.model.hidden_sizes = [16]
    cfg.learn.update(learn)
    return DQNPolicy(cfg, OBS, ACT)


def batch(n=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return {
        "obs": torch.randn(n, 3, generator=g),
        "action": torch.randint(0, 4, (n,), generator=g),
        "reward": torch.randn(n, generator=g),
        "next_obs": torch.randn(n, 3, generator=g),
        "discount": torch.where(torch.rand(n, generator=g) < 0.2, 0.0, 0.99),
    }


def test_epsilon_schedule():
    assert epsilon_schedule("linear", 1.0, 0.1, 100, 0) == 1.0
    assert epsilon_schedule("linear", 1.0, 0.1, 100, 50) == pytest.approx(0.55)
    assert epsilon_schedule("linear", 1.0, 0.1, 100, 10_000) == pytest.approx(0.1)
    assert epsilon_schedule("exp", 1.0, 0.1, 100, 100) == pytest.approx(0.1 + 0.9 / np.e)
    with pytest.raises(ValueError, match="'cosine'"):
        epsilon_schedule("cosine", 1, 0, 1, 0)


def test_collect_action_greedy_after_decay_and_random_before():
    policy = make()
    obs = np.random.default_rng(0).normal(size=(500, 3)).astype(np.float32)
    greedy = policy.eval_action(obs)
    late, extras = policy.collect_action(obs, env_step=10**9)  # eps = end = 0.05
    assert extras == {}
    assert 0.9 < (late == greedy).mean() < 1.0
    early, _ = policy.collect_action(obs, env_step=0)  # eps = 1: uniform over 4 actions
    assert set(early.tolist()) == {0, 1, 2, 3}
    assert 0.15 < (early == greedy).mean() < 0.4


def test_collect_action_draws_coins_then_random_actions_and_runs_the_network_only_when_one_env_is_greedy():
    policy = make()
    calls = []
    policy.model.register_forward_hook(lambda *_: calls.append(1))
    obs = np.random.default_rng(1).normal(size=(6, 3)).astype(np.float32)
    greedy = policy.eval_action(obs)
    calls.clear()
    for env_step, eps in [(0, 1.0), (5_000, 0.525), (10**9, 0.05)]:  # linear 1 -> 0.05 over 10k env steps
        assert policy.schedule_values(env_step)["train/epsilon"] == pytest.approx(eps)
        torch.manual_seed(7)
        coins, random = torch.rand(6), torch.randint(4, (6,))  # by hand: the draws, in that order
        expected = np.where((coins < eps).numpy(), random.numpy(), greedy)
        torch.manual_seed(7)
        actions, _ = policy.collect_action(obs, env_step)
        np.testing.assert_array_equal(actions, expected)
    assert len(calls) == 2  # eps = 1 explores everywhere: no forward; the other two act greedily somewhere
    one = obs[:1]
    torch.manual_seed(3)
    assert bool(torch.rand(1) < 0.525)  # this seed's coin explores: the network is not needed
    calls.clear()
    torch.manual_seed(3)
    policy.collect_action(one, 5_000)
    assert calls == []


@pytest.mark.parametrize("double, loss", [(True, "huber"), (False, "huber"), (True, "mse")])
def test_learn_loss_is_huber_on_double_dqn_target(double, loss):
    policy = make(target_update_freq=1000, double=double, loss=loss)
    reference.perturb(policy.target_model)  # a target network that is not the online one: their argmaxes differ
    b = batch()
    with torch.no_grad():  # independent computation of the target and loss before the update
        online, target_net = policy.model, policy.target_model
        a_online, a_target = online(b["next_obs"]).argmax(1), target_net(b["next_obs"]).argmax(1)
        assert (a_online != a_target).sum() >= 8
        a_star = a_online if double else a_target  # double DQN: the online net picks, the target net scores
        y = b["reward"] + b["discount"] * target_net(b["next_obs"])[torch.arange(32), a_star]
        q = online(b["obs"])[torch.arange(32), b["action"]]
        d = (q - y).double().numpy()
        expected = (reference.huber(d) if loss == "huber" else d * d).mean()
        assert np.abs(d).max() > 1  # both sides of the Huber threshold
    stats = policy.learn(b)
    assert stats["loss"] == pytest.approx(expected, rel=1e-5)
    assert stats["q_mean"] == pytest.approx(q.mean().item(), rel=1e-5)
    assert policy.train_iter == 1


def test_learning_reduces_td_error_on_fixed_batch():
    policy = make(target_update_freq=10**6, learning_rate=1e-2)
    b = batch()
    first = policy.learn(b)["loss"]
    for _ in range(200):
        last = policy.learn(b)["loss"]
    assert last < 0.2 * first


def test_hard_target_update_every_k_and_soft_update():
    policy = make(target_update_freq=3)
    for i in range(1, 4):
        policy.learn(batch(seed=i))
        same = all(torch.equal(a, b) for a, b in zip(policy.model.parameters(), policy.target_model.parameters()))
        assert same == (i == 3)
    soft = make(target_theta=0.5)
    before = [p.clone() for p in soft.target_model.parameters()]
    soft.learn(batch())
    for b0, t, o in zip(before, soft.target_model.parameters(), soft.model.parameters()):
        torch.testing.assert_close(t, 0.5 * b0 + 0.5 * o)


def test_dueling_head_is_value_plus_centered_advantage():
    torch.manual_seed(0)
    net = QNetwork(3, 4, [8], dueling=True)
    x = torch.randn(5, 3)
    h = net.body(x)
    adv = net.advantage(h)
    torch.testing.assert_close(net(x), net.value(h) + adv - adv.mean(-1, keepdim=True))
    with pytest.raises(ValueError, match="hidden"):
        QNetwork(3, 4, [])


def make_prioritized(**top) -> DQNPolicy:
    torch.manual_seed(0)
    cfg = DQNPolicy.default_config()
    cfg.model.hidden_sizes = [16]
    cfg.learn.target_update_freq = 1000
    cfg.update(top)
    return DQNPolicy(cfg, OBS, ACT)


def test_priority_is_the_td_error_and_is_weights_scale_the_per_sample_loss():
    b = batch()
    b["weight"] = torch.rand(32, generator=torch.Generator().manual_seed(1)) + 0.1
    policy = make_prioritized(priority=True, priority_IS_weight=True)
    with torch.no_grad():
        a_star = policy.model(b["next_obs"]).argmax(1)
        y = b["reward"] + b["discount"] * policy.target_model(b["next_obs"])[torch.arange(32), a_star]
        q = policy.model(b["obs"])[torch.arange(32), b["action"]]
        expected = (F.smooth_l1_loss(q, y, reduction="none") * b["weight"]).mean().item()
    stats = policy.learn(b)
    assert stats["loss"] == pytest.approx(expected, rel=1e-5)
    torch.testing.assert_close(stats["priority"], (q - y).abs())
    unweighted = make_prioritized(priority=True).learn(b)  # priority without IS weights: the plain mean
    assert unweighted["loss"] == pytest.approx(F.smooth_l1_loss(q, y).item(), rel=1e-5)
    assert "priority" not in make_prioritized().learn(b)
    with pytest.raises(ValueError, match="priority_IS_weight=True needs priority=True"):
        make_prioritized(priority_IS_weight=True)


def test_learner_updates_the_sampled_priorities():
    from ding_dist.data.prioritized import PrioritizedReplayBuffer
    from ding_dist.data.replay import ReplayBuffer
    from ding_dist.worker.learner import Learner

    buf = PrioritizedReplayBuffer(ReplayBuffer(40, (3,), num_envs=2, seed=0), alpha=0.5, beta=0.4)
    rng = np.random.default_rng(0)
    buf.add(
        {
            "obs": rng.normal(size=(20, 2, 3)).astype(np.float32),
            "action": rng.integers(0, 4, (20, 2)),
            "reward": rng.normal(size=(20, 2)).astype(np.float32),
            "next_obs": rng.normal(size=(20, 2, 3)).astype(np.float32),
            "terminated": np.zeros((20, 2), dtype=bool),
            "truncated": np.zeros((20, 2), dtype=bool),
        }
    )
    buf.update_priorities(np.arange(40), np.linspace(0.1, 4.0, 40))  # weights differ from 1
    before = buf.tree.leaves(np.arange(40))
    policy = make_prioritized(priority=True, priority_IS_weight=True)
    seen = {}
    learn = policy.learn
    policy.learn = lambda b: seen.update(batch=b, stats=learn(b)) or seen["stats"]
    sample = buf.sample
    buf.sample = lambda *a, **k: seen.setdefault("drawn", sample(*a, **k))
    learner = Learner(policy)
    learner.train_replay(buf, n_updates=1, rank_batch=8)
    index = seen["drawn"][2]
    torch.testing.assert_close(seen["batch"]["weight"], seen["drawn"][1])
    np.testing.assert_allclose(buf.tree.leaves(index), (seen["stats"]["priority"].numpy() + buf.eps) ** 0.5)
    others = np.setdiff1d(np.arange(40), index)
    np.testing.assert_array_equal(buf.tree.leaves(others), before[others])
    assert seen["drawn"][1].min() < 0.9
    assert set(learner.pop_stats()) == {"train/loss", "train/q_mean"}


def test_apex_epsilon_ladder_and_the_actor_index():
    assert apex_epsilon(0, 8) == 0.4  # one actor keeps the base epsilon
    assert apex_epsilon(7, 8) == pytest.approx(0.4**8)
    assert apex_epsilon(3, 8) == pytest.approx(0.4 ** (1 + 7 * 3 / 7))
    assert apex_epsilon(0, 1) == 0.4 and apex_epsilon(1, 3, base=0.5, alpha=2.0) == pytest.approx(0.25)
    with pytest.raises(ValueError, match="actor index must be in \\[0, 2\\), got 2"):
        apex_epsilon(2, 2)
    policy = make()
    policy.set_actor_index(1, 2)  # ladder off: the schedule
    assert policy.schedule_values(0)["train/epsilon"] == 1.0
    policy.cfg.other.eps_ladder.enable = True
    policy.set_actor_index(1, 2)
    assert policy.schedule_values(0)["train/epsilon"] == pytest.approx(0.4**8)
    obs = np.random.default_rng(0).normal(size=(300, 3)).astype(np.float32)
    assert (policy.collect_action(obs, env_step=0)[0] == policy.eval_action(obs)).mean() > 0.95  # not eps = 1


def _rollout(steps=5, envs=2, seed=0):
    """A fixed rollout: env 0 terminates at t=1, env 1 is truncated at t=2 (``[T, envs, ...]``, as collected)."""
    rng = np.random.default_rng(seed)
    terminated, truncated = np.zeros((steps, envs), bool), np.zeros((steps, envs), bool)
    terminated[1, 0], truncated[2, 1] = True, True
    return {
        "obs": rng.normal(size=(steps, envs, 3)).astype(np.float32),
        "action": rng.integers(0, 4, (steps, envs)),
        "reward": rng.normal(size=(steps, envs)).astype(np.float32),
        "next_obs": rng.normal(size=(steps, envs, 3)).astype(np.float32),
        "terminated": terminated,
        "truncated": truncated,
    }


@pytest.mark.parametrize("nstep", [1, 3])
@pytest.mark.parametrize("double", [True, False])
def test_actor_initial_priority_is_the_n_step_td_error_by_hand(nstep, double):
    policy = make_prioritized(priority=True, nstep=nstep, discount_factor=0.9)
    policy.cfg.learn.double = double
    with torch.no_grad():  # a target network that differs from the online one
        for p in policy.target_model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    r = _rollout()
    got = policy.initial_priority(r)
    assert got.shape == (5, 2) and got.dtype == np.float32

    def q(obs):  # Q(obs, .) of one observation, online and target
        return policy.model(torch.as_tensor(obs)[None])[0]

    def q_target(obs):
        return policy.target_model(torch.as_tensor(obs)[None])[0]

    want = np.zeros((5, 2))
    with torch.no_grad():
        for t, e in np.ndindex(5, 2):
            ret, k = 0.0, 0
            while True:  # rewards until n, the episode's end or the rollout's last step
                ret += 0.9**k * float(r["reward"][t + k, e])
                k += 1
                if k == nstep or t + k == 5 or r["terminated"][t + k - 1, e] or r["truncated"][t + k - 1, e]:
                    break
            nxt = r["next_obs"][t + k - 1, e]
            a_star = int((q(nxt) if double else q_target(nxt)).argmax())
            boot = 0.0 if r["terminated"][t + k - 1, e] else 0.9**k * float(q_target(nxt)[a_star])
            want[t, e] = abs(float(q(r["obs"][t, e])[r["action"][t, e]]) - (ret + boot))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # By hand for any n: env 0's terminating step has the target r (no bootstrap).
    with torch.no_grad():
        q10 = float(q(r["obs"][1, 0])[r["action"][1, 0]])
    assert got[1, 0] == pytest.approx(abs(q10 - float(r["reward"][1, 0])), rel=1e-5)
    assert policy.sends_priority and not make_prioritized().sends_priority


def test_actor_priority_equals_the_learners_for_a_rollout_just_added():
    from ding_dist.data.replay import ReplayBuffer, as_tensors

    policy = make_prioritized(priority=True, nstep=3, discount_factor=0.9)
    r = _rollout()
    buf = ReplayBuffer(10, (3,), num_envs=2, n_step=3, gamma=0.9, seed=0)
    buf.extend(r)
    offset, env = np.divmod(np.arange(10), 2)  # every transition, in [T, envs] order
    b = as_tensors(buf._gather(buf._n_step_at(buf._oldest(), offset, env)), "cpu")
    expected = policy.initial_priority(r).reshape(-1)
    np.testing.assert_allclose(policy.learn(b)["priority"].numpy(), expected, rtol=1e-5, atol=1e-6)
