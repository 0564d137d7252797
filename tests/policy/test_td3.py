"""TD3 and DDPG: the critic target (smoothed, twin min) against a hand computation, the delayed actor update,
target networks, exploration, checkpoints, DI-engine's own files, and training to a threshold (quality)."""

from __future__ import annotations

import copy
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from ding_dist.config import ConfigError
from ding_dist.entry import pipeline
from ding_dist.entry.pipeline import load_config
from ding_dist.policy import get_policy_cls
from ding_dist.policy.ddpg import DDPGPolicy
from ding_dist.policy.td3 import TD3Policy

REPO = Path(__file__).resolve().parents[2]
DING_FILES = REPO / "tests" / "config" / "ding_files"
OBS = gym.spaces.Box(-1.0, 1.0, (3,))
ACT = gym.spaces.Box(np.array([-2.0, 0.0], dtype=np.float32), np.array([2.0, 5.0], dtype=np.float32))


def make(cls: type = TD3Policy, seed: int = 0, **learn) -> TD3Policy:
    torch.manual_seed(seed)
    cfg = cls.default_config()
    cfg.model.update(actor_hidden_sizes=[8], critic_hidden_sizes=[8])
    cfg.learn.update(learning_starts=100, learning_rate_actor=1e-2, learning_rate_critic=1e-2)
    cfg.learn.update(learn)
    return cls(cfg, OBS, ACT)


def batch(n: int = 16, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {
        "obs": torch.randn(n, 3, generator=g),
        "action": torch.rand(n, 2, generator=g) * 2 - 1,
        "reward": torch.randn(n, generator=g),
        "next_obs": torch.randn(n, 3, generator=g),
        "discount": torch.where(torch.rand(n, generator=g) < 0.25, 0.0, 0.9),
    }


def flat(module: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in module.parameters()])


def test_registered_with_di_engine_defaults():
    assert get_policy_cls("td3") is TD3Policy and get_policy_cls("ddpg") is DDPGPolicy
    td3, ddpg = TD3Policy.default_config(), DDPGPolicy.default_config()
    assert (td3.model.twin_critic, td3.learn.actor_update_freq, td3.learn.noise) == (True, 2, True)
    assert (td3.learn.noise_sigma, dict(td3.learn.noise_range)) == (0.2, {"min": -0.5, "max": 0.5})
    assert (ddpg.model.twin_critic, ddpg.learn.actor_update_freq, ddpg.learn.noise) == (False, 1, False)
    assert td3.collect.noise_sigma == ddpg.collect.noise_sigma == 0.1
    assert "learning_rate" not in td3.learn


def test_td3_critic_loss_is_the_smoothed_twin_min_target():
    policy = make(noise_sigma=0.3, noise_range={"min": -0.2, "max": 0.4})
    b = batch()
    actor_t, critic_t, critic = (copy.deepcopy(m) for m in (policy.actor_target, policy.critic_target, policy.critic))
    noise = policy.smoothing_noise(16)  # update 0's draw (a function of the seed and the update number)
    assert noise.shape == (16, 2) and noise.min() >= -0.2 and noise.max() <= 0.4
    assert (noise == -0.2).any() and (noise == 0.4).any()  # sigma 0.3 reaches both clip bounds in 32 draws
    with torch.no_grad():
        next_a = (actor_t(b["next_obs"]) + noise).clamp(-1, 1)
        q1_t, q2_t = critic_t(b["next_obs"], next_a)
        y = b["reward"] + b["discount"] * torch.minimum(q1_t, q2_t)
    q1, q2 = critic(b["obs"], b["action"])
    expected = F.mse_loss(q1, y) + F.mse_loss(q2, y)
    grads = torch.autograd.grad(expected, list(critic.parameters()))

    stats = policy.learn(b)
    assert stats["critic_loss"].item() == pytest.approx(expected.item(), rel=1e-6)
    for p, g in zip(policy.critic.parameters(), grads):  # update 1: the critic step only, no actor term
        torch.testing.assert_close(p.grad, g, rtol=1e-5, atol=1e-7)
    assert not torch.equal(policy.smoothing_noise(16), noise)  # a fresh draw for update 1


def test_td3_actor_updates_every_actor_update_freq_th_update_with_loss_minus_q1():
    policy = make(actor_update_freq=3)
    changed = []
    for i in range(6):
        actor_before, critic_before = copy.deepcopy(policy.actor), flat(policy.critic)
        b = batch(seed=i)
        stats = policy.learn(b)
        changed.append(not torch.equal(flat(actor_before), flat(policy.actor)))
        assert not torch.equal(critic_before, flat(policy.critic))  # the critic learns on every update
        if changed[-1]:  # the loss of the update: -Q_1(s, pi(s)) with the critic just updated
            q1, _ = policy.critic(b["obs"], actor_before(b["obs"]))
            assert stats["actor_loss"].item() == pytest.approx(-q1.mean().item(), rel=1e-5)
    assert changed == [False, False, True, False, False, True]
    assert policy.train_iter == 6


def test_ddpg_one_critic_no_smoothing_actor_every_update():
    policy = make(DDPGPolicy, target_theta=0.25)
    b = batch()
    actor_t, critic_t, critic = (copy.deepcopy(m) for m in (policy.actor_target, policy.critic_target, policy.critic))
    with torch.no_grad():
        y = b["reward"] + b["discount"] * critic_t(b["next_obs"], actor_t(b["next_obs"]))
    expected = F.mse_loss(critic(b["obs"], b["action"]), y)
    actor_before = flat(policy.actor)
    stats = policy.learn(b)
    assert stats["critic_loss"].item() == pytest.approx(expected.item(), rel=1e-6)
    assert not torch.equal(actor_before, flat(policy.actor))  # actor_update_freq=1
    # both targets: Polyak averages of the networks after the update
    pairs = ((policy.critic_target, policy.critic, critic_t), (policy.actor_target, policy.actor, actor_t))
    for target, online, before in pairs:
        for t0, t, s in zip(before.parameters(), target.parameters(), online.parameters()):
            torch.testing.assert_close(t, 0.75 * t0 + 0.25 * s)


