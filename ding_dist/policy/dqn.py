"""DQN: double DQN with a target network (hard or soft updates), n-step returns and an optional dueling head.

Reading order: the Q-network, then :class:`DQNPolicy` — config, epsilon-greedy acting, and ``learn``,
where the TD target and the loss are computed in plain sight.

The n-step return and the bootstrap discount come from the replay buffer
(:class:`ding_dist.data.replay.ReplayBuffer`): ``target = reward + discount * Q_target(next_obs, a*)``
with ``a* = argmax_a Q_online(next_obs, a)`` (double DQN), ``discount = gamma**n`` or 0 after a
termination (a truncated episode still bootstraps).

Prioritized replay (DI-engine's ``priority`` / ``priority_IS_weight``): with ``priority=True`` the replay is a
:class:`~ding_dist.data.prioritized.PrioritizedReplayBuffer` and ``learn`` returns each sample's ``|TD error|``
under ``"priority"`` for the buffer's update; with ``priority_IS_weight=True`` as well, the batch's importance
weights (``batch["weight"]``) multiply the per-sample loss before the mean.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ding_dist.policy.base import mlp, obs_dim
from ding_dist.policy.encoders import conv_encoder, is_conv_space, obs_tensor
from ding_dist.policy.q_learning import QLearningPolicy, init_q_learning, update_target
from ding_dist.policy.registry import register_policy
from ding_dist.utils.keys import Key

__all__ = ["DQNPolicy", "QNetwork"]


class QNetwork(nn.Module):
    """MLP Q-network ``obs -> Q(obs, .)``; with ``dueling=True``: ``V(obs) + A(obs, .) - mean A``.

    With ``encoder`` (e.g. :class:`~ding_dist.policy.encoders.NatureCNN`, chosen by :class:`DQNPolicy`
    for image observations) the hidden layers follow the encoder's features and ``obs_size`` is unused.

    Example::

        q = QNetwork(obs_size=4, n_actions=2, hidden_sizes=[64, 64], dueling=True)
        q(torch.zeros(1, 4)).shape  # (1, 2)
    """

    def __init__(
        self,
        obs_size: int,
        n_actions: int,
        hidden_sizes: Sequence[int] = (128, 128),
        dueling: bool = False,
        activation: str = "relu",
        encoder: nn.Module | None = None,
    ) -> None:
        super().__init__()
        if encoder is not None:  # e.g. NatureCNN for images: hidden layers (possibly none) follow its features
            last = int(hidden_sizes[-1]) if hidden_sizes else int(encoder.out_features)
            trunk = (
                [mlp([encoder.out_features, *hidden_sizes], activation, out_activation=True)] if hidden_sizes else []
            )
            self.body = nn.Sequential(encoder, *trunk)
        else:
            if not hidden_sizes:
                raise ValueError("model.hidden_sizes must name at least one hidden layer, got []")
            last = int(hidden_sizes[-1])
            self.body = mlp([obs_size, *hidden_sizes], activation, out_activation=True)
        self.dueling = dueling
        if dueling:
            self.value = mlp([last, last, 1], activation)
            self.advantage = mlp([last, last, n_actions], activation)
        else:
            self.head = nn.Linear(last, n_actions)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        h = self.body(obs)
        if not self.dueling:
            return self.head(h)
        adv = self.advantage(h)
        return self.value(h) + adv - adv.mean(dim=-1, keepdim=True)


@register_policy("dqn")
class DQNPolicy(QLearningPolicy):
    """Double DQN for discrete actions: a :class:`~ding_dist.policy.q_learning.QLearningPolicy` with its own
    network (plain or dueling), the double-Q target and Ape-X's exploration ladder.

    Config: the keys listed below (generated from ``keys``). With ``priority`` every rank keeps its own replay shard
    with its own priorities (one prioritized replay over all shards: ``batch_size / N`` per rank and update); with
    actors (Ape-X), each actor computes its transitions' first priorities (:meth:`initial_priority`) and sends them with
    its chunks; with ``other.eps_ladder.enable`` actor ``i`` explores with the constant :func:`apex_epsilon` instead of
    the schedule.
    Image observations (uint8 ``(C, H, W)``) get a Nature-CNN, 0/1 grids (MinAtar's ``(C, 10, 10)``) the MinAtar
    network, whose linear layer has ``model.hidden_sizes[0]`` units; the remaining hidden sizes follow it.

    Example::

        cfg = DQNPolicy.default_config()
        policy = DQNPolicy(cfg, env.single_observation_space, env.single_action_space)
        actions, _ = policy.collect_action(obs, env_step=0)
        stats = policy.learn(replay.sample(cfg.learn.batch_size))  # {"loss": ..., "q_mean": ...}

    Reference tests: tests/policy/test_dqn.py (Huber/MSE on the double and single target, |TD error| priorities and
    importance weights, the actors' initial priority), tests/policy/test_q_references.py (n-step returns, the
    weighted Huber on the double-Q target).
    """

    algorithm = "DQN"

    keys = QLearningPolicy.keys.plus(
        Key("model.dueling", False, "dueling Q-network head"),
        Key("learn.double", True, "double DQN (online net picks, target net scores)"),
        Key("learn.loss", "huber", "the TD loss: 'huber' or 'mse'", "in ('huber', 'mse')"),
    )

    def __init__(
        self,
        cfg: Mapping[str, Any],
        obs_space: gym.Space,
        action_space: gym.Space,
        device: str | torch.device = "cpu",
    ) -> None:
        super().__init__(cfg, obs_space, action_space, device)
        if self.cfg.learn.loss not in ("huber", "mse"):
            raise ValueError(f"learn.loss must be 'huber' or 'mse', got {self.cfg.learn.loss!r}")
        m = self.cfg.model
        if is_conv_space(obs_space):  # Nature DQN's CNN (images) or MinAtar's (grids), uint8 in, then the head
            cnn = conv_encoder(obs_space, features=m.hidden_sizes[0], channels=m.get("conv_channels"))
            model = QNetwork(0, self.n_actions, m.hidden_sizes[1:], m.dueling, m.activation, cnn)
        else:
            model = QNetwork(obs_dim(obs_space), self.n_actions, m.hidden_sizes, m.dueling, m.activation)
        init_q_learning(self, model, self.cfg.learn.learning_rate)  # optimizer, distribute, then the target copy

    @property
    def sends_priority(self) -> bool:
        """Whether actors send :meth:`initial_priority` with their chunks (``priority``: Ape-X)."""
        return bool(self.cfg.priority)

    @torch.no_grad()
    def initial_priority(self, rollout: Mapping[str, np.ndarray]) -> np.ndarray:
        """``|n-step TD error|`` (float32, ``[T, num_envs]``) of each transition of a collector rollout, from this
        copy of the networks: the target :meth:`learn` uses (double DQN with ``learn.double``), with the n-step
        return of the replay buffer, which ends at a termination, a truncation or the rollout's last step (as a
        buffer does at its newest row, so a rollout just added gets the priority :meth:`learn` would give it).

        Example::

            rollout = collector.collect(32, env_step)
            buffer.add(rollout, priority=policy.initial_priority(rollout))  # Ape-X: the actor computes them
        """
        reward = np.asarray(rollout["reward"], dtype=np.float64)
        done = np.asarray(rollout["terminated"]) | np.asarray(rollout["truncated"])
        steps, envs = reward.shape
        gamma, start, env = self.cfg.discount_factor, np.arange(steps)[:, None], np.arange(envs)[None, :]
        ret, last = np.zeros_like(reward), np.broadcast_to(start, reward.shape).copy()
        n, alive = np.zeros(reward.shape, dtype=np.int64), np.ones(reward.shape, dtype=bool)
        for k in range(int(self.cfg.get("nstep", 1))):
            active = alive & (start + k < steps)
            row = np.minimum(start + k, steps - 1)
            ret += np.where(active, gamma**k * reward[row, env], 0.0)
            last, n = np.where(active, start + k, last), np.where(active, k + 1, n)
            alive = active & ~done[row, env]
        discount = gamma**n * ~np.asarray(rollout["terminated"])[last, env]

        def flat(x: np.ndarray, dtype: Any = None) -> torch.Tensor:  # [T, envs, ...] -> [T * envs, ...]
            x = np.asarray(x).reshape(steps * envs, *np.shape(x)[2:])
            return obs_tensor(x, self.obs_space, self.device) if dtype is None else self.as_tensor(x, dtype)

        next_obs = flat(np.asarray(rollout["next_obs"])[last, env])
        next_q_target = self.target_model(next_obs)
        next_action = (self.model(next_obs) if self.cfg.learn.double else next_q_target).argmax(-1, keepdim=True)
        next_q = next_q_target.gather(1, next_action).squeeze(1)
        target = flat(ret.astype(np.float32), torch.float32) + flat(discount.astype(np.float32), torch.float32) * next_q
        q = self.model(flat(rollout["obs"])).gather(1, flat(rollout["action"], torch.long).unsqueeze(1)).squeeze(1)
        return (q - target).abs().reshape(steps, envs).cpu().numpy()

    def learn(self, batch: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """One gradient step on a replay batch (keys ``obs, action, reward, next_obs, discount``; ``weight`` with
        ``priority_IS_weight``). With ``priority`` the stats hold ``"priority"``: ``|TD error|`` per sample."""
        lc = self.cfg.learn
        with torch.no_grad():
            next_q_target = self.target_model(batch["next_obs"])
            if lc.double:  # the online net picks the action, the target net scores it
                next_action = self.model(batch["next_obs"]).argmax(dim=-1, keepdim=True)
            else:
                next_action = next_q_target.argmax(dim=-1, keepdim=True)
            next_q = next_q_target.gather(1, next_action).squeeze(1)
            target = batch["reward"] + batch["discount"] * next_q

        q = self.train_model(batch["obs"]).gather(1, batch["action"].long().unsqueeze(1)).squeeze(1)
        criterion = F.smooth_l1_loss if lc.loss == "huber" else F.mse_loss
        per_sample = criterion(q, target, reduction="none")
        if self.cfg.priority_IS_weight:
            per_sample = per_sample * batch["weight"]
        loss = per_sample.mean()

        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()  # through the wrapped model: gradients are averaged across ranks
        if lc.grad_clip_norm is not None:
            nn.utils.clip_grad_norm_(self.model.parameters(), lc.grad_clip_norm)
        self.optimizer.step()
        self.train_iter += 1

        update_target(self.target_model, self.model, self.train_iter, lc.target_update_freq, lc.target_theta)
        stats = {"loss": loss.detach(), "q_mean": q.detach().mean()}
        if self.cfg.priority:
            stats["priority"] = (q.detach() - target).abs()
        return stats
