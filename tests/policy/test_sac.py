"""SAC: squashed-Gaussian sampling, action bounds, the three losses, target updates, alpha tuning,
checkpoints, the pipeline, and identical parameters on two ranks."""

from __future__ import annotations

import copy
import math

import gymnasium as gym
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.distributions import Independent, Normal, TanhTransform, TransformedDistribution

from ding_dist.comm import get_rank
from ding_dist.config import ConfigError
from ding_dist.entry import evaluate, train
from ding_dist.entry.pipeline import load_config
from ding_dist.policy import get_policy_cls
from ding_dist.policy.sac import SACPolicy, squashed_sample

CONFIG = "configs/pendulum_sac_config.py"
OBS = gym.spaces.Box(-1.0, 1.0, (3,))
ACT = gym.spaces.Box(np.array([-2.0, 0.0], dtype=np.float32), np.array([2.0, 5.0], dtype=np.float32))


def make(seed: int = 0, action_space: gym.Space = ACT, obs_space: gym.Space = OBS, **learn) -> SACPolicy:
    torch.manual_seed(seed)
    cfg = SACPolicy.default_config()
    cfg.model.update(actor_hidden_sizes=[16, 16], critic_hidden_sizes=[16, 16])
    cfg.learn.update(learning_starts=100)
    cfg.learn.update(learn)
    return SACPolicy(cfg, obs_space, action_space)


def batch(n: int = 32, seed: int = 0, act_dim: int = 2) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {
        "obs": torch.randn(n, 3, generator=g),
        "action": torch.rand(n, act_dim, generator=g) * 2 - 1,
        "reward": torch.randn(n, generator=g),
        "next_obs": torch.randn(n, 3, generator=g),
        "discount": torch.where(torch.rand(n, generator=g) < 0.2, 0.0, 0.99),
    }


def flat(module: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in module.parameters()])


# --- networks and acting ----------------------------------------------------------------------------
def test_registered_and_default_config_has_no_unused_learning_rate():
    assert get_policy_cls("sac") is SACPolicy and not SACPolicy.on_policy
    cfg = SACPolicy.default_config()
    assert "learning_rate" not in cfg.learn
    assert {"learning_rate_policy", "learning_rate_q", "learning_rate_alpha"} <= set(cfg.learn)


def test_actions_shapes_and_bounds():
    policy = make()
    obs = np.random.default_rng(0).normal(size=(500, 3)).astype(np.float32) * 10
    for env_step in (0, 10**6):  # uniform random before learning_starts, then sampled from the actor
        action, extras = policy.collect_action(obs, env_step)
        assert extras == {} and action.shape == (500, 2) and action.dtype == np.float32
        assert np.abs(action).max() <= 1.0
        env_action = policy.to_env_action(action)
        assert (env_action >= ACT.low).all() and (env_action <= ACT.high).all()
    random_actions, _ = policy.collect_action(obs, 0)
    assert random_actions.min() < -0.9 and random_actions.max() > 0.9  # spread over the whole box
    greedy = policy.eval_action(obs)
    assert greedy.shape == (500, 2) and ACT.contains(greedy[0].astype(np.float32))
    assert (greedy >= ACT.low).all() and (greedy <= ACT.high).all()
    # [-1, 1] maps affinely onto [low, high]
    np.testing.assert_allclose(policy.to_env_action(np.array([[-1.0, -1.0], [1.0, 1.0], [0.0, 0.0]])),
                               [[-2.0, 0.0], [2.0, 5.0], [0.0, 2.5]])  # fmt: skip
    # eval is deterministic: tanh of the mean, mapped to the bounds
    with torch.no_grad():
        mean, _ = policy.actor(torch.as_tensor(obs))
    np.testing.assert_allclose(greedy, policy.to_env_action(torch.tanh(mean).numpy()), rtol=1e-6)


def test_squashed_log_prob_matches_direct_computation():
    g = torch.Generator().manual_seed(0)
    mean = torch.randn(1000, 3, generator=g, dtype=torch.float64)
    log_std = torch.rand(1000, 3, generator=g, dtype=torch.float64) * 1.5 - 1.0
    noise = torch.randn(1000, 3, generator=g, dtype=torch.float64)
    action, logp = squashed_sample(mean, log_std, noise)
    assert action.shape == (1000, 3) and logp.shape == (1000,)
    torch.testing.assert_close(action, torch.tanh(mean + log_std.exp() * noise))
    # torch's own change-of-variables density of tanh(N(mean, std))
    dist = TransformedDistribution(Independent(Normal(mean, log_std.exp()), 1), [TanhTransform()])
    safe = action.abs() < 1 - 1e-6  # atanh of a saturated float is not invertible
    torch.testing.assert_close(logp[safe.all(-1)], dist.log_prob(action)[safe.all(-1)], rtol=1e-6, atol=1e-6)
    # the textbook formula with the pre-tanh sample
    u = mean + log_std.exp() * noise
    naive = Normal(mean, log_std.exp()).log_prob(u).sum(-1) - torch.log(1 - torch.tanh(u) ** 2).sum(-1)
    torch.testing.assert_close(logp, naive, rtol=1e-6, atol=1e-6)
    # stays finite where the naive formula overflows (|u| large)
    _, extreme = squashed_sample(torch.full((1, 1), 30.0), torch.zeros(1, 1), torch.zeros(1, 1))
    assert torch.isfinite(extreme).all() and extreme.item() > 50


