"""PPO: GAE, truncation bootstrapping, the clipped loss, discrete and Gaussian heads."""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch

from ding_dist.policy.ppo import PPOPolicy, compute_gae
from tests.policy import reference

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
    assert adv0.dtype == np.float32  # float32 advantages from float64 inputs (the rollout's tensors' dtype)
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


# --- one minibatch against a hand computation ---------------------------------------------------------------------
GAMMA, LAM, CLIP, VALUE_CLIP, VALUE_WEIGHT, ENTROPY_WEIGHT = 0.9, 0.8, 0.2, 0.3, 0.7, 0.05


def _hand_rollout(policy: PPOPolicy, t: int = 6, n: int = 2) -> dict[str, np.ndarray]:
    """A rollout whose stored log-probabilities and values are off the network's (ratios from ~0.6 to ~1.6, value
    steps beyond the clip), with rewards of std ~10, a termination and a truncation."""
    ro = rollout(policy, T=t, N=n, seed=3)
    rng = np.random.default_rng(4)
    ro["logp"] = (ro["logp"] + rng.uniform(-0.5, 0.5, (t, n))).astype(np.float32)
    ro["value"] = (ro["value"] + rng.normal(0, 1.0, (t, n))).astype(np.float32)
    ro["reward"] = (10.0 * ro["reward"] + 3.0).astype(np.float32)
    ro["terminated"][2, 0] = True
    ro["truncated"][3, 1] = True
    return ro


@pytest.mark.parametrize("space", [gym.spaces.Discrete(3), gym.spaces.Box(-0.5, 0.5, (2,))], ids=["discrete", "box"])
@pytest.mark.parametrize("adv_norm, value_clip", [(True, VALUE_CLIP), (False, None)])
def test_one_minibatch_is_the_clipped_loss_on_gae_by_hand(space, adv_norm, value_clip):
    policy = make(
        space, epoch_per_collect=1, batch_size=12, clip_ratio=CLIP, value_clip_ratio=value_clip,
        value_weight=VALUE_WEIGHT, entropy_weight=ENTROPY_WEIGHT, adv_norm=adv_norm, grad_clip_norm=None,
    )  # fmt: skip
    policy.cfg.collect.update(discount_factor=GAMMA, gae_lambda=LAM)
    ro = _hand_rollout(policy)
    net = copy.deepcopy(policy.model)
    with torch.no_grad():
        last_v = net(torch.as_tensor(ro["last_obs"]))[1].double().numpy()
        final_v = net(torch.as_tensor(ro["next_obs"]))[1].double().numpy()
    reward = ro["reward"] + GAMMA * final_v * ro["truncated"]  # a truncation bootstraps from V(final obs)
    next_value = np.concatenate([ro["value"][1:], last_v[None]])
    adv = reference.gae(reward, ro["value"], next_value, ro["terminated"] | ro["truncated"], GAMMA, LAM)
    ret = torch.as_tensor((adv + ro["value"]).reshape(-1), dtype=torch.float32)
    assert adv.std() > 5  # the normalization's division matters
    a = torch.as_tensor((reference.normalized(adv) if adv_norm else adv).reshape(-1), dtype=torch.float32)

    head, v = net(torch.as_tensor(ro["obs"].reshape(12, 3)))
    dist = net.distribution(head)
    action = torch.as_tensor(ro["action"].reshape(12, *space.shape))
    logp = dist.log_prob(action if policy.discrete else action.float())
    logp, entropy = (logp, dist.entropy()) if policy.discrete else (logp.sum(-1), dist.entropy().sum(-1))
    ratio = (logp - torch.as_tensor(ro["logp"].reshape(-1))).exp()
    assert ratio.min() < 1 - CLIP and ratio.max() > 1 + CLIP  # the clip is active on both sides
    policy_loss = torch.stack([torch.max(-a[i] * ratio[i], -a[i] * ratio[i].clamp(1 - CLIP, 1 + CLIP))
                               for i in range(12)]).mean()  # fmt: skip
    v_old = torch.as_tensor(ro["value"].reshape(-1))
    value_loss = 0.5 * ((v - ret) ** 2).mean()
    v_clip = v_old + (v - v_old).clamp(-VALUE_CLIP, VALUE_CLIP)
    # the value clip binds on some rows and not on others (checked for both variants: the rollout is the same)
    assert ((v_clip - ret) ** 2 > (v - ret) ** 2).any() and ((v_clip - ret) ** 2 < (v - ret) ** 2).any()
    clipped_loss = 0.5 * torch.max((v - ret) ** 2, (v_clip - ret) ** 2).mean()
    value_loss = clipped_loss if value_clip is not None else value_loss
    loss = policy_loss + VALUE_WEIGHT * value_loss - ENTROPY_WEIGHT * entropy.mean()
    expected_grads = torch.autograd.grad(loss, list(net.parameters()))

    stats = policy.learn(ro)
    assert policy.train_iter == 1
    for key, want in (("loss", loss), ("policy_loss", policy_loss), ("value_loss", value_loss),
                      ("entropy", entropy.mean())):  # fmt: skip
        assert stats[key].item() == pytest.approx(want.item(), rel=1e-5, abs=1e-6), key
    assert stats["clip_frac"].item() == pytest.approx(((ratio - 1).abs() > CLIP).float().mean().item())
    assert stats["approx_kl"].item() == pytest.approx(((ratio - 1) - ratio.log()).mean().item(), rel=1e-4)
    reference.assert_grads_close(policy.model, expected_grads)
