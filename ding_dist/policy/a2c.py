"""A2C: synchronous advantage actor-critic (Mnih et al. 2016, arXiv:1602.01783), DI-engine's variant.

PPO's network, acting and GAE (:class:`~ding_dist.policy.ppo.PPOPolicy`), with one plain policy-gradient step per
rollout instead of PPO's clipped epochs: on the whole rollout (every env step of every rank, DI-engine's on-policy
pipeline trains once per collect on all of it; ``learn.batch_size`` is not read),

- advantages ``A`` by GAE (``collect.discount_factor``, ``collect.gae_lambda``), value targets ``R = V_old + A``;
  ``learn.adv_norm`` normalizes ``A`` with the statistics of the whole global rollout;
- ``loss = -mean(log pi(a|s) * A) + value_weight * mean((R - V(s))**2) - entropy_weight * mean(H(pi(.|s)))``
  (DI-engine's ``a2c_error``: a squared error without a half), then ``learn.grad_clip_norm`` and one Adam step.

Distributed: the loss is each rank's mean over its samples and the sync engine averages the gradients, so with
equal shares N ranks apply the step one process takes on the union; with unequal shares (rollout preemption) each
rank's terms are weighted by its share of the global sample count.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
from torch import nn

from ding_dist.comm import get_world_size
from ding_dist.policy.ppo import PPOPolicy
from ding_dist.policy.registry import register_policy
from ding_dist.utils.keys import Key

__all__ = ["A2CPolicy"]


@register_policy("a2c")
class A2CPolicy(PPOPolicy):
    """A2C for discrete (Categorical) or continuous (Gaussian) actions, vector or image observations (PPO's nets).

    Config: the keys listed below (generated from ``keys``); DI-engine's defaults.

    Example::

        policy = A2CPolicy(A2CPolicy.default_config(), env.single_observation_space, env.single_action_space)
        actions, extras = policy.collect_action(obs, env_step=0)  # extras: logp, value
        stats = policy.learn(rollout)  # {"loss": ..., "policy_loss": ..., "value_loss": ..., "entropy": ...}

    Reference tests: tests/policy/test_a2c.py (the loss and gradient by hand, with and without advantage
    normalization).
    """

    on_policy = True
    pbt_keys = ("learn.learning_rate", "learn.entropy_weight")

    keys = PPOPolicy.keys.plus(
        Key("learn.learning_rate", 0.001),
        Key("learn.entropy_weight", 0.01),
        Key(
            "learn.adv_norm", False, "normalize advantages with the statistics of the whole global rollout (all ranks)"
        ),
        Key(
            "collect.n_sample",
            80,
            "env steps per iteration, the run's total (each rank: n_sample / N)",
            reader="pipeline",
        ),
        Key("collect.discount_factor", 0.9),
    ).minus(
        "learn.batch_size",
        "learn.epoch_per_collect",
        "learn.clip_ratio",
        "learn.value_clip_ratio",
        "learn.lr_decay_collects",
        "learn.lr_decay_min_factor",
    )

    def learn(self, rollout: Mapping[str, np.ndarray]) -> dict[str, torch.Tensor]:
        """One A2C step on one rollout (fields ``[T, N, ...]`` plus ``last_obs`` ``[N, ...]``; optional
        ``rank_samples``: every rank's sample count, set by the data-parallel loop under preemption)."""
        lc = self.cfg.learn
        adv, ret = self.advantages(rollout)  # GAE with the network before this step, R = V_old + A

        def flat(x: np.ndarray) -> torch.Tensor:  # [T, N, ...] -> [T*N, ...]
            return self.as_tensor(x.reshape(-1, *x.shape[2:]))

        obs = self._obs(rollout["obs"].reshape(-1, *rollout["obs"].shape[2:]))
        action = flat(rollout["action"]).long() if self.discrete else flat(rollout["action"])
        a, r = flat(adv), flat(ret)
        counts = rollout.get("rank_samples")
        total = a.shape[0] * get_world_size(self.sync_group) if counts is None else int(np.sum(counts))
        scale = get_world_size(self.sync_group) / total  # this rank's part of the global mean, times N

        def mean(x: torch.Tensor) -> torch.Tensor:
            return x.sum() * scale

        if lc.adv_norm:  # the statistics of the whole global rollout (one allreduce)
            adv_mean, adv_std = self.global_minibatch_stats(a.reshape(1, -1), total)
            a = (a - adv_mean[0]) / (adv_std[0] + 1e-8)

        head, v = self.train_model(obs)
        dist = self.model.distribution(head)
        logp = self._log_prob(dist, action)
        entropy = dist.entropy() if self.discrete else dist.entropy().sum(-1)
        policy_loss = -mean(logp * a)
        value_loss = mean((r - v) ** 2)
        entropy_mean = mean(entropy)
        loss = policy_loss + lc.value_weight * value_loss - lc.entropy_weight * entropy_mean

        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()  # through the wrapped model: gradients are averaged across ranks
        if lc.grad_clip_norm is not None:
            nn.utils.clip_grad_norm_(self.model.parameters(), lc.grad_clip_norm)
        self.optimizer.step()
        self.train_iter += 1
        if self.obs_norm is not None:
            self.obs_norm.sync()  # one allreduce; the next rollout is collected with the merged statistics
        return {
            "loss": loss.detach(),
            "policy_loss": policy_loss.detach(),
            "value_loss": value_loss.detach(),
            "entropy": entropy_mean.detach(),
        }
