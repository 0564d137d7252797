"""Phasic Policy Gradient, off-policy (Cobbe et al. 2021, arXiv:2009.04416; DI-engine's ``ppg_offpolicy``).

Two networks: the policy network (a trunk with a policy head and an auxiliary value head) and a separate value
network, each with its own Adam. Collection is off-policy PPO's (:mod:`~ding_dist.policy.ppo_offpolicy`): the value
network's values and GAE at collection, samples into replay rings, here two of them as in DI-engine: a small policy
ring (``other.replay_buffer.policy.replay_buffer_size``, nearly on-policy) and a larger value ring
(``other.replay_buffer.value.replay_buffer_size``). Then, per ``learn``:

- **policy phase**, ``learn.update_per_collect`` times: a policy batch from the policy ring, PPO's clipped loss minus
  ``entropy_weight * H`` on the policy network; a value batch from the value ring,
  ``value_weight * 0.5 * max((V - R)^2, (V_clip - R)^2)`` on the value network (``R = V_old + A``, ``V_clip`` within
  ``clip_ratio`` of ``V_old``); the value batch is kept for the auxiliary phase;
- **auxiliary phase**, after every ``learn.aux_freq`` policy-phase steps: on the kept batches, with the policy's
  logits frozen just before, ``learn.aux_train_epoch`` epochs of minibatches of ``learn.batch_size``, each one step of
  the joint loss ``0.5 * max((V_aux - R)^2, (V_aux_clip - R)^2) + aux_bc_weight * KL(pi_old || pi)`` on the policy
  network (the value distilled into the policy's features, the KL keeping its actions) and one step of the clipped
  value loss on the value network; the kept batches are then dropped.

The KL is the full one over the actions (the paper's); DI-engine's ``ppg_joint_error`` applies ``kl_div`` to the taken
action's log-probabilities only. Discrete actions, vector observations. Distributed: each rank has its own rings and
kept batches (sizes and batches ``/ N``); every loss is a local mean and every step goes through the sync engine, so
N ranks on the parts of the same batches apply one process's step (:meth:`PPGOffPolicy.policy_step`,
:meth:`PPGOffPolicy.value_step`, :meth:`PPGOffPolicy.aux_step`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical

from ding_dist.comm import get_world_size
from ding_dist.policy.base import Policy, action_info, mlp, obs_dim
from ding_dist.policy.encoders import is_image_space
from ding_dist.policy.networks import features
from ding_dist.policy.ppo import clipped_surrogate
from ding_dist.policy.ppo_offpolicy import PPOOffPolicy, SampleRing
from ding_dist.policy.registry import register_policy
from ding_dist.utils.keys import Key

__all__ = ["PPGNetwork", "PPGOffPolicy", "PolicyNetwork", "clipped_value_loss"]


def clipped_value_loss(v: torch.Tensor, v_old: torch.Tensor, ret: torch.Tensor, clip: float) -> torch.Tensor:
    """``0.5 * mean(max((v - ret)^2, (v_old + clip(v - v_old, -clip, clip) - ret)^2))``.

    Example::

        loss = clipped_value_loss(v, batch["value"], batch["ret"], clip=0.2)
    """
    v_clip = v_old + (v - v_old).clamp(-clip, clip)
    return 0.5 * torch.max((v - ret) ** 2, (v_clip - ret) ** 2).mean()


class PolicyNetwork(nn.Module):
    """PPG's policy network: an MLP trunk, a policy head and an auxiliary value head; ``forward -> (logits, aux v)``.

    Example::

        net = PolicyNetwork(4, 2, [64, 64])
        logits, aux_value = net(torch.zeros(3, 4))  # (3, 2), (3,)
    """

    def __init__(
        self,
        obs_size: int | gym.Space,
        action_size: int,
        hidden_sizes: Sequence[int],
        activation: str = "tanh",
        conv_channels: Sequence[int] | None = None,
    ) -> None:
        super().__init__()
        self.trunk, _ = features(obs_size, hidden_sizes, activation, conv_channels)
        for layer in self.trunk.modules():
            if isinstance(layer, nn.Linear):
                nn.init.orthogonal_(layer.weight, gain=math.sqrt(2))
                nn.init.zeros_(layer.bias)
        self.pi, self.aux_v = nn.Linear(hidden_sizes[-1], action_size), nn.Linear(hidden_sizes[-1], 1)
        for head, gain in ((self.pi, 0.01), (self.aux_v, 1.0)):
            nn.init.orthogonal_(head.weight, gain=gain)
            nn.init.zeros_(head.bias)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.trunk(obs)
        return self.pi(h), self.aux_v(h).squeeze(-1)


class PPGNetwork(nn.Module):
    """``policy`` (a :class:`PolicyNetwork`) and a separate ``value`` MLP; ``forward(obs) -> (logits, value)``
    (the value network's value: what acting and GAE read).

    Example::

        net = PPGNetwork(4, 2, [64, 64])
        logits, value = net(torch.zeros(3, 4))  # (3, 2), (3,)
    """

    discrete = True

    def __init__(
        self,
        obs_size: int | gym.Space,
        action_size: int,
        hidden_sizes: Sequence[int],
        activation: str = "tanh",
        conv_channels: Sequence[int] | None = None,
    ) -> None:
        super().__init__()
        self.policy = PolicyNetwork(obs_size, action_size, hidden_sizes, activation, conv_channels)
        if isinstance(obs_size, gym.Space):  # images: its own CNN trunk, then one linear value output
            body, width = features(obs_size, hidden_sizes, activation, conv_channels)
            self.value: nn.Module = nn.Sequential(body, nn.Linear(width, 1))
        else:
            self.value = mlp([obs_size, *hidden_sizes, 1], activation, out_gain=1.0)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.policy(obs)[0], self.value(obs).squeeze(-1)

    def distribution(self, head: torch.Tensor) -> Categorical:
        """Categorical over the policy head's logits (no per-call argument checks)."""
        return Categorical(logits=head, validate_args=False)


@register_policy("ppg_offpolicy")
class PPGOffPolicy(PPOOffPolicy):
    """PPG with off-policy PPO's collection: a policy phase on replayed batches and a periodic auxiliary phase.

    Config: the keys listed below (generated from ``keys``); ``learn.learning_rate`` trains both networks,
    ``learn.clip_ratio`` clips the policy ratio and the value.

    Example::

        policy = PPGOffPolicy(PPGOffPolicy.default_config(), env.single_observation_space, env.single_action_space)
        stats = policy.learn(rollout)  # policy phase x update_per_collect, an auxiliary phase every aux_freq steps

    Reference tests: tests/policy/test_ppg.py (the policy step, value step and auxiliary step by hand; the auxiliary
    phase's KL against the logits frozen at its start).
    """

    on_policy = True  # the pipeline hands it each rollout; the rings are its own
    _state_attrs = ("model", "optimizer", "value_optimizer")
    pbt_optimizers = {"learn.learning_rate": ("optimizer", "value_optimizer")}  # both take learn.learning_rate

    keys = PPOOffPolicy.keys.plus(
        Key("learn.aux_freq", 5, "PPG: an auxiliary phase after every this many policy-phase steps", ">= 0"),
        Key(
            "learn.aux_train_epoch", 6, "PPG: epochs of the auxiliary phase over the value batches kept since the last"
        ),
        Key("learn.aux_bc_weight", 1.0, "PPG: weight of KL(pi_old || pi) in the auxiliary phase's joint loss"),
        Key("learn.grad_clip_norm", None),
        Key(
            "other.replay_buffer.policy.replay_buffer_size",
            1000,
            "PPG: policy ring capacity, the run's total (each rank: size / N)",
            ">= 1",
        ),
        Key(
            "other.replay_buffer.value.replay_buffer_size",
            1000,
            "PPG: value ring capacity, the run's total (each rank: size / N)",
            ">= 1",
        ),
    ).minus(
        "model.log_std_init",
        "model.obs_norm",
        "learn.value_clip_ratio",
        "learn.betas",
        "learn.eps",
        "other.replay_buffer.replay_buffer_size",
    )

    def __init__(
        self,
        cfg: Mapping[str, Any],
        obs_space: gym.Space,
        action_space: gym.Space,
        device: str | torch.device = "cpu",
    ) -> None:
        Policy.__init__(self, cfg, obs_space, action_space, device)  # PPO's own network is not built
        self.discrete, action_size = action_info(action_space)
        image = is_image_space(obs_space)
        if not self.discrete or not (image or len(obs_space.shape) == 1):
            raise ValueError(
                f"PPG here needs vector or image observations and Discrete actions, got {obs_space}, {action_space}"
            )
        m, lc = self.cfg.model, self.cfg.learn
        obs = obs_space if image else obs_dim(obs_space)
        self.model = PPGNetwork(obs, action_size, m.hidden_sizes, m.activation, m.conv_channels).to(self.device)
        self.obs_norm = None
        self.optimizer = self.make_optimizer(self.model.policy.parameters(), lr=lc.learning_rate)
        self.value_optimizer = self.make_optimizer(self.model.value.parameters(), lr=lc.learning_rate)
        self.train_policy, self.optimizer = self.distribute(self.model.policy, self.optimizer)
        self.train_value, self.value_optimizer = self.distribute(self.model.value, self.value_optimizer)
        world, rb = get_world_size(self.sync_group), self.cfg.other.replay_buffer
        self.replay = SampleRing(math.ceil(int(rb.policy.replay_buffer_size) / world))
        self.value_replay = SampleRing(math.ceil(int(rb.value.replay_buffer_size) / world))
        self.kept: list[dict[str, torch.Tensor]] = []  # value batches of the policy phase, for the auxiliary phase

    def learn(self, rollout: Mapping[str, np.ndarray]) -> dict[str, torch.Tensor]:
        """GAE on the rollout into both rings, ``update_per_collect`` policy-phase steps, and an auxiliary phase
        after every ``aux_freq``-th of them."""
        lc = self.cfg.learn
        adv, _ = self.advantages(rollout)

        def flat(x: np.ndarray) -> torch.Tensor:  # [T, N, ...] -> [T*N, ...]
            return self.as_tensor(x.reshape(-1, *x.shape[2:]))

        obs = self._obs(rollout["obs"].reshape(-1, *rollout["obs"].shape[2:]))
        samples = {"obs": obs, "action": flat(rollout["action"]).long(), "logp": flat(rollout["logp"])}
        samples.update(value=flat(rollout["value"]), adv=flat(adv))
        self.replay.add(samples)
        self.value_replay.add(samples)
        stats: dict[str, torch.Tensor] = {}

        def add(step: Mapping[str, torch.Tensor]) -> None:
            for k, v in step.items():
                stats[k] = stats[k] + v if k in stats else v

        rank_batch = self.plan.rank_batch  # this rank's share of learn.batch_size
        for _ in range(int(lc.update_per_collect)):
            add(self.policy_step(self.replay.sample(rank_batch)))
            value_batch = self.value_replay.sample(rank_batch)
            add(self.value_step(value_batch))
            self.kept.append(value_batch)
            self.train_iter += 1
            if self.train_iter % int(lc.aux_freq) == 0:
                stats.update({f"aux_{k}": v for k, v in self.aux_phase().items()})
        n = max(1, int(lc.update_per_collect))
        return {k: (v if k.startswith("aux_") else v / n) for k, v in stats.items()}

    def _step(self, loss: torch.Tensor, optimizer: torch.optim.Optimizer, params: Any) -> None:
        optimizer.zero_grad(set_to_none=True)
        loss.backward()  # through a wrapped network: gradients are averaged across ranks
        if self.cfg.learn.grad_clip_norm is not None:
            nn.utils.clip_grad_norm_(params, self.cfg.learn.grad_clip_norm)
        optimizer.step()

    def policy_step(self, batch: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """PPO's clipped policy loss minus the entropy bonus, one step of the policy network."""
        lc = self.cfg.learn
        adv = batch["adv"]
        if lc.adv_norm:  # the statistics of the global batch (every rank's part)
            mean, std = self.global_minibatch_stats(adv[None, None])
            adv = (adv - mean[0, 0]) / (std[0, 0] + 1e-8)
        logits, _ = self.train_policy(batch["obs"])  # the auxiliary head gets no gradient here
        dist = Categorical(logits=logits, validate_args=False)
        policy_loss, _ = clipped_surrogate(dist.log_prob(batch["action"]), batch["logp"], adv, lc.clip_ratio)
        entropy = dist.entropy().mean()
        self._step(policy_loss - lc.entropy_weight * entropy, self.optimizer, self.model.policy.parameters())
        return {"policy_loss": policy_loss.detach(), "entropy": entropy.detach()}

    def value_step(self, batch: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """``value_weight`` times the clipped value loss against ``R = V_old + A``, one step of the value network."""
        lc = self.cfg.learn
        v = self.train_value(batch["obs"]).squeeze(-1)
        loss = lc.value_weight * clipped_value_loss(v, batch["value"], batch["adv"] + batch["value"], lc.clip_ratio)
        self._step(loss, self.value_optimizer, self.model.value.parameters())
        return {"value_loss": loss.detach()}

    def aux_step(self, batch: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """One auxiliary step: the joint loss on the policy network, then the clipped value loss on the value network.

        ``batch``: ``obs``, ``value`` (at collection), ``adv`` and ``old_logits`` (the policy's, frozen at the start
        of the auxiliary phase).
        """
        lc = self.cfg.learn
        ret = batch["adv"] + batch["value"]
        logits, aux_v = self.train_policy(batch["obs"])
        aux_loss = clipped_value_loss(aux_v, batch["value"], ret, lc.clip_ratio)
        old = torch.log_softmax(batch["old_logits"], -1)
        kl = (old.exp() * (old - torch.log_softmax(logits, -1))).sum(-1).mean()  # KL(pi_old || pi)
        self._step(aux_loss + lc.aux_bc_weight * kl, self.optimizer, self.model.policy.parameters())
        v = self.train_value(batch["obs"]).squeeze(-1)
        value_loss = clipped_value_loss(v, batch["value"], ret, lc.clip_ratio)
        self._step(value_loss, self.value_optimizer, self.model.value.parameters())
        return {"loss": aux_loss.detach(), "kl": kl.detach(), "value_loss": value_loss.detach()}

    def aux_phase(self) -> dict[str, torch.Tensor]:
        """``aux_train_epoch`` epochs of :meth:`aux_step` over the kept value batches (shuffled minibatches of
        ``learn.batch_size``; the ragged tail dropped), which are then dropped."""
        lc = self.cfg.learn
        data = {k: torch.cat([b[k] for b in self.kept]) for k in ("obs", "value", "adv")}
        self.kept = []
        with torch.no_grad():
            data["old_logits"] = self.model.policy(data["obs"])[0]
        size = len(data["obs"])
        batch = max(1, min(int(self.plan.rank_batch), size))  # this rank's share of learn.batch_size
        stats: dict[str, torch.Tensor] = {}
        steps = 0
        for _ in range(int(lc.aux_train_epoch)):
            order = torch.randperm(size, device=self.device)
            for i in range(size // batch):
                idx = order[i * batch : (i + 1) * batch]
                for k, v in self.aux_step({k: x[idx] for k, x in data.items()}).items():
                    stats[k] = stats[k] + v if k in stats else v
                steps += 1
        return {k: v / max(1, steps) for k, v in stats.items()}