def test_exploration_bounds_and_greedy_eval():
    policy = make(learning_starts=100)
    obs = np.random.default_rng(0).normal(size=(400, 3)).astype(np.float32)
    random_a, _ = policy.collect_action(obs, env_step=0)
    noisy_a, extras = policy.collect_action(obs, env_step=100)
    assert extras == {} and random_a.shape == noisy_a.shape == (400, 2)
    assert np.abs(random_a).max() <= 1 and random_a.min() < -0.9 and random_a.max() > 0.9  # uniform on the box
    with torch.no_grad():
        greedy = policy.actor(torch.as_tensor(obs)).numpy()
    np.testing.assert_allclose(np.std(noisy_a - greedy, axis=0), 0.1, rtol=0.15)  # collect.noise_sigma
    np.testing.assert_allclose(policy.eval_action(obs), policy.to_env_action(greedy), rtol=1e-6)
    np.testing.assert_allclose(policy.to_env_action(np.array([[-1.0, 1.0], [0.0, 0.0]])), [[-2.0, 5.0], [0.0, 2.5]])


def test_state_dict_round_trip_continues_identically():
    trained = make(seed=0)
    for i in range(3):
        trained.learn(batch(seed=i))
    fresh = make(seed=1)
    assert not torch.equal(fresh.actor.noise_seed, trained.actor.noise_seed)
    fresh.load_state_dict(copy.deepcopy(trained.state_dict()))
    for policy in (trained, fresh):
        policy.learn(batch(seed=9))  # update 4: the actor's turn, smoothing noise from the restored seed
    for name in ("actor", "actor_target", "critic", "critic_target"):
        assert torch.equal(flat(getattr(fresh, name)), flat(getattr(trained, name))), name


def test_bad_spaces_and_values():
    with pytest.raises(ValueError, match="TD3 needs a Box action space"):
        TD3Policy(TD3Policy.default_config(), OBS, gym.spaces.Discrete(2))
    with pytest.raises(ValueError, match="DDPG needs finite action bounds"):
        DDPGPolicy(DDPGPolicy.default_config(), OBS, gym.spaces.Box(-np.inf, np.inf, (1,)))
    with pytest.raises(ValueError, match="actor_update_freq"):
        make(actor_update_freq=0)


# --- configs: ours and DI-engine's own files ---------------------------------------------------------
def test_shipped_configs_compile():
    for algo in ("td3", "ddpg"):
        cfg = load_config(REPO / "configs" / f"pendulum_{algo}_config.py")
        assert cfg.create_config.policy.type == algo and cfg.env.id == "Pendulum-v1"
    with pytest.raises(ConfigError, match="learning_rate_actor"):
        load_config(REPO / "configs" / "pendulum_td3_config.py", overrides=["policy.learn.learning_rate_actr=1"])
    for bad, message in (("learn.actor_update_freq=0", ">= 1, got 0"), ("collect.noise_sigma=-0.1", "number >= 0")):
        with pytest.raises(ConfigError, match=message):
            load_config(REPO / "configs" / "pendulum_td3_config.py", overrides=[f"policy.{bad}"])


def test_di_engine_td3_and_ddpg_files_get_di_engines_meaning():
    td3 = load_config(DING_FILES / "pendulum_td3_config.py").policy
    assert (td3.model.twin_critic, td3.model.actor_hidden_sizes, td3.model.critic_hidden_sizes) == (
        True,
        [64] * 2,
        [64] * 2,
    )
    assert (td3.learn.actor_update_freq, td3.learn.noise, td3.learn.noise_sigma) == (2, True, 0.1)
    assert (td3.learn.update_per_collect, td3.collect.n_sample, td3.learn.batch_size) == (2, 48, 128)
    assert (td3.learn.learning_starts, td3.learn.target_theta, td3.discount_factor) == (25000, 0.005, 0.99)
    assert td3.eval.eval_freq == 2400  # 100 train iters = 50 collects of 48 env steps
    ddpg = load_config(DING_FILES / "pendulum_ddpg_config.py").policy
    assert (ddpg.model.twin_critic, ddpg.learn.actor_update_freq, ddpg.learn.noise) == (False, 1, False)
    assert (ddpg.learn.learning_starts, ddpg.other.replay_buffer.replay_buffer_size) == (800, 20000)


def test_di_engine_ddpg_file_trains(tmp_path):
    result = pipeline.train(str(DING_FILES / "pendulum_ddpg_config.py"), max_env_steps=912, exp_dir=tmp_path / "r")
    # 19 collects of 48 env steps; updates from env step 800 (the 17th collect on: 3 collects), 2 per collect
    assert (result["env_steps"], result["train_iters"]) == (912, 3 * 2)


@pytest.mark.quality
@pytest.mark.parametrize("algo", ["td3", "ddpg"])
def test_pendulum_reaches_minus_200(tmp_path, algo):
    result = pipeline.train(
        str(REPO / "configs" / f"pendulum_{algo}_config.py"), exp_dir=tmp_path, max_env_steps=30_000
    )
    assert result["stopped_by"] == "stop_value", result["eval_history"]
    assert result["best_eval_return"] >= -200
    print(f"reached the threshold in {result['env_steps']} env steps, {result['wall_time_s']:.1f} s")  # for docs/rl.md
