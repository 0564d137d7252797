"""Soft Q-learning (Haarnoja, Tang, Abbeel and Levine 2017, "Reinforcement Learning with Deep Energy-Based Policies",
arXiv:1702.08165), for discrete actions as DI-engine's SQL.

Reading order: the network (:class:`~ding_dist.policy.networks.AtomQNetwork` with one output per action, a dueling
head by default as DI-engine's DQN network), :func:`soft_value` and :func:`sql_target`, acting, then ``learn``.

The Q-values are energies of a Boltzmann policy ``pi(a | s) = softmax(Q(s, .) / alpha)`` (``alpha``:
``learn.alpha``, the entropy temperature), whose soft value is ``V(s) = alpha * logsumexp(Q(s, .) / alpha)``
(the hard max as ``alpha -> 0``). The regression target of ``(s, a, r, s')`` is

    r + discount * alpha * logsumexp(Q_target(s', .) / alpha)

and the loss is its mean squared error with ``Q(s, a)`` (``reward`` is the replay's n-step sum and ``discount``
its ``gamma**n``, 0 after a termination). Acting samples the Boltzmann policy, with ``other.eps`` of uniformly
random actions mixed in (DI-engine's ``eps_greedy_multinomial_sample``); evaluation takes the argmax.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F

from ding_dist.policy.encoders import obs_tensor
from ding_dist.policy.networks import AtomQNetwork
from ding_dist.policy.q_learning import QLearningPolicy, init_q_learning
from ding_dist.policy.registry import register_policy
from ding_dist.utils.keys import Key

__all__ = ["SQLPolicy", "soft_value", "sql_target"]


def soft_value(q: torch.Tensor, alpha: float) -> torch.Tensor:
    """The soft value ``alpha * logsumexp(q / alpha)`` ``[batch]`` of Q-values ``q`` ``[batch, actions]``.

    Example::

        soft_value(torch.tensor([[0.0, math.log(3.0)]]), 1.0)  # log(1 + 3) = log 4
    """
    return alpha * torch.logsumexp(q / alpha, dim=-1)


def sql_target(next_q: torch.Tensor, reward: torch.Tensor, discount: torch.Tensor, alpha: float) -> torch.Tensor:
    """SQL's regression target ``reward + discount * soft_value(next_q, alpha)`` ``[batch]``, from the target
    network's Q-values ``next_q`` ``[batch, actions]`` at ``next_obs``.

    Example::

        sql_target(torch.tensor([[0.0, math.log(3.0)]]), torch.tensor([1.0]), torch.tensor([0.5]), 1.0)
        # 1 + 0.5 * log 4
    """
    return reward + discount * soft_value(next_q, alpha)


@register_policy("sql")
class SQLPolicy(QLearningPolicy):
    """Soft Q-learning for discrete actions.

    Config: the keys listed below (generated from ``keys``): QLearningPolicy's (DQN's), ``model.dueling`` and
    DI-engine's ``learn.alpha``.

    Example::

        cfg = SQLPolicy.default_config()
        policy = SQLPolicy(cfg, env.single_observation_space, env.single_action_space)
        stats = policy.learn(replay.sample(cfg.learn.batch_size))  # {"loss": ..., "soft_value": ...}

    Reference tests: tests/policy/test_sql.py (the soft value and target by hand, the step regressing on it).
    """

    algorithm = "SQL"

    keys = QLearningPolicy.keys.plus(
        Key("model.dueling", True, "dueling Q-network head"),
        Key("learn.alpha", 0.1, "entropy temperature (initial value when auto_alpha)"),
    )

    def __init__(
        self, cfg: Mapping[str, Any], obs_space: gym.Space, action_space: gym.Space, device: str | torch.device = "cpu"
    ) -> None:
        super().__init__(cfg, obs_space, action_space, device)
        if not self.cfg.learn.alpha > 0:
            raise ValueError(f"learn.alpha must be > 0, got {self.cfg.learn.alpha}")
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
        init_q_learning(self, net, lr=self.cfg.learn.learning_rate)

    @torch.no_grad()
    def collect_action(self, obs: np.ndarray, env_step: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Samples of ``softmax(Q / alpha)``; a uniformly random action with probability epsilon."""
        eps = self.schedule_values(env_step)["train/epsilon"]
        q = self.model(obs_tensor(obs, self.obs_space, self.device))
        actions = torch.multinomial(F.softmax(q / self.cfg.learn.alpha, dim=-1), 1).squeeze(1)
        explore = torch.rand(actions.shape, device=actions.device) < eps
        return torch.where(explore, torch.randint_like(actions, self.n_actions), actions).cpu().numpy(), {}

    def learn(self, batch: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """One gradient step on a replay batch (keys ``obs, action, reward, next_obs, discount``)."""
        alpha = self.cfg.learn.alpha
        with torch.no_grad():
            next_q = self.target_model(batch["next_obs"])
            target = sql_target(next_q, batch["reward"], batch["discount"], alpha)
        q = self.train_model(batch["obs"]).gather(1, batch["action"].long().unsqueeze(1)).squeeze(1)
        stats = self.apply_loss(F.mse_loss(q, target, reduction="none"), batch)
        return {**stats, "q_mean": q.detach().mean(), "soft_value": soft_value(next_q, alpha).mean()}
