"""PPO: GAE, truncation bootstrapping, the clipped loss, discrete and Gaussian heads."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from ding_dist.policy.ppo import PPOPolicy, compute_gae

OBS = gym.spaces.Box(-1.0, 1.0, (3,))


def make(action_space, **learn) -> PPOPolicy:
    torch.manual_seed(0)
    cfg = PPOPolicy.default_config()
    cfg.model.hidden_sizes = [16]
    cfg.learn.update(learn)
    return PPOPolicy(cfg, OBS, action_space)


def test_gae_limits_match_monte_carlo_and_td():
    rng = np.random.default_rng(0)
    T, N, gamma = 6, 2, 0.9
    r, v, nv = rng.normal(size=(T, N)), rng.normal(size=(T, N)), rng.normal(size=(T, N))
    done = np.zeros((T, N), bool)
    done[2, 0] = True
    # lambda = 0: one-step TD residuals
    adv0, ret0 = compute_gae(r, v, nv, done, gamma, 0.0)
    np.testing.assert_allclose(adv0, r + gamma * nv * ~done - v, rtol=1e-5)
    np.testing.assert_allclose(ret0, adv0 + v, rtol=1e-5)
    # lambda = 1 with consistent next values (as in a rollout): discounted return to the episode end
    # (or bootstrap at the rollout end) minus value
    nv[:-1] = v[1:]
    adv1, _ = compute_gae(r, v, nv, done, gamma, 1.0)
    for n in range(N):
        for t in range(T):
            g, disc, k = 0.0, 1.0, t
            while True:
                g += disc * r[k, n]
                if done[k, n]:
                    break
                disc *= gamma
                if k == T - 1:
                    g += disc * nv[k, n]
                    break
                k += 1
            assert adv1[t, n] == pytest.approx(g - v[t, n], rel=1e-4, abs=1e-5)


def rollout(policy, T=4, N=2, seed=0):
    rng = np.random.default_rng(seed)
    obs = rng.uniform(-1, 1, size=(T, N, 3)).astype(np.float32)
    out = {"obs": obs, "next_obs": rng.uniform(-1, 1, size=(T, N, 3)).astype(np.float32)}
    acts, logps, values = [], [], []
    for t in range(T):
        a, ex = policy.collect_action(obs[t], 0)
        acts.append(a), logps.append(ex["logp"]), values.append(ex["value"])
    out.update(action=np.stack(acts), logp=np.stack(logps), value=np.stack(values))
    out["reward"] = rng.normal(size=(T, N)).astype(np.float32)
    out["terminated"] = np.zeros((T, N), bool)
    out["truncated"] = np.zeros((T, N), bool)
    out["last_obs"] = rng.uniform(-1, 1, size=(N, 3)).astype(np.float32)
    return out


def test_truncation_bootstraps_from_final_obs_and_termination_does_not():
    policy = make(gym.spaces.Discrete(2))
    ro = rollout(policy)
    gamma = policy.cfg.collect.discount_factor
    value_of = lambda x: policy.model(torch.as_tensor(x))[1].detach().numpy()  # noqa: E731
    for flag in ("truncated", "terminated"):
        r = {k: v.copy() for k, v in ro.items()}
        r[flag][1, 0] = True
        _, ret = policy.advantages(r)
        # ret[1, 0] = reward + (gamma * V(final obs) when truncated) + 0 * rest; lambda-return ends here.
        boot = gamma * value_of(r["next_obs"][1, 0][None])[0] if flag == "truncated" else 0.0
        assert ret[1, 0] == pytest.approx(r["reward"][1, 0] + boot, rel=1e-4, abs=1e-5)


@pytest.mark.parametrize("space", [gym.spaces.Discrete(3), gym.spaces.Box(-0.5, 0.5, (2,))])
def test_learn_raises_probability_of_advantaged_actions(space):
    policy = make(space, learning_rate=3e-3, epoch_per_collect=8, batch_size=4, adv_norm=True)
    ro = rollout(policy, T=8, N=2)
    # Reward only the step-0-env-0 action; everything else neutral, no bootstrapping effects.
    ro["reward"][:] = 0.0
    ro["reward"][0, 0] = 5.0
    ro["terminated"][:] = True
    obs0 = torch.as_tensor(ro["obs"][0, 0][None])
    act0 = torch.as_tensor(ro["action"][0, 0][None])

    @torch.no_grad()
    def logp():
        head, _ = policy.model(obs0)
        lp = policy.model.distribution(head).log_prob(act0)
        return float(lp if policy.discrete else lp.sum(-1))

    before = logp()
    stats = policy.learn(ro)
    assert logp() > before
    assert policy.train_iter == 8 * 4  # epochs x minibatches (16 samples / batch 4)
    assert {"loss", "policy_loss", "value_loss", "entropy", "approx_kl", "clip_frac"} <= set(stats)
    assert all(np.isfinite(float(v)) for v in stats.values())


def test_gaussian_actions_are_stored_raw_and_clipped_for_env():
    policy = make(gym.spaces.Box(-0.1, 0.1, (2,)))
    obs = np.zeros((256, 3), np.float32)
    action, extras = policy.collect_action(obs, 0)
    assert np.abs(action).max() > 0.1  # std 1: raw samples exceed the bounds
    env_action = policy.to_env_action(action)
    assert np.abs(env_action).max() <= 0.1 + 1e-7
    assert np.abs(policy.eval_action(obs)).max() <= 0.1 + 1e-7
    assert extras["logp"].shape == (256,) and extras["value"].shape == (256,)


def test_value_clipping_limits_value_step():
    policy = make(
        gym.spaces.Discrete(2),
        value_clip_ratio=0.0,
        value_weight=1.0,
        learning_rate=1e-2,
        epoch_per_collect=1,
        batch_size=8,
    )
    ro = rollout(policy, T=4, N=2)
    ro["terminated"][:] = True
    ro["reward"][:] = 100.0
    # with a zero clip range the unclipped term is the larger one, so it still trains the critic
    before = policy.model(torch.as_tensor(ro["obs"][0]))[1].detach()
    policy.learn(ro)
    after = policy.model(torch.as_tensor(ro["obs"][0]))[1].detach()
    assert (after > before).all()


def test_learning_rate_decays_linearly_per_collect_as_di_engines_lambda_lr_and_resumes():
    """DI-engine's ``lr_scheduler`` (LambdaLR stepped once per collect): collect k learns at
    ``lr * max(1 - k (1 - m) / N, m)``; the count lives in the optimizer's state (a resumed run continues)."""
    policy = make(gym.spaces.Discrete(2), learning_rate=0.01, lr_decay_collects=3, lr_decay_min_factor=0.25,
                  epoch_per_collect=1, batch_size=8)  # fmt: skip
    by_hand = [0.01 * max(1 - k * 0.75 / 3, 0.25) for k in range(5)]  # 0.01, 0.0075, 0.005, 0.0025, 0.0025
    seen = []
    for _ in range(3):
        policy.learn(rollout(policy))
        seen.append(policy.optimizer.param_groups[0]["lr"])
    resumed = make(gym.spaces.Discrete(2), learning_rate=0.01, lr_decay_collects=3, lr_decay_min_factor=0.25,
                   epoch_per_collect=1, batch_size=8)  # fmt: skip
    resumed.load_state_dict(policy.state_dict())
    for _ in range(2):
        resumed.learn(rollout(resumed))
        seen.append(resumed.optimizer.param_groups[0]["lr"])
    assert seen == pytest.approx(by_hand, rel=1e-12)
    constant = make(gym.spaces.Discrete(2), learning_rate=0.01, epoch_per_collect=1, batch_size=8)
    constant.learn(rollout(constant))
    assert constant.optimizer.param_groups[0]["lr"] == 0.01
