"""Off-policy PPO: PPO's clipped loss on samples replayed from a buffer (DI-engine's ``PPOOffPolicy``).

Schulman et al. 2017 (arXiv:1707.06347), in the variant DI-engine registers as ``ppo_offpolicy``: each rollout's
GAE advantages and value targets are computed once, at collection, with the network that collected it (PPO's
:meth:`~ding_dist.policy.ppo.PPOPolicy.advantages`), and the processed samples (observation, action, log-prob,
value, advantage) go into a replay ring of ``other.replay_buffer.replay_buffer_size`` samples. Each ``learn`` then
takes ``learn.update_per_collect`` steps, each on ``learn.batch_size`` samples drawn uniformly from the ring, with
``loss = policy_loss + value_weight * 0.5 * max((v - R)^2, (v_clip - R)^2) - entropy_weight * H``: ``policy_loss``
PPO's :func:`~ding_dist.policy.ppo.clipped_surrogate` against the collecting policy's log-probabilities,
``R = V_old + A`` and ``v_clip`` within ``learn.value_clip_ratio`` of ``V_old`` (DI-engine's ``ppo_error`` clips by
``clip_ratio``). So a sample is learned from again after the network moved on; the clip on the ratio to the
collecting policy is what bounds it.

Distributed: every rank keeps its own ring (``replay_buffer_size / N`` samples) and draws ``batch_size / N`` per
step (the pipeline's per-rank batch); the loss is the local mean and the sync engine averages the gradients, so
on the same data N ranks apply the step one process applies to the whole batch (:meth:`PPOOffPolicy.update`).
The ring is not saved in checkpoints (a resumed run refills it), as DQN's replay by default.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from ding_dist.comm import get_world_size
from ding_dist.policy.ppo import PPOPolicy, clipped_surrogate
from ding_dist.policy.registry import register_policy
from ding_dist.utils.keys import Key

__all__ = ["PPOOffPolicy", "SampleRing"]


class SampleRing:
    """A ring of ``capacity`` flat samples (a dict of tensors with a leading sample dimension), drawn uniformly.

    Example::

        ring = SampleRing(1000)
        ring.add({"obs": torch.zeros(8, 4), "adv": torch.zeros(8)})
        batch = ring.sample(4)  # {"obs": [4, 4], "adv": [4]}
    """

    def __init__(self, capacity: int) -> None:
        if int(capacity) < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = int(capacity)
        self._data: dict[str, torch.Tensor] = {}
        self._pos = 0
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def add(self, samples: Mapping[str, torch.Tensor]) -> None:
        """Write ``samples`` (every field the same leading size), overwriting the oldest once full."""
        n = len(next(iter(samples.values())))
        if n > self.capacity:  # only the newest fit
            samples, n = {k: v[n - self.capacity :] for k, v in samples.items()}, self.capacity
        if not self._data:
            self._data = {k: v.new_zeros((min(self.capacity, max(n, 64)), *v.shape[1:])) for k, v in samples.items()}
        self._reserve(self._pos + n)  # rows are allocated as samples arrive (doubling, up to the capacity)
        rows = (self._pos + torch.arange(n)) % self.capacity
        for k, v in samples.items():
            self._data[k][rows.to(v.device)] = v
        self._pos = (self._pos + n) % self.capacity
        self._size = min(self._size + n, self.capacity)

    def _reserve(self, rows: int) -> None:
        have = len(next(iter(self._data.values())))
        if rows > have and have < self.capacity:
            new = min(self.capacity, max(rows, 2 * have))
            self._data = {k: torch.cat([v, v.new_zeros((new - have, *v.shape[1:]))]) for k, v in self._data.items()}

    def sample(self, batch_size: int) -> dict[str, torch.Tensor]:
        """``batch_size`` samples drawn uniformly with replacement (torch's generator of this process)."""
        if self._size == 0:
            raise ValueError("cannot sample from an empty SampleRing")
        idx = torch.randint(0, self._size, (int(batch_size),))
        return {k: v[idx.to(v.device)] for k, v in self._data.items()}


@register_policy("ppo_offpolicy")
class PPOOffPolicy(PPOPolicy):
    """PPO's network and acting; GAE at collection, clipped updates on replayed samples.

    Config: the keys listed below (generated from ``keys``). DI-engine's defaults.

    Example::

        policy = PPOOffPolicy(PPOOffPolicy.default_config(), env.single_observation_space, env.single_action_space)
        actions, extras = policy.collect_action(obs, env_step=0)  # extras: logp, value
        stats = policy.learn(rollout)  # GAE, into the ring, update_per_collect replayed steps

    Reference tests: tests/policy/test_ppo_offpolicy.py (the replayed step by hand: advantage normalization, value
    clip on and off, GAE at collection).
    """

    on_policy = True  # the pipeline hands it each rollout; the replay of processed samples is its own

    keys = PPOPolicy.keys.plus(
        Key("learn.batch_size", 64, "batch per update, the run's total (each rank: batch_size / N)"),
        Key("learn.learning_rate", 0.001),
        Key("learn.update_per_collect", 5, "updates per collect.n_sample global env steps", ">= 1"),
        Key("learn.value_clip_ratio", 0.2),
        Key("learn.entropy_weight", 0.01),
        Key("learn.adv_norm", False),
        Key("collect.n_sample", 128, "env steps per iteration, the run's total (each rank: n_sample / N)"),
        Key(
            "other.replay_buffer.replay_buffer_size",
            10000,
            "replay capacity, the run's total (each rank keeps size / N)",
            ">= 1",
        ),
    ).minus(
        "learn.epoch_per_collect",
        "learn.lr_decay_collects",
        "learn.lr_decay_min_factor",
        "collect.preempt",
        "collect.preempt_fraction",
        "collect.preempt_min_share",
    )

    def __init__(
        self,
        cfg: Mapping[str, Any],
        obs_space: gym.Space,
        action_space: gym.Space,
        device: str | torch.device = "cpu",
    ) -> None:
        super().__init__(cfg, obs_space, action_space, device)
        world = get_world_size(self.sync_group)
        self.replay = SampleRing(math.ceil(int(self.cfg.other.replay_buffer.replay_buffer_size) / world))

    def learn(self, rollout: Mapping[str, np.ndarray]) -> dict[str, torch.Tensor]:
        """GAE on the rollout (fields ``[T, N, ...]`` plus ``last_obs``), its samples into the ring, then
        ``learn.update_per_collect`` steps of :meth:`update` on batches drawn from the ring."""
        adv, _ = self.advantages(rollout)

        def flat(x: np.ndarray) -> torch.Tensor:  # [T, N, ...] -> [T*N, ...]
            return self.as_tensor(x.reshape(-1, *x.shape[2:]))

        action = flat(rollout["action"]).long() if self.discrete else flat(rollout["action"])
        obs = self._obs(rollout["obs"].reshape(-1, *rollout["obs"].shape[2:]))
        samples = {"obs": obs, "action": action, "logp": flat(rollout["logp"]), "adv": flat(adv)}
        self.replay.add({**samples, "value": flat(rollout["value"])})
        stats: dict[str, torch.Tensor] = {}
        n = int(self.cfg.learn.update_per_collect)
        rank_batch = self.plan.rank_batch  # this rank's share of learn.batch_size
        for _ in range(n):
            for k, v in self.update(self.replay.sample(rank_batch)).items():
                stats[k] = stats[k] + v if k in stats else v
        if self.obs_norm is not None:
            self.obs_norm.sync()
        return {k: v / max(1, n) for k, v in stats.items()}

    def update(self, batch: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """One clipped PPO step on a replayed batch (``obs``, ``action``, ``logp``, ``value``, ``adv``: this rank's
        part of the global batch)."""
        lc = self.cfg.learn
        adv, old_value = batch["adv"], batch["value"]
        ret = adv + old_value
        if lc.adv_norm:  # the statistics of the global batch (every rank's part)
            mean, std = self.global_minibatch_stats(adv[None, None])
            adv = (adv - mean[0, 0]) / (std[0, 0] + 1e-8)
        head, v = self.train_model(batch["obs"])
        dist = self.model.distribution(head)
        logp = self._log_prob(dist, batch["action"])
        entropy = (dist.entropy() if self.discrete else dist.entropy().sum(-1)).mean()
        policy_loss, ratio = clipped_surrogate(logp, batch["logp"], adv, lc.clip_ratio)
        if lc.value_clip_ratio is not None:
            v_clip = old_value + (v - old_value).clamp(-lc.value_clip_ratio, lc.value_clip_ratio)
            value_loss = 0.5 * torch.max((v - ret) ** 2, (v_clip - ret) ** 2).mean()
        else:
            value_loss = 0.5 * ((v - ret) ** 2).mean()
        loss = policy_loss + lc.value_weight * value_loss - lc.entropy_weight * entropy

        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()  # through the wrapped model: gradients are averaged across ranks
        if lc.grad_clip_norm is not None:
            nn.utils.clip_grad_norm_(self.model.parameters(), lc.grad_clip_norm)
        self.optimizer.step()
        self.train_iter += 1
        with torch.no_grad():
            return {
                "loss": loss.detach(),
                "policy_loss": policy_loss.detach(),
                "value_loss": value_loss.detach(),
                "entropy": entropy.detach(),
                "clip_frac": ((ratio - 1).abs() > lc.clip_ratio).float().mean(),
            }