def test_squashed_density_integrates_to_one():
    mean, log_std = torch.tensor([[0.7]], dtype=torch.float64), torch.tensor([[-0.3]], dtype=torch.float64)
    u = torch.linspace(-12, 12, 200_001, dtype=torch.float64).unsqueeze(1)  # pre-tanh grid
    a = torch.tanh(u)
    noise = (u - mean) / log_std.exp()
    _, logp = squashed_sample(mean.expand_as(u), log_std.expand_as(u), noise)
    mass = torch.trapezoid(logp.exp(), a.squeeze(1))  # density over the squashed action
    assert mass.item() == pytest.approx(1.0, abs=1e-4)


# --- learning -------------------------------------------------------------------------------------
def test_critic_loss_and_gradient_are_the_critic_terms_only():
    policy = make(target_theta=0.01)
    b = batch()
    critic = copy.deepcopy(policy.critic)
    target_critic = copy.deepcopy(policy.critic_target)
    torch.manual_seed(123)  # learn draws the next-action noise first
    with torch.no_grad():
        mean, log_std = policy.actor(b["next_obs"])
        next_a, next_logp = squashed_sample(mean, log_std)
        alpha = policy.alpha
        next_v = torch.min(*target_critic(b["next_obs"], next_a)) - alpha * next_logp
        y = b["reward"] + b["discount"] * next_v
    q1, q2 = critic(b["obs"], b["action"])
    expected_loss = F.mse_loss(q1, y) + F.mse_loss(q2, y)
    expected_grads = torch.autograd.grad(expected_loss, list(critic.parameters()))

    torch.manual_seed(123)
    stats = policy.learn(b)
    assert stats["critic_loss"] == pytest.approx(expected_loss.item(), rel=1e-5)
    # the actor's backward ran through the frozen critic and added nothing to its gradients
    for p, g in zip(policy.critic.parameters(), expected_grads):
        torch.testing.assert_close(p.grad, g, rtol=1e-5, atol=1e-7)
    assert all(p.requires_grad for p in policy.critic.parameters())
    assert all(p.grad is not None for p in policy.actor.parameters())
    assert policy.train_iter == 1


def test_target_critic_is_polyak_average():
    policy = make(target_theta=0.25)
    before = [p.clone() for p in policy.critic_target.parameters()]
    policy.learn(batch())
    for t0, t, s in zip(before, policy.critic_target.parameters(), policy.critic.parameters()):
        torch.testing.assert_close(t, 0.75 * t0 + 0.25 * s)
    assert not any(p.requires_grad for p in policy.critic_target.parameters())


def _set_policy_std(policy: SACPolicy, log_std: float) -> None:
    """Make the actor output mean 0 and the given log-std for every observation."""
    actor = policy.actor
    x = 2 * (log_std - actor.log_std_min) / (actor.log_std_max - actor.log_std_min) - 1
    with torch.no_grad():
        for head, bias in ((actor.mean, 0.0), (actor.log_std, math.atanh(x))):
            head.weight.zero_()
            head.bias.fill_(bias)


@pytest.mark.parametrize("log_std, direction", [(-4.5, +1), (0.0, -1)])
def test_alpha_moves_toward_target_entropy(log_std, direction):
    policy = make(learning_rate_alpha=1e-2, learning_rate_policy=1e-9)  # keep the actor where we put it
    _set_policy_std(policy, log_std)
    before = policy.alpha
    for i in range(5):
        stats = policy.learn(batch(seed=i))
    # a narrow policy's entropy is below -action_dim (alpha grows), a wide one's above (alpha shrinks)
    assert np.sign(policy.target_entropy - float(stats["entropy"])) == direction
    assert np.sign(policy.alpha - before) == direction
    fixed = make(auto_alpha=False, alpha=0.3)
    fixed.learn(batch())
    assert fixed.alpha == pytest.approx(0.3)


def test_target_entropy_default_and_override():
    assert make().target_entropy == -2.0
    assert make(target_entropy=-0.5).target_entropy == -0.5


def test_learn_reduces_critic_loss_on_fixed_data():
    policy = make(learning_rate_q=3e-3)
    b = batch(n=64)
    losses = [policy.learn(b)["critic_loss"] for _ in range(300)]
    assert all(math.isfinite(v) for v in losses)
    assert np.mean(losses[-20:]) < 0.5 * np.mean(losses[:5])


