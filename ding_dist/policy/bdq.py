"""BDQ: branching dueling Q-network (Tavakoli, Pardo and Kormushev 2018, "Action Branching Architectures for Deep
Reinforcement Learning", arXiv:1711.08946), as DI-engine's ``bdq``: a Box action space, each of its dimensions
discretized into ``model.action_bins_per_branch`` evenly spaced values from its low to its high bound.

Reading order: :class:`BranchingQNetwork` (a shared trunk, one state value and one advantage branch per action
dimension: ``Q_d(s, k) = V(s) + A_d(s, k) - mean_k A_d(s, k)``), then ``learn``.

Each dimension (branch) ``d`` is its own Q-learning problem with a shared reward: its target is
``y_d = reward + discount * Q_target_d(next_obs, argmax_k Q_d(next_obs, k))`` (the online network picks each
branch's next bin, the target network scores it; DI-engine's per-branch target), and a sample's loss is the mean
over branches of ``(Q_d(obs, a_d) - y_d)**2``. The trunk's features are divided by ``branches + 1`` before the
heads (the paper's gradient rescaling, as DI-engine does). The replay stores each dimension's bin index (in the
Box's float array); :meth:`BDQPolicy.to_env_action` maps bin ``k`` to ``-1 + 2k / (bins - 1)`` and that onto the
bounds. Exploration is epsilon-greedy per branch. Nothing is sampled in ``learn``: N ranks on the halves of a batch
apply the update one process applies to the whole.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from ding_dist.policy.base import mlp
from ding_dist.policy.continuous import BoxActions
from ding_dist.policy.networks import trunk
from ding_dist.policy.q_learning import QLearningPolicy, init_q_learning
from ding_dist.policy.registry import register_policy
from ding_dist.utils.keys import Key

__all__ = ["BDQPolicy", "BranchingQNetwork"]


class BranchingQNetwork(nn.Module):
    """``forward(obs)``: Q-values ``[batch, branches, bins]``. The value stream and each advantage branch have
    ``head_layers`` hidden layers of the trunk's width (DI-engine's ``layer_num``, 3).

    Example::

        net = BranchingQNetwork(gym.spaces.Box(-1, 1, (3,)), branches=2, bins=11, hidden_sizes=[64])
        net(torch.zeros(5, 3)).shape  # (5, 2, 11)
    """

    def __init__(
        self,
        obs_space: gym.Space,
        branches: int,
        bins: int,
        hidden_sizes: Sequence[int] = (128, 128, 64),
        head_layers: int = 3,
        activation: str = "relu",
        conv_channels: Sequence[int] | None = None,
    ) -> None:
        super().__init__()
        self.body, width = trunk(obs_space, hidden_sizes, activation, conv_channels)
        self.branches, self.bins = int(branches), int(bins)
        hidden = [width] * (1 + int(head_layers))
        self.value = mlp([*hidden, 1], activation)
        self.advantages = nn.ModuleList(mlp([*hidden, self.bins], activation) for _ in range(self.branches))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = self.body(obs) / (self.branches + 1)  # gradient rescaling: the trunk gets the branches' mean
        adv = torch.stack([branch(x) for branch in self.advantages], dim=1)  # [batch, branches, bins]
        return self.value(x).unsqueeze(1) + adv - adv.mean(dim=-1, keepdim=True)


@register_policy("bdq")
class BDQPolicy(QLearningPolicy):
    """BDQ for Box action spaces with finite bounds.

    Config: the keys listed below (generated from ``keys``): QLearningPolicy's (DQN's) and the branches'.

    Example::

        cfg = BDQPolicy.default_config()
        policy = BDQPolicy(cfg, env.single_observation_space, env.single_action_space)  # Pendulum: 1 branch
        bins, _ = policy.collect_action(obs, env_step=0)  # [n, 1] bin indices; policy.to_env_action(bins): torques

    Reference tests: tests/policy/test_bdq.py (each branch's own double-Q target).
    """

    algorithm = "BDQ"

    keys = QLearningPolicy.keys.plus(
        Key("model.hidden_sizes", [128, 128, 64]),
        Key("model.action_bins_per_branch", 11, "BDQ: values per action dimension, evenly spaced between its bounds"),
        Key("model.head_layer_num", 3, "BDQ: hidden layers of the value stream and of each branch"),
        Key("model.num_branches", None, "BDQ: action dimensions, one branch each (None: the Box's size)"),
    )

    def count_actions(self, action_space: gym.Space) -> int:
        self.box = BoxActions(action_space, self.algorithm)
        bins = int(self.cfg.model.action_bins_per_branch)
        if bins < 2:
            raise ValueError(f"BDQ needs model.action_bins_per_branch >= 2, got {bins}")
        branches = self.cfg.model.num_branches
        if branches is not None and int(branches) != self.box.size:
            raise ValueError(f"model.num_branches={branches}, but the action space {action_space} has {self.box.size}")
        return bins

    def __init__(
        self, cfg: Mapping[str, Any], obs_space: gym.Space, action_space: gym.Space, device: str | torch.device = "cpu"
    ) -> None:
        super().__init__(cfg, obs_space, action_space, device)
        m = self.cfg.model
        net = BranchingQNetwork(
            obs_space, self.box.size, self.n_actions, m.hidden_sizes, m.head_layer_num, m.activation, m.conv_channels
        )
        init_q_learning(self, net, lr=self.cfg.learn.learning_rate)

    # --- acting: bin indices per dimension (stored in the Box's float array) ----------------------------------
    @property
    def action_branches(self) -> tuple[int, ...]:
        return (self.box.size,)

    def collect_action(self, obs: np.ndarray, env_step: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        bins, extras = super().collect_action(obs, env_step)  # epsilon-greedy per branch
        return bins.reshape(obs.shape[0], *self.box.shape).astype(np.float32), extras

    def to_env_action(self, action: np.ndarray) -> np.ndarray:
        """Bin ``k`` of each dimension -> ``-1 + 2k / (bins - 1)`` in ``[-1, 1]`` -> the Box's bounds."""
        return self.box.to_env(action * (2.0 / (self.n_actions - 1)) - 1.0)

    def eval_action(self, obs: np.ndarray) -> np.ndarray:
        bins = super().eval_action(obs).reshape(obs.shape[0], *self.box.shape).astype(np.float32)
        return self.to_env_action(bins)

    # --- learning -------------------------------------------------------------------------------
    def learn(self, batch: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """One gradient step on a replay batch (keys ``obs, action, reward, next_obs, discount``)."""
        action = batch["action"].reshape(batch["action"].shape[0], -1).long()  # [batch, branches]
        with torch.no_grad():
            next_bins = self.model(batch["next_obs"]).argmax(dim=-1, keepdim=True)  # each branch's a*, online net
            next_q = self.target_model(batch["next_obs"]).gather(-1, next_bins).squeeze(-1)  # [batch, branches]
            target = batch["reward"].unsqueeze(1) + batch["discount"].unsqueeze(1) * next_q
        q = self.train_model(batch["obs"]).gather(-1, action.unsqueeze(-1)).squeeze(-1)
        stats = self.apply_loss((q - target).pow(2).mean(dim=1), batch)
        return {**stats, "q_mean": q.detach().mean()}
