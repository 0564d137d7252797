"""Munchausen DQN (Vieillard, Pietquin and Geist 2020, "Munchausen Reinforcement Learning", arXiv:2007.14430).

Reading order: the network (:class:`~ding_dist.policy.networks.AtomQNetwork` with one output per action, a dueling
head by default as DI-engine's DQN network), then ``learn``.

Soft Q-learning with the scaled log-policy added to the reward. With the target network's Q-values ``q`` and the
softmax policy ``pi = softmax(q / tau)`` (``tau``: ``entropy_tau``), the regression target of ``(s, a, r, s')`` is

    r + m_alpha * clip(tau * log pi(a | s), -1, 0) + discount * sum_b pi(b | s') * (q(s', b) - tau * log pi(b | s'))

and the loss is its mean squared error with ``Q(s, a)`` (as DI-engine's MDQN; ``discount`` is the replay's
``gamma``, 0 after a termination: Munchausen DQN is a 1-step method, so ``nstep`` must be 1).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import torch
import torch.nn.functional as F

from ding_dist.policy.networks import AtomQNetwork
from ding_dist.policy.q_learning import QLearningPolicy, init_q_learning
from ding_dist.policy.registry import register_policy
from ding_dist.utils.keys import Key

__all__ = ["MDQNPolicy", "munchausen_target"]

#: Adam's epsilon, as DI-engine's MDQN (and the paper's implementation) sets it.
ADAM_EPS = 0.0003125
#: The lower clip of the Munchausen term ``tau * log pi`` (the paper's l_0).
LOG_PI_CLIP = -1.0


def munchausen_target(
    q: torch.Tensor,
    next_q: torch.Tensor,
    action: torch.Tensor,
    reward: torch.Tensor,
    discount: torch.Tensor,
    tau: float,
    alpha: float,
) -> torch.Tensor:
    """The Munchausen regression target ``[batch]`` from the target network's Q-values ``q`` (at ``obs``) and
    ``next_q`` (at ``next_obs``), both ``[batch, actions]`` (see the module docstring).

    Example::

        q = torch.tensor([[0.0, math.log(3.0)]])  # tau = 1: pi = [1/4, 3/4], soft value log 4
        munchausen_target(q, q, torch.tensor([1]), torch.tensor([1.0]), torch.tensor([0.5]), 1.0, 0.9)
        # 1 + 0.9 * log(3/4) + 0.5 * log 4
    """
    tau_log_pi = q - tau * torch.logsumexp(q / tau, dim=-1, keepdim=True)  # tau * log softmax(q / tau)
    bonus = alpha * tau_log_pi.gather(1, action.long().unsqueeze(1)).squeeze(1).clamp(LOG_PI_CLIP, 0.0)
    next_tau_log_pi = next_q - tau * torch.logsumexp(next_q / tau, dim=-1, keepdim=True)
    next_pi = F.softmax(next_q / tau, dim=-1)
    soft_value = (next_pi * (next_q - next_tau_log_pi)).sum(dim=-1)
    return reward + bonus + discount * soft_value


@register_policy("mdqn")
class MDQNPolicy(QLearningPolicy):
    """Munchausen DQN for discrete actions.

    Config: the keys listed below (generated from ``keys``): QLearningPolicy's (DQN's) and DI-engine's ``entropy_tau``
    and ``m_alpha``.

    Example::

        cfg = MDQNPolicy.default_config()
        policy = MDQNPolicy(cfg, env.single_observation_space, env.single_action_space)
        stats = policy.learn(replay.sample(cfg.learn.batch_size))  # {"loss": ..., "q_mean": ...}

    Reference tests: tests/policy/test_mdqn.py (the Munchausen target by hand, the step regressing on it).
    """

    algorithm = "Munchausen DQN"

    keys = QLearningPolicy.keys.plus(
        Key("model.dueling", True, "dueling Q-network head"),
        Key("entropy_tau", 0.03, "Munchausen DQN: temperature of the softmax policy of the Q-values"),
        Key("m_alpha", 0.9, "Munchausen DQN: weight of the clipped tau * log pi(a|s) added to the reward"),
    )

    def __init__(
        self, cfg: Mapping[str, Any], obs_space: gym.Space, action_space: gym.Space, device: str | torch.device = "cpu"
    ) -> None:
        super().__init__(cfg, obs_space, action_space, device)
        if int(self.cfg.nstep) != 1:
            raise ValueError(f"Munchausen DQN learns from 1-step transitions: nstep must be 1, got {self.cfg.nstep}")
        if not self.cfg.entropy_tau > 0:
            raise ValueError(f"entropy_tau must be > 0, got {self.cfg.entropy_tau}")
        m = self.cfg.model
        net = AtomQNetwork(
            obs_space,
            self.n_actions,
            1,
            hidden_sizes=m.hidden_sizes,
            dueling=m.dueling,
            activation=m.activation,
            conv_channels=m.conv_channels,
        )
        init_q_learning(self, net, lr=self.cfg.learn.learning_rate, eps=ADAM_EPS)

    def learn(self, batch: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """One gradient step on a replay batch (keys ``obs, action, reward, next_obs, discount``)."""
        with torch.no_grad():
            target = munchausen_target(
                self.target_model(batch["obs"]),
                self.target_model(batch["next_obs"]),
                batch["action"],
                batch["reward"],
                batch["discount"],
                self.cfg.entropy_tau,
                self.cfg.m_alpha,
            )
        q = self.train_model(batch["obs"]).gather(1, batch["action"].long().unsqueeze(1)).squeeze(1)
        stats = self.apply_loss(F.mse_loss(q, target, reduction="none"), batch)
        return {**stats, "q_mean": q.detach().mean()}
