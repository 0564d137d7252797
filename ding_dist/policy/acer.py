"""ACER: actor-critic with experience replay (Wang et al. 2017, arXiv:1611.01224), discrete actions, DI-engine's
``acer``.

Collection: the actor samples its Categorical and keeps every action's behaviour probability ``mu(.|s)``; each env's
rollout is cut into chunks of ``learn.unroll_len`` steps (the rollout per env must be a whole number of them),
which go into a replay ring of ``other.replay_buffer.replay_buffer_size`` chunks. Each ``learn`` then takes
``learn.update_per_collect`` steps on ``learn.batch_size`` chunks drawn uniformly, with the current actor ``pi``,
the critic ``Q`` (a value per action) and ``V(s) = sum_a pi(a|s) Q(s, a)``:

- **Retrace targets**, backwards over a chunk: ``Q_ret_t = r_t + gamma (1 - terminated_t) carry_{t+1}`` with
  ``carry_{t+1} = min(1, rho_{t+1}) (Q_ret_{t+1} - Q(s_{t+1}, a_{t+1})) + V(s_{t+1})`` inside an episode, and
  ``V(next obs)`` at the chunk's end or after a truncation; ``rho_t = pi(a_t|s_t) / mu(a_t|s_t)``.
- **Truncated importance sampling with bias correction**: the actor minimizes
  ``-[min(c, rho_t) (Q_ret_t - V_t) log pi(a_t|s_t) + sum_a [1 - c / rho_t(a)]_+ pi(a|s_t) (Q(s_t, a) - V_t)
  log pi(a|s_t)] - entropy_weight H(pi(.|s_t))`` (``c = learn.c_clip_ratio``; the coefficients are constants).
- **Trust region** (``learn.trust_region``, on in DI-engine's CartPole file, ``trust_region_value`` 1.0): the loss's
  gradient ``g`` with respect to the log-probabilities becomes ``g - max(0, (k.g - delta) / |k|^2) k`` with ``k`` the
  average policy's probabilities (a soft copy of the actor, ``learn.target_theta`` per step), then flows back into
  the actor.
- **Critic**: ``0.5 (Q_ret_t - Q(s_t, a_t))^2``; each network has its own Adam.

Distributed: each rank keeps its own ring (``size / N`` chunks) and draws ``batch_size / N`` chunks per step. The
trust-region projection is not linear in ``g``, so ``g`` is taken at the scale of the global mean (every rank's
sum over its steps divided by the global step count) and the backward pass carries ``N g'``: after the engine's
average over N ranks, the actor's gradient is that of one process on the whole batch (:meth:`ACERPolicy.update`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical

from ding_dist.comm import get_world_size
from ding_dist.policy.base import Policy, action_info, mlp, obs_dim, soft_update
from ding_dist.policy.encoders import is_image_space
from ding_dist.policy.networks import trunk
from ding_dist.policy.ppo_offpolicy import SampleRing
from ding_dist.policy.registry import register_policy
from ding_dist.utils.keys import Key

__all__ = ["ACERPolicy", "retrace_targets", "trust_region_gradient"]


def retrace_targets(
    q_taken: torch.Tensor,
    v: torch.Tensor,
    reward: torch.Tensor,
    rho_taken: torch.Tensor,
    terminated: torch.Tensor,
    cut: torch.Tensor,
    v_next: torch.Tensor,
    gamma: float,
) -> torch.Tensor:
    """Retrace targets ``[L, B]`` of chunks of ``L`` steps (every argument ``[L, B]``; ``cut[t]``: the step after
    ``t`` does not continue the chunk, at its end or after a truncation, so ``v_next[t] = V(next obs)`` is carried).

    Example::

        q_ret = retrace_targets(q_a, v, r, rho_a, terminated, cut, v_next, gamma=0.9)
    """
    q_ret = torch.zeros_like(reward)
    carry = v_next[-1]
    for t in reversed(range(len(reward))):
        carry = torch.where(cut[t], v_next[t], carry)
        q_ret[t] = reward[t] + gamma * (~terminated[t]) * carry
        carry = rho_taken[t].clamp(max=1.0) * (q_ret[t] - q_taken[t]) + v[t]
    return q_ret


def trust_region_gradient(g: torch.Tensor, k: torch.Tensor, delta: float) -> torch.Tensor:
    """ACER's projection of the loss gradient ``g`` (per step, over the log-probabilities) against ``k``:
    ``g - max(0, (k.g - delta) / |k|^2) k``.

    Example::

        g = trust_region_gradient(g, avg_probs, delta=1.0)
    """
    scale = (((k * g).sum(-1, keepdim=True) - delta) / (k * k).sum(-1, keepdim=True)).clamp(min=0.0)
    return g - scale * k


def _over_steps(net: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """``net`` on ``[L, B, *obs]`` as one batch of ``L B`` observations (a CNN takes ``[N, C, H, W]``)."""
    return net(x.reshape(-1, *x.shape[2:])).reshape(*x.shape[:2], -1)


@register_policy("acer")
class ACERPolicy(Policy):
    """ACER for Discrete actions, vector or image observations: an actor, a Q critic, an average actor (trust region).

    Config: the keys listed below (generated from ``keys``); ``learn.batch_size`` and
    ``other.replay_buffer.replay_buffer_size`` count chunks of ``learn.unroll_len`` steps. DI-engine's defaults.

    Example::

        policy = ACERPolicy(ACERPolicy.default_config(), env.single_observation_space, env.single_action_space)
        actions, extras = policy.collect_action(obs, env_step=0)  # extras: probs (every action's mu)
        stats = policy.learn(rollout)  # chunks into the ring, update_per_collect replayed steps

    Reference tests: tests/policy/test_acer.py (Retrace targets and one update by hand, trust region on and off),
    tests/policy/test_q_references.py (Retrace on random chunks).
    """

    on_policy = True  # the pipeline hands it each rollout; the replay of chunks is its own
    _state_attrs = ("actor", "critic", "avg_actor", "actor_optimizer", "critic_optimizer")

    keys = Policy.keys.plus(
        Key("model.hidden_sizes", [64, 64], "hidden layer sizes of the network(s)", "sizes"),
        Key("model.activation", "relu", "activation of the hidden layers"),
        Key(
            "model.conv_channels",
            None,
            "on images: the three convolutions' channels (None: the Nature CNN's 32, 64, 64)",
        ),
        Key("learn.batch_size", 16),
        Key("learn.unroll_len", 32, "ACER: steps per replayed chunk (each env's rollout is cut into chunks of it)"),
        Key("learn.update_per_collect", 4, "updates per collect.n_sample global env steps", ">= 1"),
        Key("learn.learning_rate_actor", 0.0005, "Adam learning rate of the actor", "> 0"),
        Key("learn.learning_rate_critic", 0.0005, "Adam learning rate of the critic(s)", "> 0"),
        Key("learn.entropy_weight", 0.0001, "entropy bonus weight"),
        Key("learn.discount_factor", 0.9, "ACER: gamma of the Retrace targets", "[0, 1]"),
        Key("learn.c_clip_ratio", 10.0, "ACER: truncation c of the importance weights (bias correction beyond it)"),
        Key("learn.trust_region", True, "ACER: project the actor's gradient against the average policy (trust region)"),
        Key("learn.trust_region_value", 1.0, "ACER: the trust region's delta"),
        Key("learn.target_theta", 0.01, "soft target update rate per update (None: hard copies)", "(0, 1] or None"),
        Key("collect.n_sample", 512),
        Key(
            "other.replay_buffer.replay_buffer_size",
            1000,
            "replay capacity, the run's total (each rank keeps size / N)",
            ">= 1",
        ),
    ).minus("learn.learning_rate")

    def __init__(
        self,
        cfg: Mapping[str, Any],
        obs_space: gym.Space,
        action_space: gym.Space,
        device: str | torch.device = "cpu",
    ) -> None:
        super().__init__(cfg, obs_space, action_space, device)
        discrete, n_actions = action_info(action_space)
        image = is_image_space(obs_space)
        if not discrete or not (image or len(obs_space.shape) == 1):
            raise ValueError(f"ACER needs vector or image observations and Discrete actions, got {obs_space}, "
                             f"{action_space}")  # fmt: skip
        m, lc = self.cfg.model, self.cfg.learn

        def net() -> nn.Module:  # vectors: one MLP; images: a CNN trunk, the rest of hidden_sizes, a linear layer
            if not image:
                return mlp([obs_dim(obs_space), *m.hidden_sizes, n_actions], m.activation)
            body, width = trunk(obs_space, m.hidden_sizes, m.activation, m.get("conv_channels"))
            return nn.Sequential(body, nn.Linear(width, n_actions))

        self.actor = net().to(self.device)
        self.critic = net().to(self.device)
        self.avg_actor = net().to(self.device)
        self.actor_optimizer = self.make_optimizer(self.actor.parameters(), lr=lc.learning_rate_actor)
        self.critic_optimizer = self.make_optimizer(self.critic.parameters(), lr=lc.learning_rate_critic)
        self.train_actor, self.actor_optimizer = self.distribute(self.actor, self.actor_optimizer)
        self.train_critic, self.critic_optimizer = self.distribute(self.critic, self.critic_optimizer)
        self.avg_actor.load_state_dict(self.actor.state_dict())  # after distribute: rank 0's weights
        self.avg_actor.requires_grad_(False)
        world = get_world_size(self.sync_group)
        self.replay = SampleRing(math.ceil(int(self.cfg.other.replay_buffer.replay_buffer_size) / world))

    @torch.no_grad()
    def collect_action(self, obs: np.ndarray, env_step: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        probs = torch.softmax(self.actor(self.as_tensor(obs)), -1)
        action = Categorical(probs=probs).sample()
        return action.cpu().numpy(), {"probs": probs.cpu().numpy()}

    @torch.no_grad()
    def eval_action(self, obs: np.ndarray) -> np.ndarray:
        return self.actor(self.as_tensor(obs)).argmax(-1).cpu().numpy()

    def learn(self, rollout: Mapping[str, np.ndarray]) -> dict[str, torch.Tensor]:
        """The rollout's chunks (fields ``[T, N, ...]``, ``T`` a multiple of ``learn.unroll_len``) into the ring,
        then ``learn.update_per_collect`` steps of :meth:`update` on chunks drawn from it."""
        lc = self.cfg.learn
        steps, unroll = len(rollout["reward"]), int(lc.unroll_len)
        if steps % unroll:
            raise ValueError(
                f"ACER cuts each env's rollout into chunks of learn.unroll_len={unroll} steps, got {steps}"
            )

        def chunks(
            x: np.ndarray, dtype: torch.dtype = torch.float32
        ) -> torch.Tensor:  # [T, N, ...] -> [N T / L, L, ...]
            x = x.reshape(steps // unroll, unroll, *x.shape[1:])  # [K, L, N, ...]
            return self.as_tensor(np.ascontiguousarray(np.swapaxes(x, 1, 2).reshape(-1, unroll, *x.shape[3:])), dtype)

        names = ("obs", "next_obs", "action", "reward", "terminated", "truncated", "probs")
        obs_dtype = torch.uint8 if is_image_space(self.obs_space) else torch.float32  # images stay uint8 in the ring
        self.replay.add({k: chunks(np.asarray(rollout[k]), obs_dtype if "obs" in k else torch.float32) for k in names})
        stats: dict[str, torch.Tensor] = {}
        rank_batch = self.plan.rank_batch  # this rank's share of learn.batch_size
        for _ in range(int(lc.update_per_collect)):
            for k, v in self.update(self.replay.sample(rank_batch)).items():
                stats[k] = stats[k] + v if k in stats else v
        return {k: v / max(1, int(lc.update_per_collect)) for k, v in stats.items()}

    def update(self, batch: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """One ACER step on chunks ``[B, L, ...]`` (``obs``, ``next_obs``, ``action``, ``reward``, ``terminated``,
        ``truncated``, ``probs``: this rank's part of the global batch)."""
        lc = self.cfg.learn
        b = {k: v.transpose(0, 1) for k, v in batch.items()}  # [L, B, ...]
        action = b["action"].long().unsqueeze(-1)
        terminated, truncated = b["terminated"].bool(), b["truncated"].bool()
        log_pi = torch.log_softmax(_over_steps(self.train_actor, b["obs"]), -1)  # [L, B, A]
        q = _over_steps(self.train_critic, b["obs"])
        with torch.no_grad():
            pi, q_d = log_pi.exp(), q.detach()
            v = (pi * q_d).sum(-1)
            rho = pi / b["probs"].clamp(min=1e-8)
            v_next = (
                torch.softmax(_over_steps(self.actor, b["next_obs"]), -1) * _over_steps(self.critic, b["next_obs"])
            ).sum(-1)
            cut = truncated.clone()
            cut[-1] = True
            rho_a = rho.gather(-1, action).squeeze(-1)
            q_ret = retrace_targets(q_d.gather(-1, action).squeeze(-1), v, b["reward"].float(), rho_a, terminated,
                                    cut, v_next, float(lc.discount_factor))  # fmt: skip
            avg_pi = torch.softmax(_over_steps(self.avg_actor, b["obs"]), -1)
        c = float(lc.c_clip_ratio)
        weight_a = rho_a.clamp(max=c) * (q_ret - v)
        weight_all = (1.0 - c / (rho + 1e-8)).clamp(min=0.0) * pi * (q_d - v.unsqueeze(-1))
        entropy = -(log_pi.exp() * log_pi).sum(-1)
        per_step = -(weight_a * log_pi.gather(-1, action).squeeze(-1) + (weight_all * log_pi).sum(-1))
        per_step = per_step - lc.entropy_weight * entropy
        world = get_world_size(self.sync_group)
        actor_loss = per_step.sum() / (per_step.numel() * world)  # this rank's part of the global mean
        g = torch.autograd.grad(actor_loss, log_pi, retain_graph=True)[0]
        if lc.trust_region:
            g = trust_region_gradient(g, avg_pi, float(lc.trust_region_value))
        self.actor_optimizer.zero_grad(set_to_none=True)
        log_pi.backward(g * world)  # the engine averages over N ranks: the gradient of the global mean
        self.actor_optimizer.step()

        critic_loss = 0.5 * ((q_ret - q.gather(-1, action).squeeze(-1)) ** 2).mean()
        self.critic_optimizer.zero_grad(set_to_none=True)
        critic_loss.backward()
        self.critic_optimizer.step()
        soft_update(self.avg_actor, self.actor, float(lc.target_theta))
        self.train_iter += 1
        with torch.no_grad():
            kl = (avg_pi * (avg_pi.clamp(min=1e-8).log() - log_pi)).sum(-1).mean()
        return {
            "actor_loss": (actor_loss * world).detach(),
            "critic_loss": critic_loss.detach(),
            "entropy": entropy.mean().detach(),
            "avg_kl": kl,
        }
