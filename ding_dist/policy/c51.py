"""C51: distributional Q-learning on a fixed support (Bellemare, Dabney and Munos 2017, "A Distributional
Perspective on Reinforcement Learning", arXiv:1707.06887).

Reading order: the network (:class:`~ding_dist.policy.networks.CategoricalQNetwork`: logits of a categorical
distribution over ``n_atom`` atoms from ``v_min`` to ``v_max`` per action; Q = its mean), then ``learn``.

The target of a transition is the distribution of ``reward + discount * Z(next_obs, a*)`` projected back onto
the support (:func:`~ding_dist.policy.losses.categorical_projection`), with ``a*`` the online network's greedy
action and ``Z`` the target network's distribution (as DI-engine's C51); the loss is its cross-entropy with the
predicted distribution of the action taken. ``reward`` and ``discount`` (``gamma**n``, 0 after a termination)
come from the replay's n-step returns.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import torch

from ding_dist.policy.losses import categorical_projection
from ding_dist.policy.networks import CategoricalQNetwork
from ding_dist.policy.q_learning import QLearningPolicy, init_q_learning
from ding_dist.policy.registry import register_policy
from ding_dist.utils.keys import Key

__all__ = ["C51Policy"]


@register_policy("c51")
class C51Policy(QLearningPolicy):
    """C51 for discrete actions.

    Config: the keys listed below (generated from ``keys``): QLearningPolicy's (DQN's) and the support's (DI-engine's
    51, -10, 10).

    Example::

        cfg = C51Policy.default_config()
        policy = C51Policy(cfg, env.single_observation_space, env.single_action_space)
        stats = policy.learn(replay.sample(cfg.learn.batch_size))  # {"loss": ..., "q_mean": ...}

    Reference tests: tests/policy/test_c51.py (the projection by hand, the cross-entropy step),
    tests/policy/test_q_references.py (projection between and outside the support, the double-Q target).
    """

    algorithm = "C51"

    keys = QLearningPolicy.keys.plus(
        Key("model.n_atom", 51, "C51, Rainbow: atoms of the value distribution's support"),
        Key("model.v_min", -10.0, "C51, Rainbow: the smallest atom of the support"),
        Key("model.v_max", 10.0, "C51, Rainbow: the largest atom of the support"),
    )

    def __init__(
        self, cfg: Mapping[str, Any], obs_space: gym.Space, action_space: gym.Space, device: str | torch.device = "cpu"
    ) -> None:
        super().__init__(cfg, obs_space, action_space, device)
        m = self.cfg.model
        net = CategoricalQNetwork(
            obs_space,
            self.n_actions,
            m.n_atom,
            m.v_min,
            m.v_max,
            hidden_sizes=m.hidden_sizes,
            activation=m.activation,
            conv_channels=m.conv_channels,
        )
        init_q_learning(self, net, lr=self.cfg.learn.learning_rate)

    def learn(self, batch: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """One gradient step on a replay batch (keys ``obs, action, reward, next_obs, discount``)."""
        rows = torch.arange(batch["action"].shape[0], device=batch["action"].device)
        with torch.no_grad():
            next_action = self.model(batch["next_obs"]).argmax(dim=-1)  # the online net picks a*
            next_probs = self.target_model(batch["next_obs"], full=True).softmax(dim=-1)[rows, next_action]
            target = categorical_projection(next_probs, batch["reward"], batch["discount"], self.model.support)

        logits = self.train_model(batch["obs"], full=True)[rows, batch["action"].long()]  # [batch, n_atom]
        stats = self.apply_loss(-(target * logits.log_softmax(dim=-1)).sum(dim=-1), batch)  # cross-entropy
        q = (logits.detach().softmax(dim=-1) * self.model.support).sum(dim=-1)
        return {**stats, "q_mean": q.mean()}
