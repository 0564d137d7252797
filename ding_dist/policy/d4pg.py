"""D4PG: distributed distributional deterministic policy gradients (Barth-Maron et al. 2018, "Distributed
Distributional Deterministic Policy Gradients", arXiv:1804.08617), as DI-engine's ``d4pg``.

DDPG (:class:`~ding_dist.policy.td3.TD3Policy`'s actor, exploration, target networks and Box mapping) with a
distributional critic: :class:`DistributionalCritic` gives the logits of the return's categorical distribution on
``model.n_atom`` atoms from ``v_min`` to ``v_max`` for ``(obs, action)``; its Q is the distribution's mean. One
update on a replay batch of n-step transitions (``nstep``; the replay gives the n-step ``reward`` and
``discount = gamma**n``, 0 after a termination):

- critic: the target distribution of ``reward + discount * Z'(s', pi'(s'))`` projected onto the support
  (:func:`~ding_dist.policy.losses.categorical_projection`, C51's), with the target actor and critic; loss the
  cross-entropy with ``Z(s, a)`` per sample, each weighted by its importance weight with ``priority_IS_weight``,
  and the per-sample losses are the replay's new priorities with ``priority`` (both on by default, as DI-engine);
- actor, every ``learn.actor_update_freq``-th update: ``-mean Q(s, pi(s))``, the critic frozen;
- targets: Polyak-averaged by ``learn.target_theta`` after every update.

The learner's batches are the ranks' shares of one global batch; nothing is sampled in ``learn`` (with
``learn.noise`` the target-smoothing noise is TD3's, drawn for the global batch), so N ranks apply the update one
process applies to the whole. (The "distributed" of the paper's title, many actors feeding one replay, is the
actor-learner mode's job here.)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import torch
from torch import nn

from ding_dist.policy.base import mlp, soft_update
from ding_dist.policy.losses import categorical_projection
from ding_dist.policy.registry import register_policy
from ding_dist.policy.replay_keys import prioritized_keys
from ding_dist.policy.td3 import TD3Policy
from ding_dist.utils.keys import Key

__all__ = ["D4PGPolicy", "DistributionalCritic"]


class DistributionalCritic(nn.Module):
    """``forward(obs, action)``: logits ``[batch, n_atom]`` of the return's distribution on :attr:`support`;
    :meth:`q` its mean ``[batch]``.

    Example::

        critic = DistributionalCritic(3, 1, [64, 64], n_atom=51, v_min=-100, v_max=100)
        critic.q(torch.zeros(5, 3), torch.zeros(5, 1)).shape  # (5,)
    """

    def __init__(
        self,
        obs_size: int,
        action_size: int,
        hidden_sizes: Sequence[int],
        n_atom: int,
        v_min: float,
        v_max: float,
        activation: str = "relu",
    ) -> None:
        super().__init__()
        if int(n_atom) < 2 or not v_min < v_max:
            raise ValueError(f"D4PG needs model.n_atom >= 2 and v_min < v_max, got {n_atom}, {v_min}, {v_max}")
        if not hidden_sizes:
            raise ValueError("model.critic_hidden_sizes must name at least one hidden layer, got []")
        self.net = mlp([obs_size + action_size, *hidden_sizes, int(n_atom)], activation)
        self.register_buffer("support", torch.linspace(float(v_min), float(v_max), int(n_atom)), persistent=False)

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([obs, action], dim=-1))

    def q(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """The distribution's mean ``[batch]``."""
        return (self(obs, action).softmax(dim=-1) * self.support).sum(dim=-1)