def test_state_dict_round_trip_continues_identically():
    trained = make(seed=0)
    for i in range(3):
        trained.learn(batch(seed=i))
    state = trained.state_dict()
    assert set(state) == {*SACPolicy._state_attrs, "train_iter"}
    fresh = make(seed=1)
    assert not torch.equal(flat(fresh.actor), flat(trained.actor))
    fresh.load_state_dict(copy.deepcopy(state))
    assert fresh.train_iter == 3 and fresh.alpha == trained.alpha
    for name in ("actor", "critic", "critic_target", "log_alpha"):
        assert torch.equal(flat(getattr(fresh, name)), flat(getattr(trained, name))), name
    for policy in (trained, fresh):  # same RNG, same batch: the same next update
        torch.manual_seed(7)
        policy.learn(batch(seed=9))
    for name in ("actor", "critic", "critic_target", "log_alpha"):
        assert torch.equal(flat(getattr(fresh, name)), flat(getattr(trained, name))), name
    del state["alpha_optimizer"]
    with pytest.raises(KeyError, match="alpha_optimizer"):
        fresh.load_state_dict(state)


def test_bad_spaces_and_config_values():
    with pytest.raises(ValueError, match="Box action space"):
        make(action_space=gym.spaces.Discrete(3))
    with pytest.raises(ValueError, match="finite action bounds"):
        make(action_space=gym.spaces.Box(-np.inf, np.inf, (1,)))
    with pytest.raises(ValueError, match="target_theta"):
        make(target_theta=0.0)
    with pytest.raises(ValueError, match="learn.alpha must be > 0, got -0.1"):
        make(alpha=-0.1)
    with pytest.raises(ValueError, match="SAC here takes vector observations, got images"):
        make(obs_space=gym.spaces.Box(0, 255, (4, 84, 84), np.uint8))  # an MLP on raw pixels: refused


# --- the shipped config and the pipeline ---------------------------------------------------------
def test_shipped_config_compiles_and_rejects_typos():
    cfg = load_config(CONFIG)
    assert cfg.create_config.policy.type == "sac" and cfg.env.id == "Pendulum-v1"
    assert cfg.policy.learn.update_per_collect / cfg.policy.collect.n_sample == 1.0  # update-to-data ratio
    with pytest.raises(ConfigError, match="learning_rate_q"):
        load_config(CONFIG, overrides=["policy.learn.learning_rate_qq=1e-3"])
    with pytest.raises(ConfigError, match="policy.learn.learning_rate"):  # SAC has three rates, not one
        load_config(CONFIG, overrides=["policy.learn.learning_rate=1e-3"])


def tiny_pendulum():
    from ding_dist.config import read_config

    main, create = read_config(CONFIG)
    main.env.update(collector_env_num=2, evaluator_env_num=2, n_evaluator_episode=2, stop_value=None)
    main.policy.model.update(actor_hidden_sizes=[16], critic_hidden_sizes=[16])
    main.policy.learn.update(learning_starts=128, update_per_collect=4, batch_size=32)
    main.policy.collect.n_sample = 64
    main.policy.eval.eval_freq = 256
    main.policy.other.update(log_freq=256, checkpoint=dict(freq=256, keep_last=2))
    return main, create


def test_pipeline_runs_sac_and_checkpoint_evaluates(tmp_path):
    result = train(tiny_pendulum(), seed=1, exp_dir=tmp_path, max_env_steps=512)
    # learning starts once 128 env steps are in: iterations ending at 128, 192, ..., 512 (7) x 4 updates
    assert result["env_steps"] == 512 and result["train_iters"] == 7 * 4
    assert [step for step, _ in result["eval_history"]] == [256, 512]
    assert all(-16.3 * 200 <= ret <= 0 for _, ret in result["eval_history"])  # Pendulum's reward range
    out = evaluate(tiny_pendulum(), tmp_path, episodes=2)
    assert len(out["returns"]) == 2 and -16.3 * 200 <= out["mean_return"] <= 0


@pytest.mark.slow
def test_pendulum_reaches_minus_200(tmp_path):
    result = train(CONFIG, seed=0, exp_dir=tmp_path, max_env_steps=30_000)  # stops at env.stop_value
    assert result["stopped_by"] == "stop_value", result["eval_history"]
    assert result["best_eval_return"] >= -200 and result["env_steps"] <= 30_000


# --- two ranks ------------------------------------------------------------------------------------
def _learn_on_rank(steps: int) -> dict:
    rank = get_rank()
    policy = make(seed=rank)  # different initializations: distribute gives every rank rank 0's
    init = flat(policy.actor).clone()
    torch.manual_seed(100 + rank)  # different sampling noise per rank
    losses = [policy.learn(batch(seed=10 * rank + i))["critic_loss"] for i in range(steps)]
    return {
        "init": init,
        "losses": losses,
        "params": {n: flat(getattr(policy, n)) for n in ("actor", "critic", "critic_target", "log_alpha")},
        "adam_step": [s["step"].item() for s in policy.actor_optimizer.state.values()],
    }


def test_two_ranks_keep_bitwise_identical_parameters(run_ranks):
    r0, r1 = run_ranks(_learn_on_rank, 2, 4)
    assert torch.equal(r0["init"], r1["init"])  # rank 0's initial parameters everywhere
    assert r0["losses"] != r1["losses"]  # the ranks really learned on different data
    for name in r0["params"]:
        assert torch.equal(r0["params"][name], r1["params"][name]), name
    assert not torch.equal(r0["params"]["actor"], r0["init"])
    assert r0["adam_step"] == r1["adam_step"] == [4.0] * len(r0["adam_step"])
