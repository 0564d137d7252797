"""FQF: fully parameterized quantile function (Yang, Zhao, Lin, Qin, Bian and Liu 2019, "Fully Parameterized
Quantile Function for Distributional Reinforcement Learning", arXiv:1911.02140).

Reading order: :class:`FQFNetwork` (a fraction proposal network picks ``N`` fractions per state; the quantile
values at their midpoints come from IQN's cosine embedding), then ``learn``.

For features ``x`` of a state the proposal network gives ``p = softmax(W x)`` (on ``x`` detached, so it never
trains the trunk) and the fractions ``tau_0 = 0 < tau_1 < ... < tau_N = 1``, ``tau_i = p_1 + ... + p_i``; the
quantile values ``F^-1(tau_hat_i)`` at the midpoints ``tau_hat_i = (tau_i + tau_(i+1)) / 2`` give
``Q(s, a) = sum_i (tau_(i+1) - tau_i) F^-1(tau_hat_i)``. Two losses, on disjoint parameters:

- quantile loss (trunk, embedding, head): the quantile Huber loss
  (:func:`~ding_dist.policy.losses.quantile_huber_loss`) of the taken action's values at ``tau_hat`` against
  ``reward + discount * F^-1_target(next_obs, a*)`` at the target network's own fractions for ``next_obs`` (as
  DI-engine), ``a*`` the online network's greedy action;
- fraction loss (proposal network): the 1-Wasserstein distance's gradient in each inner fraction,
  ``dW1/dtau_i = 2 F^-1(tau_i) - F^-1(tau_hat_(i-1)) - F^-1(tau_hat_i)`` (values detached), times ``tau_i``,
  summed over ``i = 1 .. N-1``; minus ``learn.ent_coef`` times the proposal's entropy.

The sum of the two goes through one backward and one Adam step with a parameter group per network (its own
learning rate), which is the two separate updates since their gradients do not overlap. Nothing is sampled, so
N ranks on the halves of a batch apply the update one process applies to the whole.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import torch
from torch import nn

from ding_dist.policy.base import mlp
from ding_dist.policy.losses import quantile_huber_loss
from ding_dist.policy.networks import trunk
from ding_dist.policy.q_learning import QLearningPolicy, init_q_learning
from ding_dist.policy.registry import register_policy
from ding_dist.utils.keys import Key

__all__ = ["FQFNetwork", "FQFPolicy", "fraction_loss"]


class FQFNetwork(nn.Module):
    """``forward(obs)``: Q-values ``[batch, actions]``; ``forward(obs, full=True)``: ``(tau, tau_hat, values,
    inner_values, entropy)``, the fractions ``[batch, N+1]``, their midpoints ``[batch, N]`` (detached), the
    quantile values at the midpoints ``[batch, N, actions]``, at the inner fractions ``tau_1 .. tau_(N-1)``
    ``[batch, N-1, actions]`` (no gradient) and the proposal's entropy ``[batch]``.

    The proposal layer starts near uniform fractions (Xavier weights with gain 0.01, zero bias, as DI-engine); the
    fraction embedding is ``ReLU(Linear(cos(pi * i * tau)))`` for ``i = 1 .. embedding_size`` (DI-engine's).

    Example::

        net = FQFNetwork(gym.spaces.Box(-1, 1, (4,)), 2, hidden_sizes=[64], num_quantiles=8)
        tau, tau_hat, values, inner, entropy = net(torch.zeros(3, 4), full=True)  # (3, 9), (3, 8), (3, 8, 2), ...
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
        self.fraction = nn.Linear(width, int(num_quantiles))
        nn.init.xavier_uniform_(self.fraction.weight, gain=0.01)
        nn.init.zeros_(self.fraction.bias)
        self.embed = nn.Sequential(nn.Linear(int(embedding_size), width), nn.ReLU())
        self.head = mlp([width, *head_hidden_sizes, int(n_actions)], activation)
        freqs = math.pi * torch.arange(1, int(embedding_size) + 1, dtype=torch.float32)
        self.register_buffer("freqs", freqs, persistent=False)

    def quantile_values(self, features: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
        """Quantile values ``[batch, K, actions]`` at fractions ``tau`` ``[batch, K]`` of trunk ``features``."""
        phi = self.embed(torch.cos(tau.unsqueeze(-1) * self.freqs))  # [batch, K, width]
        return self.head(features.unsqueeze(1) * phi)

    def forward(self, obs: torch.Tensor, full: bool = False):
        features = self.body(obs)
        log_p = self.fraction(features.detach()).log_softmax(dim=-1)  # the proposal does not train the trunk
        p = log_p.exp()
        tau = torch.cat([torch.zeros_like(p[:, :1]), p.cumsum(dim=-1)], dim=-1)  # [batch, N+1]
        tau_hat = ((tau[:, 1:] + tau[:, :-1]) / 2).detach()
        values = self.quantile_values(features, tau_hat)  # [batch, N, actions]
        if not full:
            return ((tau[:, 1:] - tau[:, :-1]).unsqueeze(-1) * values).sum(dim=1)
        with torch.no_grad():
            inner = self.quantile_values(features, tau[:, 1:-1].detach())
        return tau, tau_hat, values, inner, -(p * log_p).sum(dim=-1)


def fraction_loss(tau: torch.Tensor, values_hat: torch.Tensor, values_inner: torch.Tensor) -> torch.Tensor:
    """FQF's fraction loss per sample ``[batch]``: ``sum_i dW1/dtau_i * tau_i`` over the inner fractions
    ``tau[:, 1:-1]``, with ``dW1/dtau_i = 2 F^-1(tau_i) - F^-1(tau_hat_(i-1)) - F^-1(tau_hat_i)`` from the taken
    action's values at the midpoints ``values_hat`` ``[batch, N]`` and at the inner fractions ``values_inner``
    ``[batch, N-1]`` (both detached); its gradient in ``tau_i`` is the W1 gradient (Yang et al., Proposition 1).

    Example::

        loss = fraction_loss(tau, values[rows, :, a], inner[rows, :, a]).mean()
    """
    grad = 2 * values_inner.detach() - values_hat[:, :-1].detach() - values_hat[:, 1:].detach()
    return (grad * tau[:, 1:-1]).sum(dim=-1)


@register_policy("fqf")
class FQFPolicy(QLearningPolicy):
    """FQF for discrete actions.

    Config: the keys listed below (generated from ``keys``): QLearningPolicy's (DQN's; ``learn.learning_rate`` is the
    quantile network's) and the fraction proposal's.

    Example::

        cfg = FQFPolicy.default_config()
        policy = FQFPolicy(cfg, env.single_observation_space, env.single_action_space)
        stats = policy.learn(replay.sample(cfg.learn.batch_size))  # {"loss", "quantile_loss", "fraction_loss", ...}

    Reference tests: tests/policy/test_fqf.py (fractions, width-weighted Q, the W1 fraction loss),
    tests/policy/test_q_references.py (the quantile loss and the paper's fraction loss on the double-Q target).
    """

    algorithm = "FQF"

    keys = QLearningPolicy.keys.plus(
        Key("model.num_quantiles", 32, "FQF: fractions proposed per state (their midpoints' quantile values)"),
        Key("model.quantile_embedding_size", 128, "IQN: cosines cos(pi i tau) embedding each fraction"),
        Key(
            "model.head_hidden_sizes",
            [128],
            "IQN: hidden layer sizes after the product of features and fraction embedding",
            "sizes",
        ),
        Key("learn.learning_rate", 5e-05, "FQF: Adam learning rate of the quantile network (trunk, embedding, head)"),
        Key("learn.learning_rate_fraction", 2.5e-09, "FQF: Adam learning rate of the fraction proposal network", "> 0"),
        Key("learn.ent_coef", 0.0, "FQF: weight of the proposal's entropy, subtracted from the fraction loss"),
        Key("learn.kappa", 1.0, "threshold of the quantile Huber loss"),
    )

    def __init__(
        self, cfg: Mapping[str, Any], obs_space: gym.Space, action_space: gym.Space, device: str | torch.device = "cpu"
    ) -> None:
        super().__init__(cfg, obs_space, action_space, device)
        m, lc = self.cfg.model, self.cfg.learn
        if int(m.num_quantiles) < 2 or int(m.quantile_embedding_size) < 1:
            raise ValueError(
                f"FQF needs model.num_quantiles >= 2 and quantile_embedding_size >= 1, got {m.num_quantiles}, "
                f"{m.quantile_embedding_size}"
            )
        net = FQFNetwork(
            obs_space,
            self.n_actions,
            m.hidden_sizes,
            m.head_hidden_sizes,
            m.quantile_embedding_size,
            m.num_quantiles,
            m.activation,
            m.conv_channels,
        )
        quantile_params = [p for name, p in net.named_parameters() if not name.startswith("fraction.")]
        global_batch = lc.batch_size  # the run's batch (every rank's share together)
        groups = [
            {"params": quantile_params, "lr": lc.learning_rate, "eps": 1e-2 / global_batch},  # DI-engine's eps
            {"params": list(net.fraction.parameters()), "lr": lc.learning_rate_fraction},
        ]
        init_q_learning(self, net, lr=lc.learning_rate, params=groups)

    def learn(self, batch: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """One gradient step on a replay batch (keys ``obs, action, reward, next_obs, discount``)."""
        action = batch["action"].long()
        rows = torch.arange(action.shape[0], device=action.device)
        with torch.no_grad():
            next_action = self.model(batch["next_obs"]).argmax(dim=-1)  # the online net picks a*
            next_values = self.target_model(batch["next_obs"], full=True)[2][rows, :, next_action]  # [batch, N]
            target = batch["reward"].unsqueeze(1) + batch["discount"].unsqueeze(1) * next_values

        tau, tau_hat, values, inner, entropy = self.train_model(batch["obs"], full=True)
        taken, taken_inner = values[rows, :, action], inner[rows, :, action]
        quantile = quantile_huber_loss(taken, target, tau_hat, self.cfg.learn.kappa)
        fraction = (fraction_loss(tau, taken, taken_inner) - self.cfg.learn.ent_coef * entropy).mean()
        stats = self.apply_loss(quantile, batch, aux_loss=fraction)
        return {**stats, "fraction_loss": fraction.detach(), "q_mean": taken.detach().mean()}
