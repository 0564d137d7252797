"""QR-DQN: distributional Q-learning by quantile regression (Dabney, Rowland, Bellemare and Munos 2018,
"Distributional Reinforcement Learning with Quantile Regression", arXiv:1710.10044).

Reading order: the network (:class:`~ding_dist.policy.networks.AtomQNetwork` with ``num_quantiles`` outputs per
action: the return distribution's quantiles at the fixed fractions ``tau_i = (2i + 1) / (2N)``; Q = their mean),
then ``learn``.

The target quantiles of a transition are ``reward + discount * theta_target(next_obs, a*)`` with ``a*`` the online
network's greedy action (as DI-engine's QR-DQN); the loss is the quantile Huber loss
(:func:`~ding_dist.policy.losses.quantile_huber_loss`) between every predicted and every target quantile.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import torch

from ding_dist.policy.losses import quantile_huber_loss
from ding_dist.policy.networks import AtomQNetwork
from ding_dist.policy.q_learning import QLearningPolicy, init_q_learning
from ding_dist.policy.registry import register_policy
from ding_dist.utils.keys import Key

__all__ = ["QRDQNPolicy"]


@register_policy("qrdqn")
class QRDQNPolicy(QLearningPolicy):
    """QR-DQN for discrete actions.

    Config: the keys listed below (generated from ``keys``): QLearningPolicy's (DQN's) and the quantiles' (DI-engine's
    defaults).

    Example::

        cfg = QRDQNPolicy.default_config()
        policy = QRDQNPolicy(cfg, env.single_observation_space, env.single_action_space)
        stats = policy.learn(replay.sample(cfg.learn.batch_size))  # {"loss": ..., "q_mean": ...}

    Reference tests: tests/policy/test_qrdqn.py (the quantile Huber loss by hand), tests/policy/test_q_references.py
    (at the midpoints, on the double-Q target).
    """

    algorithm = "QR-DQN"

    keys = QLearningPolicy.keys.plus(
        Key("model.num_quantiles", 32, "QR-DQN: quantiles per action, at the fractions (2i + 1) / (2N)"),
        Key("learn.kappa", 1.0, "threshold of the quantile Huber loss"),
    )

    def __init__(
        self, cfg: Mapping[str, Any], obs_space: gym.Space, action_space: gym.Space, device: str | torch.device = "cpu"
    ) -> None:
        super().__init__(cfg, obs_space, action_space, device)
        m = self.cfg.model
        n = int(m.num_quantiles)
        if n < 1:
            raise ValueError(f"model.num_quantiles must be >= 1, got {m.num_quantiles}")
        net = AtomQNetwork(
            obs_space,
            self.n_actions,
            n,
            hidden_sizes=m.hidden_sizes,
            activation=m.activation,
            conv_channels=m.conv_channels,
        )
        init_q_learning(self, net, lr=self.cfg.learn.learning_rate)
        self.tau = (torch.arange(n, dtype=torch.float32, device=self.device) + 0.5) / n  # quantile midpoints

    def learn(self, batch: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """One gradient step on a replay batch (keys ``obs, action, reward, next_obs, discount``)."""
        rows = torch.arange(batch["action"].shape[0], device=batch["action"].device)
        with torch.no_grad():
            next_action = self.model(batch["next_obs"]).argmax(dim=-1)  # the online net picks a*
            next_quantiles = self.target_model(batch["next_obs"], full=True)[rows, next_action]  # [batch, N]
            target = batch["reward"].unsqueeze(1) + batch["discount"].unsqueeze(1) * next_quantiles

        quantiles = self.train_model(batch["obs"], full=True)[rows, batch["action"].long()]  # [batch, N]
        stats = self.apply_loss(quantile_huber_loss(quantiles, target, self.tau, self.cfg.learn.kappa), batch)
        return {**stats, "q_mean": quantiles.detach().mean()}
