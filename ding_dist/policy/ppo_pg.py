"""PPO-PG: PPO's clipped objective on complete episodes with Monte-Carlo returns (no critic), DI-engine's ``ppo_pg``.

PG's pieces (:mod:`ding_dist.policy.pg`: the policy network, episodes joined across rollouts, returns
``G_t = r_t + gamma * G_{t+1}``, the step once the ranks hold ``collect.n_episode`` complete episodes) with PPO's
update (:func:`~ding_dist.policy.ppo.clipped_surrogate`, :func:`~ding_dist.policy.ppo.minibatch_plan`): the
log-probability of each collected action is kept with its step, and once enough episodes are complete,
``learn.epoch_per_collect`` epochs of shuffled minibatches of ``learn.batch_size`` samples each take

``loss = mean(max(-G * ratio, -G * clip(ratio, 1 - clip_ratio, 1 + clip_ratio))) - entropy_weight * mean(H)``

with ``ratio = pi(a|s) / pi_old(a|s)`` (DI-engine's ``ppo_policy_error`` with the return as the advantage: no
value bootstrapping, no normalization), then ``learn.grad_clip_norm`` and Adam. ``learn.ppo_param_init`` (on by
default, as in DI-engine) initializes every linear layer orthogonally with zero biases.

Distributed: the ranks' sample counts differ (episodes have different lengths), so every rank runs the same number
of minibatches and takes a share of each proportional to its samples (:func:`~ding_dist.policy.ppo.minibatch_plan`):
after the sync engine's average each update is the one a single process makes on a global minibatch of the union of
the ranks' episodes; with one minibatch (``batch_size`` at least every sample) exactly the update of one process.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from ding_dist.comm import get_rank, get_world_size
from ding_dist.policy.base import obs_dim
from ding_dist.policy.pg import PGPolicy
from ding_dist.policy.ppo import clipped_surrogate, minibatch_plan
from ding_dist.policy.registry import register_policy
from ding_dist.utils.keys import Key

__all__ = ["PPOPGPolicy"]

_STATS = ("loss", "policy_loss", "entropy", "approx_kl", "clip_frac", "return_mean")


@register_policy("ppo_pg")
class PPOPGPolicy(PGPolicy):
    """PPO's clipped objective on Monte-Carlo returns of complete episodes, Discrete or Box actions (vector obs).

    Config: the keys listed below (generated from ``keys``). DI-engine's defaults.

    Example::

        policy = PPOPGPolicy(PPOPGPolicy.default_config(), env.single_observation_space, env.single_action_space)
        actions, extras = policy.collect_action(obs, env_step=0)  # extras: logp
        stats = policy.learn(rollout)  # PPO epochs once n_episode episodes are complete

    Reference tests: tests/policy/test_ppo_pg.py (the clipped loss on an episode across two rollouts, by hand).
    """

    on_policy = True
    step_fields = ("logp",)

    keys = PGPolicy.keys.plus(
        Key("learn.batch_size", 64, "", ">= 1"),
        Key("learn.learning_rate", 0.0003),
        Key("learn.entropy_weight", 0.0),
        Key("learn.grad_clip_norm", 0.5),
        Key("learn.epoch_per_collect", 10, "epochs over each rollout", ">= 1"),
        Key("learn.clip_ratio", 0.2, "policy ratio clip", "> 0"),
        Key(
            "learn.ppo_param_init",
            True,
            "PPO-PG: orthogonal initial weights and zero biases (DI-engine's ppo_param_init)",
        ),
    )

    def __init__(
        self,
        cfg: Mapping[str, Any],
        obs_space: gym.Space,
        action_space: gym.Space,
        device: str | torch.device = "cpu",
    ) -> None:
        super().__init__(cfg, obs_space, action_space, device)
        zero = torch.zeros((), device=self.device)  # the same keys from the first call on (ranks report alike)
        self._stats = dict.fromkeys(_STATS, zero)

    def _init_model(self) -> None:
        """DI-engine's ``ppo_param_init``: orthogonal weights, zero biases; Box actions: weights times 0.01 and a
        log-std of -0.5."""
        if not self.cfg.learn.get("ppo_param_init", True):
            return
        for layer in self.model.modules():
            if isinstance(layer, nn.Linear):
                nn.init.orthogonal_(layer.weight)
                nn.init.zeros_(layer.bias)
                if not self.discrete:
                    layer.weight.data.mul_(0.01)
        if not self.discrete:
            nn.init.constant_(self.model.log_std, -0.5)

    @torch.no_grad()
    def collect_action(self, obs: np.ndarray, env_step: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        dist = self.model.distribution(self.model(self._flat_obs(obs)))
        action = dist.sample()
        logp = dist.log_prob(action) if self.discrete else dist.log_prob(action).sum(-1)
        return action.cpu().numpy(), {"logp": logp.cpu().numpy()}

    def learn(self, rollout: Mapping[str, np.ndarray]) -> dict[str, torch.Tensor]:
        """Take in one rollout (fields ``[T, N, ...]`` with ``logp``, the one after the last); all PPO epochs once
        the ranks hold at least ``collect.n_episode`` complete episodes together, on all of them."""
        lc = self.cfg.learn
        self._close_episodes(rollout)
        world = get_world_size(self.sync_group)
        episodes, rank_samples, _ = self._rank_counts()
        if episodes < int(self.cfg.collect.n_episode):  # the run's total, over every rank
            return self._stats

        done = self._take_episodes()

        def cat(i: int) -> torch.Tensor:  # a rank may hold no complete episode (its share is then empty)
            parts = [e[i] for e in done]
            return self.as_tensor(np.concatenate(parts) if parts else np.zeros((0,)))

        obs = cat(0).reshape(-1, obs_dim(self.obs_space))
        ret, old_logp = cat(2), cat(3)
        action = cat(1).reshape(len(ret), *self.action_space.shape)
        action = action.long() if self.discrete else action
        size = rank_samples[get_rank(self.sync_group)]
        n_minibatch, batch, global_batch = minibatch_plan(self.plan, size, rank_samples)
        if global_batch is None:
            mean = torch.mean
        else:  # this rank's part of the mean over the global minibatch, times N (the engine averages)
            scale = world / global_batch

            def mean(x: torch.Tensor) -> torch.Tensor:
                return x.sum() * scale

        stats = dict.fromkeys(_STATS, torch.zeros((), device=self.device))
        for _ in range(lc.epoch_per_collect):
            order = torch.randperm(size, device=self.device)[: n_minibatch * batch].reshape(n_minibatch, batch)
            for idx in order:
                logp, entropy = self._logp_entropy(obs[idx], action[idx])
                policy_loss, ratio = clipped_surrogate(logp, old_logp[idx], ret[idx], lc.clip_ratio, mean)
                entropy_mean = mean(entropy)
                loss = policy_loss - lc.entropy_weight * entropy_mean
                self._step(loss)
                with torch.no_grad():  # device scalars: no host read per minibatch
                    n = max(1, len(idx))
                    step = {
                        "loss": loss,
                        "policy_loss": policy_loss,
                        "entropy": entropy_mean,
                        "approx_kl": ((ratio - 1) - (logp - old_logp[idx])).sum() / n,
                        "clip_frac": ((ratio - 1).abs() > lc.clip_ratio).float().sum() / n,
                    }
                for k, v in step.items():
                    stats[k] = stats[k] + v.detach() / (lc.epoch_per_collect * n_minibatch)
        stats["return_mean"] = ret.mean() if ret.numel() else torch.zeros((), device=self.device)
        self._stats = stats
        return stats