@register_policy("d4pg")
class D4PGPolicy(TD3Policy):
    """D4PG for Box action spaces with finite bounds.

    Config: the keys listed below (generated from ``keys``): TD3's, the support's (DI-engine's 51, -10, 10) and
    prioritized replay's, as DQN's.

    Example::

        cfg = D4PGPolicy.default_config()
        policy = D4PGPolicy(cfg, env.single_observation_space, env.single_action_space)
        stats = policy.learn(replay.sample(cfg.learn.batch_size))  # {"critic_loss", "actor_loss", "priority", ...}

    Reference tests: tests/policy/test_d4pg.py (the weighted cross-entropy with the projected n-step target, the
    actor loss).
    """

    algorithm = "D4PG"

    keys = TD3Policy.keys.plus(
        Key("model.twin_critic", False, "D4PG: one distributional critic (must stay False)", "in (False,)"),
        Key("model.n_atom", 51, "D4PG: atoms of the critic's return distribution"),
        Key("model.v_min", -10.0, "D4PG: the smallest atom of the critic's support"),
        Key("model.v_max", 10.0, "D4PG: the largest atom of the critic's support"),
        Key("learn.actor_update_freq", 1),
        Key("learn.noise", False),
        *prioritized_keys(True),
        Key("nstep", 3),
    )

    def __init__(
        self, cfg: Mapping[str, Any], obs_space: gym.Space, action_space: gym.Space, device: str | torch.device = "cpu"
    ) -> None:
        super().__init__(cfg, obs_space, action_space, device)
        if self.cfg.get("priority_IS_weight") and not self.cfg.get("priority"):
            raise ValueError("priority_IS_weight=True needs priority=True (importance weights come from priorities)")

    def build_critic(self, n_obs: int, n_act: int) -> nn.Module:
        m = self.cfg.model
        if m.twin_critic:
            raise ValueError("D4PG has one distributional critic: model.twin_critic must be False")
        return DistributionalCritic(n_obs, n_act, m.critic_hidden_sizes, m.n_atom, m.v_min, m.v_max, m.activation)

    def learn(self, batch: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """One update on a replay batch (keys ``obs, action, reward, next_obs, discount``; ``weight`` with
        ``priority_IS_weight``)."""
        lc = self.cfg.learn
        obs = batch["obs"].reshape(batch["obs"].shape[0], -1)
        next_obs = batch["next_obs"].reshape(obs.shape[0], -1)
        action = batch["action"].reshape(obs.shape[0], -1)

        # Critic: cross-entropy with the projected n-step target distribution of the target networks.
        with torch.no_grad():
            next_action = self.actor_target(next_obs)
            if lc.noise:
                next_action = (next_action + self.smoothing_noise(obs.shape[0])).clamp(-1.0, 1.0)
            next_probs = self.critic_target(next_obs, next_action).softmax(dim=-1)
            target = categorical_projection(next_probs, batch["reward"], batch["discount"], self.critic.support)
        logits = self.train_critic(obs, action)
        per_sample = -(target * logits.log_softmax(dim=-1)).sum(dim=-1)
        weighted = per_sample * batch["weight"] if self.cfg.get("priority_IS_weight") else per_sample
        critic_loss = weighted.mean()
        self._step(self.critic_optimizer, self.critic, critic_loss)

        # Actor: maximize the critic's mean; the critic frozen so no critic gradient is produced or sent.
        if (self.train_iter + 1) % int(lc.actor_update_freq) == 0:
            self.critic.requires_grad_(False)
            try:
                actor_loss = -self.critic.q(obs, self.train_actor(obs)).mean()
                self._step(self.actor_optimizer, self.actor, actor_loss)
            finally:
                self.critic.requires_grad_(True)
            self._actor_loss = actor_loss.detach()

        soft_update(self.actor_target, self.actor, lc.target_theta)
        soft_update(self.critic_target, self.critic, lc.target_theta)
        self.train_iter += 1
        q = (logits.detach().softmax(dim=-1) * self.critic.support).sum(dim=-1)
        stats = {"critic_loss": critic_loss.detach(), "actor_loss": self._actor_loss, "q_mean": q.mean()}
        if self.cfg.get("priority"):
            stats["priority"] = per_sample.detach()
        return stats
