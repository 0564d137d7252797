"""IQN: implicit quantile networks (Dabney, Ostrovski, Silver and Munos 2018, "Implicit Quantile Networks for
Distributional Reinforcement Learning", arXiv:1806.06923).

Reading order: :class:`ImplicitQuantileNetwork` (the return distribution's quantile value at any fraction
``tau``: the trunk's features times an embedding of ``cos(pi i tau)``, then the head), then ``learn``.

Each update draws ``num_quantiles`` fractions ``tau ~ U(0, 1)`` per sample for the prediction and as many
``tau'`` for the target ``reward + discount * Z_target(next_obs, a*; tau')``, ``a*`` the online network's greedy
action; the loss is the quantile Huber loss (:func:`~ding_dist.policy.losses.quantile_huber_loss`). The fractions
are drawn for the global batch from a generator seeded by the update number
(:func:`~ding_dist.policy.rng.step_generator`), and each rank takes its samples' rows
(:func:`~ding_dist.policy.rng.global_rows`): N ranks draw what one process draws for the same samples.
Acting averages the quantile values at ``num_quantiles`` evenly spaced fractions (DI-engine: random ones), so
greedy evaluation is deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import torch
from torch import nn

from ding_dist.comm import get_world_size
from ding_dist.data.replay import to_device
from ding_dist.policy.base import mlp
from ding_dist.policy.losses import quantile_huber_loss
from ding_dist.policy.networks import trunk
from ding_dist.policy.q_learning import QLearningPolicy, init_q_learning
from ding_dist.policy.registry import register_policy
from ding_dist.policy.rng import global_rows, parameter_seed, step_generator
from ding_dist.utils.keys import Key

__all__ = ["IQNPolicy", "ImplicitQuantileNetwork"]


class ImplicitQuantileNetwork(nn.Module):
    """``forward(obs, tau)``: quantile values ``[batch, N, actions]`` at fractions ``tau`` ``[batch, N]``;
    ``forward(obs)``: Q-values ``[batch, actions]``, the mean over ``num_quantiles`` evenly spaced fractions.

    The fraction embedding is ``ReLU(Linear(cos(pi * i * tau)))`` for ``i = 0 .. embedding_size - 1``, multiplied
    into the trunk's features; ``head_hidden_sizes`` hidden layers then map the product to one value per action.

    Example::

        net = ImplicitQuantileNetwork(gym.spaces.Box(-1, 1, (4,)), 2, hidden_sizes=[64], head_hidden_sizes=[64])
        net(torch.zeros(3, 4), torch.rand(3, 8)).shape, net(torch.zeros(3, 4)).shape  # (3, 8, 2), (3, 2)
    """

    def __init__(
        self,
        obs_space: gym.Space,
        n_actions: int,
        hidden_sizes: Sequence[int] = (128, 128),
        head_hidden_sizes: Sequence[int] = (128,),
        embedding_size: int = 128,
        num_quantiles: int = 32,
        activation: str = "relu",
        conv_channels: Sequence[int] | None = None,
    ) -> None:
        super().__init__()
        self.body, width = trunk(obs_space, hidden_sizes, activation, conv_channels)
        self.embed = nn.Sequential(nn.Linear(int(embedding_size), width), nn.ReLU())
        self.head = mlp([width, *head_hidden_sizes, int(n_actions)], activation)
        freqs = math.pi * torch.arange(int(embedding_size), dtype=torch.float32)
        self.register_buffer("freqs", freqs, persistent=False)
        midpoints = (torch.arange(int(num_quantiles), dtype=torch.float32) + 0.5) / int(num_quantiles)
        self.register_buffer("midpoints", midpoints, persistent=False)

    def forward(self, obs: torch.Tensor, tau: torch.Tensor | None = None) -> torch.Tensor:
        if tau is None:
            tau = self.midpoints.expand(obs.shape[0], -1)
            return self(obs, tau).mean(dim=1)
        features = self.body(obs).unsqueeze(1)  # [batch, 1, width]
        phi = self.embed(torch.cos(tau.unsqueeze(-1) * self.freqs))  # [batch, N, width]
        return self.head(features * phi)


@register_policy("iqn")
class IQNPolicy(QLearningPolicy):
    """IQN for discrete actions.

    Config: the keys listed below (generated from ``keys``): QLearningPolicy's (DQN's) and the quantile embedding's
    (DI-engine's defaults).

    Example::

        cfg = IQNPolicy.default_config()
        policy = IQNPolicy(cfg, env.single_observation_space, env.single_action_space)
        stats = policy.learn(replay.sample(cfg.learn.batch_size))  # {"loss": ..., "q_mean": ...}

    Reference tests: tests/policy/test_iqn.py (the cosine embedding, the step), tests/policy/test_q_references.py
    (the quantile Huber loss at the drawn fractions, double-Q target).
    """

    algorithm = "IQN"

    keys = QLearningPolicy.keys.plus(
        Key("model.num_quantiles", 32, "IQN: fractions drawn per sample for the prediction and for the target"),
        Key("model.quantile_embedding_size", 128, "IQN: cosines cos(pi i tau) embedding each fraction"),
        Key(
            "model.head_hidden_sizes",
            [128],
            "IQN: hidden layer sizes after the product of features and fraction embedding",
            "sizes",
        ),
        Key("learn.kappa", 1.0, "threshold of the quantile Huber loss"),
    )

    def __init__(
        self, cfg: Mapping[str, Any], obs_space: gym.Space, action_space: gym.Space, device: str | torch.device = "cpu"
    ) -> None:
        super().__init__(cfg, obs_space, action_space, device)
        m = self.cfg.model
        if int(m.num_quantiles) < 1 or int(m.quantile_embedding_size) < 1:
            raise ValueError(
                f"model.num_quantiles and quantile_embedding_size must be >= 1, got {m.num_quantiles}, "
                f"{m.quantile_embedding_size}"
            )
        net = ImplicitQuantileNetwork(
            obs_space,
            self.n_actions,
            m.hidden_sizes,
            m.head_hidden_sizes,
            m.quantile_embedding_size,
            m.num_quantiles,
            m.activation,
            m.conv_channels,
        )
        init_q_learning(self, net, lr=self.cfg.learn.learning_rate)
        self.quantile_seed = parameter_seed(self.model)  # the same on every rank

    def draw_fractions(self, local_rows: int) -> tuple[torch.Tensor, torch.Tensor]:
        """This update's fractions ``(tau, tau')``, each ``[local_rows, num_quantiles]``: this rank's rows of the
        draw for the global batch (``local_rows`` per rank), the same for every world size.

        Example::

            tau, tau_next = policy.draw_fractions(batch["action"].shape[0])
        """
        n, world = int(self.cfg.model.num_quantiles), get_world_size(self.sync_group)
        g = step_generator(self.quantile_seed, self.train_iter)
        both = to_device(torch.rand(2, local_rows * world, n, generator=g), self.device)  # no stream sync
        return global_rows(both[0], local_rows, self.sync_group), global_rows(both[1], local_rows, self.sync_group)

    def learn(self, batch: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """One gradient step on a replay batch (keys ``obs, action, reward, next_obs, discount``)."""
        action = batch["action"].long()
        tau, tau_next = self.draw_fractions(action.shape[0])
        rows = torch.arange(action.shape[0], device=action.device)
        with torch.no_grad():
            next_action = self.model(batch["next_obs"]).argmax(dim=-1)  # the online net picks a*
            next_values = self.target_model(batch["next_obs"], tau_next)[rows, :, next_action]  # [batch, N']
            target = batch["reward"].unsqueeze(1) + batch["discount"].unsqueeze(1) * next_values

        values = self.train_model(batch["obs"], tau)[rows, :, action]  # [batch, N]
        stats = self.apply_loss(quantile_huber_loss(values, target, tau, self.cfg.learn.kappa), batch)
        return {**stats, "q_mean": values.detach().mean()}
