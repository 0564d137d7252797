"""Pieces the value-based policies share (C51, QR-DQN, MDQN, IQN, ...), one place each.

- :class:`QLearningPolicy`: the part every epsilon-greedy Q-learner repeats: DQN's config keys, acting on
  ``self.model(obs)`` (Q-values ``[batch, actions]``), and :meth:`QLearningPolicy.apply_loss` (one synchronized
  gradient step, then the target network's update). A policy file adds its network and its loss in ``learn``.
- :func:`trunk` builds the feature layers from the observation space (Nature-CNN for images, else an MLP);
  :class:`DuelingHead` (``V + A - mean A``, per atom), :class:`AtomQNetwork` (a trunk and a plain or dueling head
  giving ``[batch, actions, atoms]``) and :class:`CategoricalQNetwork` (C51's distribution on a fixed support);
- :class:`NoisyLinear`: factorized Gaussian noisy layer (Rainbow), its noise drawn from a generator the caller
  passes, so every rank can draw the same noise;
- :func:`categorical_projection` (C51's projection of the Bellman-shifted distribution onto the support) and
  :func:`quantile_huber_loss` (QR-DQN, IQN);
- :func:`init_q_learning` (optimizer, :meth:`Policy.distribute`, target copy) and :func:`update_target`
  (hard copies every K updates or a soft update per update);
- :func:`step_generator`, :func:`parameter_seed` and :func:`global_rows`: per-update random draws that are the same
  on every rank and for every world size (IQN's fractions, Rainbow's noise), so N ranks apply the update one
  process would.
"""

from __future__ import annotations

import copy
import hashlib
import math
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from easydict import EasyDict
from torch import nn

from ding_dist.comm import get_rank, get_world_size
from ding_dist.policy.base import Policy, action_info, hard_update, mlp, obs_dim, soft_update
from ding_dist.policy.dqn import epsilon_schedule
from ding_dist.policy.encoders import conv_encoder, is_conv_space, obs_tensor

__all__ = [
    "QLearningPolicy",
    "AtomQNetwork",
    "CategoricalQNetwork",
    "DuelingHead",
    "NoisyLinear",
    "categorical_projection",
    "discrete_actions",
    "global_rows",
    "init_q_learning",
    "parameter_seed",
    "quantile_huber_loss",
    "step_generator",
    "trunk",
    "update_target",
]


# ---------------------------------------------------------------------------------------------- the policy
class QLearningPolicy(Policy):
    """The shared half of an epsilon-greedy Q-learner; a subclass builds ``self.model`` (whose ``forward(obs)``
    gives Q-values ``[batch, actions]``) with :func:`init_q_learning` and writes ``learn``.

    Config (``policy.*``, as :class:`~ding_dist.policy.dqn.DQNPolicy`): ``discount_factor``, ``nstep``;
    ``model.hidden_sizes``, ``model.activation``; ``learn.update_per_collect``, ``learn.learning_starts``,
    ``learn.target_update_freq`` or ``learn.target_theta``, ``learn.grad_clip_norm``; ``other.eps``;
    ``other.replay_buffer``; prioritized replay as DQN's: ``priority`` (the replay samples by priority and
    :meth:`apply_loss` returns each sample's loss as its new priority), ``priority_IS_weight`` (the batch's
    importance weights multiply the per-sample loss), ``other.replay_buffer.alpha``/``beta``/``anneal_step``. The
    replay gives ``reward`` (the n-step sum) and ``discount`` (``gamma**n``, 0 after a termination), so no loss here
    needs ``gamma`` or ``nstep`` itself.

    Example::

        class MyQPolicy(QLearningPolicy):
            def __init__(self, cfg, obs_space, action_space, device="cpu"):
                super().__init__(cfg, obs_space, action_space, device)
                init_q_learning(self, AtomQNetwork(obs_space, self.n_actions, 1, [64]), self.cfg.learn.learning_rate)

            def learn(self, batch):
                per_sample = ...  # from self.train_model(batch["obs"]) and self.target_model(batch["next_obs"])
                return self.apply_loss(per_sample, batch)  # {"loss": ..., with priority: "priority": ...}

    Reference tests: tests/policy/test_q_references.py (prioritized sampling p^alpha / sum, weights (N P)^-beta /
    max, priorities after an update).
    """

    on_policy = False
    _state_attrs = ("model", "target_model", "optimizer")
    #: The algorithm's name in error messages.
    algorithm = "Q-learning"

    @classmethod
    def default_config(cls) -> EasyDict:
        cfg = super().default_config()
        cfg.discount_factor = 0.99
        cfg.nstep = 1
        cfg.model = EasyDict(hidden_sizes=[128, 128], activation="relu", conv_channels=None)
        cfg.learn.update(
            batch_size=64,
            learning_rate=1e-3,
            update_per_collect=1,
            learning_starts=1000,
            target_update_freq=100,
            target_theta=None,
            grad_clip_norm=10.0,
        )
        cfg.collect.n_sample = 8
        cfg.other.eps = EasyDict(type="linear", start=1.0, end=0.05, decay=10000)
        cfg.priority = False
        cfg.priority_IS_weight = False
        cfg.other.replay_buffer = EasyDict(
            replay_buffer_size=100000,
            save_in_checkpoint=False,
            frame_dedup=None,
            alpha=0.6,
            beta=0.4,
            anneal_step=100000,
        )
        return cfg

    def __init__(
        self, cfg: Mapping[str, Any], obs_space: gym.Space, action_space: gym.Space, device: str | torch.device = "cpu"
    ) -> None:
        super().__init__(cfg, obs_space, action_space, device)
        self.n_actions = self.count_actions(action_space)
        if self.cfg.get("priority_IS_weight") and not self.cfg.get("priority"):
            raise ValueError("priority_IS_weight=True needs priority=True (importance weights come from priorities)")

    def count_actions(self, action_space: gym.Space) -> int:
        """The choices per action dimension: a Discrete space's ``n`` (a subclass may discretize a Box: BDQ)."""
        return discrete_actions(action_space, self.algorithm)

    @torch.no_grad()
    def schedule_values(self, env_step: int) -> dict[str, float]:
        """The exploration epsilon at global ``env_step``."""
        e = self.cfg.other.eps
        return {"train/epsilon": epsilon_schedule(e.type, e.start, e.end, e.decay, env_step)}

    @torch.no_grad()
    def collect_action(self, obs: np.ndarray, env_step: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        eps = self.schedule_values(env_step)["train/epsilon"]
        actions = self.model(obs_tensor(obs, self.obs_space, self.device)).argmax(dim=-1)
        explore = torch.rand(actions.shape, device=actions.device) < eps  # drawn on the device, no host mask
        return torch.where(explore, torch.randint_like(actions, self.n_actions), actions).cpu().numpy(), {}

    @torch.no_grad()
    def eval_action(self, obs: np.ndarray) -> np.ndarray:
        return self.model(obs_tensor(obs, self.obs_space, self.device)).argmax(dim=-1).cpu().numpy()

    def apply_loss(
        self, per_sample: torch.Tensor, batch: Mapping[str, torch.Tensor], aux_loss: torch.Tensor | None = None
    ) -> dict[str, torch.Tensor]:
        """One optimizer step on the mean of the per-sample losses ``[batch]`` (computed through ``self.train_model``,
        so the gradients are averaged across ranks; with ``priority_IS_weight`` each one weighted by
        ``batch["weight"]``) plus ``aux_loss`` (a scalar, neither weighted nor a priority: FQF's fraction loss),
        gradient clipping by ``learn.grad_clip_norm``, then the target update. Returns ``{"loss": ...}``, with
        ``priority`` also ``"priority"``: the per-sample losses, the replay's new priorities.

        Example::

            stats = self.apply_loss(-(target * log_p).sum(-1), batch)
        """
        lc = self.cfg.learn
        weighted = per_sample * batch["weight"] if self.cfg.get("priority_IS_weight") else per_sample
        loss = weighted.mean() if aux_loss is None else weighted.mean() + aux_loss
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if lc.grad_clip_norm is not None:
            nn.utils.clip_grad_norm_(self.model.parameters(), lc.grad_clip_norm)
        self.optimizer.step()
        self.train_iter += 1
        update_target(self.target_model, self.model, self.train_iter, lc.target_update_freq, lc.target_theta)
        stats = {"loss": loss.detach()}
        if self.cfg.get("priority"):
            stats["priority"] = per_sample.detach().abs()
        return stats


# ------------------------------------------------------------------------------------------------- networks
def trunk(
    obs_space: gym.Space,
    hidden_sizes: Sequence[int],
    activation: str = "relu",
    conv_channels: Sequence[int] | None = None,
) -> tuple[nn.Module, int]:
    """Feature layers for ``obs_space`` and their width: an MLP over ``hidden_sizes`` (activation after each
    layer) for vectors; for uint8 images a Nature-CNN (its convolutions ``conv_channels``, None: Nature's), for
    0/1 grids the MinAtar network, whose linear layer has ``hidden_sizes[0]`` units, then the rest of
    ``hidden_sizes``.

    Example::

        body, width = trunk(gym.spaces.Box(-1, 1, (4,)), [64, 64])  # width 64
    """
    sizes = [int(h) for h in hidden_sizes]
    if not sizes:
        raise ValueError("model.hidden_sizes must name at least one hidden layer, got []")
    if is_conv_space(obs_space):
        cnn = conv_encoder(obs_space, features=sizes[0], channels=conv_channels)
        rest = [mlp([sizes[0], *sizes[1:]], activation, out_activation=True)] if len(sizes) > 1 else []
        return nn.Sequential(cnn, *rest), sizes[-1]
    return mlp([obs_dim(obs_space), *sizes], activation, out_activation=True), sizes[-1]


def features(
    obs: int | gym.Space,
    hidden_sizes: Sequence[int],
    activation: str = "relu",
    conv_channels: Sequence[int] | None = None,
) -> tuple[nn.Module, int]:
    """:func:`trunk` for an observation space, or the MLP over ``hidden_sizes`` for a vector size ``obs`` (the networks
    that take a size keep their layers and parameter names for vectors; images give them a CNN).

    Example::

        body, width = features(gym.spaces.Box(0, 255, (4, 84, 84), np.uint8), [512])  # Nature CNN, width 512
    """
    if isinstance(obs, gym.Space):
        return trunk(obs, hidden_sizes, activation, conv_channels)
    return mlp([int(obs), *hidden_sizes], activation, out_activation=True), int(hidden_sizes[-1])


def discrete_actions(action_space: gym.Space, algorithm: str) -> int:
    """The number of actions of a Discrete ``action_space``; a clear error naming ``algorithm`` otherwise.

    Example::

        discrete_actions(gym.spaces.Discrete(2), "C51")  # 2
    """
    discrete, n = action_info(action_space)
    if not discrete:
        raise ValueError(f"{algorithm} needs a Discrete action space, got {action_space}")
    return n


class NoisyLinear(nn.Module):
    """Linear layer with factorized Gaussian noise (Fortunato et al. 2018): ``w = mu_w + sigma_w * eps_w``.

    ``eps_w = f(e_out) f(e_in)^T`` with ``f(x) = sign(x) sqrt|x|`` and standard normal ``e``; ``mu`` is
    initialized uniform in ``+-1/sqrt(in)``, ``sigma`` to ``sigma0 / sqrt(in)``. The noise is a non-persistent
    buffer (not in checkpoints) set by :meth:`sample_noise` from the generator the caller passes, and zeroed by
    :meth:`clear_noise` (the mean network).

    Example::

        layer = NoisyLinear(4, 2)
        layer.sample_noise(torch.Generator().manual_seed(0))
        y = layer(torch.zeros(3, 4))
    """

    def __init__(self, in_features: int, out_features: int, sigma0: float = 0.5) -> None:
        super().__init__()
        self.in_features, self.out_features = int(in_features), int(out_features)
        bound = 1.0 / math.sqrt(self.in_features)
        self.weight_mu = nn.Parameter(torch.empty(self.out_features, self.in_features).uniform_(-bound, bound))
        self.bias_mu = nn.Parameter(torch.empty(self.out_features).uniform_(-bound, bound))
        self.weight_sigma = nn.Parameter(torch.full((self.out_features, self.in_features), sigma0 * bound))
        self.bias_sigma = nn.Parameter(torch.full((self.out_features,), sigma0 * bound))
        self.register_buffer("weight_eps", torch.zeros(self.out_features, self.in_features), persistent=False)
        self.register_buffer("bias_eps", torch.zeros(self.out_features), persistent=False)

    @torch.no_grad()
    def sample_noise(self, generator: torch.Generator) -> None:
        """Draw fresh factorized noise from ``generator`` (on the layer's device)."""
        e = torch.randn(self.in_features + self.out_features, generator=generator, device=generator.device)
        f = (e.sign() * e.abs().sqrt()).to(self.weight_mu.device)
        e_in, e_out = f[: self.in_features], f[self.in_features :]
        self.weight_eps.copy_(torch.outer(e_out, e_in))
        self.bias_eps.copy_(e_out)

    @torch.no_grad()
    def clear_noise(self) -> None:
        """No noise: the layer computes with its means."""
        self.weight_eps.zero_()
        self.bias_eps.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = self.weight_mu + self.weight_sigma * self.weight_eps
        return nn.functional.linear(x, weight, self.bias_mu + self.bias_sigma * self.bias_eps)


def _linear(noisy: bool, sigma0: float):
    return (lambda i, o: NoisyLinear(i, o, sigma0)) if noisy else nn.Linear


class DuelingHead(nn.Module):
    """``Q(s, a, k) = V(s, k) + A(s, a, k) - mean_a A(s, a, k)`` over ``atoms`` outputs per action (1: plain
    values; C51's logits; quantiles), each stream one hidden layer of the input's width.

    Example::

        head = DuelingHead(64, n_actions=2, atoms=51)
        head(torch.zeros(3, 64)).shape  # (3, 2, 51)
    """

    def __init__(
        self,
        in_features: int,
        n_actions: int,
        atoms: int = 1,
        activation: str = "relu",
        *,
        noisy: bool = False,
        sigma0: float = 0.5,
    ) -> None:
        super().__init__()
        layer = _linear(noisy, sigma0)
        act = type(mlp([1, 1, 1], activation)[1])
        self.n_actions, self.atoms = int(n_actions), int(atoms)
        self.value = nn.Sequential(layer(in_features, in_features), act(), layer(in_features, self.atoms))
        self.advantage = nn.Sequential(
            layer(in_features, in_features), act(), layer(in_features, self.n_actions * self.atoms)
        )

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        adv = self.advantage(h).view(h.shape[0], self.n_actions, self.atoms)
        return self.value(h).view(h.shape[0], 1, self.atoms) + adv - adv.mean(dim=1, keepdim=True)


class AtomQNetwork(nn.Module):
    """A :func:`trunk` and a head with ``atoms`` outputs per action: ``forward(obs, full=True)`` gives
    ``[batch, actions, atoms]``; ``forward(obs)`` the Q-values ``[batch, actions]`` that acting uses
    (:meth:`q_values` of those outputs; here their mean, as for quantiles).

    ``dueling``: a :class:`DuelingHead`, else one linear layer after the trunk. ``noisy``: the head's layers are
    :class:`NoisyLinear` (the trunk stays deterministic, as in Rainbow).

    Example::

        net = AtomQNetwork(gym.spaces.Box(-1, 1, (4,)), n_actions=2, atoms=32, hidden_sizes=[64])
        net(torch.zeros(3, 4), full=True).shape, net(torch.zeros(3, 4)).shape  # (3, 2, 32), (3, 2)
    """

    def __init__(
        self,
        obs_space: gym.Space,
        n_actions: int,
        atoms: int,
        hidden_sizes: Sequence[int] = (128, 128),
        dueling: bool = False,
        activation: str = "relu",
        *,
        noisy: bool = False,
        sigma0: float = 0.5,
        conv_channels: Sequence[int] | None = None,
    ) -> None:
        super().__init__()
        self.body, width = trunk(obs_space, hidden_sizes, activation, conv_channels)
        self.n_actions, self.atoms = int(n_actions), int(atoms)
        if dueling:
            self.head: nn.Module = DuelingHead(width, n_actions, atoms, activation, noisy=noisy, sigma0=sigma0)
        else:
            self.head = _linear(noisy, sigma0)(width, self.n_actions * self.atoms)

    def forward(self, obs: torch.Tensor, full: bool = False) -> torch.Tensor:
        out = self.head(self.body(obs)).view(obs.shape[0], self.n_actions, self.atoms)
        return out if full else self.q_values(out)

    def q_values(self, out: torch.Tensor) -> torch.Tensor:
        """Q-values ``[batch, actions]`` of the head's outputs ``[batch, actions, atoms]``."""
        return out.mean(dim=-1)

    def sample_noise(self, generator: torch.Generator) -> None:
        """Fresh noise in every :class:`NoisyLinear` (none without ``noisy``)."""
        for m in self.modules():
            if isinstance(m, NoisyLinear):
                m.sample_noise(generator)

    def clear_noise(self) -> None:
        """The mean network: no noise in any :class:`NoisyLinear`."""
        for m in self.modules():
            if isinstance(m, NoisyLinear):
                m.clear_noise()


class CategoricalQNetwork(AtomQNetwork):
    """C51's network: ``forward(obs, full=True)`` gives the logits ``[batch, actions, n_atom]`` of a categorical
    distribution on ``n_atom`` evenly spaced atoms from ``v_min`` to ``v_max`` (:attr:`support`); Q-values are
    the distribution's means.

    Example::

        net = CategoricalQNetwork(gym.spaces.Box(-1, 1, (4,)), 2, n_atom=51, v_min=-10, v_max=10, hidden_sizes=[64])
        probs = net(torch.zeros(3, 4), full=True).softmax(-1)  # (3, 2, 51)
    """

    def __init__(
        self, obs_space: gym.Space, n_actions: int, n_atom: int, v_min: float, v_max: float, **kwargs: Any
    ) -> None:
        if int(n_atom) < 2 or not v_min < v_max:
            raise ValueError(f"C51 needs model.n_atom >= 2 and v_min < v_max, got {n_atom}, {v_min}, {v_max}")
        super().__init__(obs_space, n_actions, n_atom, **kwargs)
        self.register_buffer("support", torch.linspace(float(v_min), float(v_max), int(n_atom)), persistent=False)

    def q_values(self, out: torch.Tensor) -> torch.Tensor:
        return (out.softmax(dim=-1) * self.support).sum(dim=-1)


# ----------------------------------------------------------------------------------------------------- losses
def categorical_projection(
    next_probs: torch.Tensor, reward: torch.Tensor, discount: torch.Tensor, support: torch.Tensor
) -> torch.Tensor:
    """C51's target: the distribution of ``reward + discount * Z`` (``Z ~ next_probs`` on ``support``) projected
    onto ``support``, ``[batch, n_atom]``.

    Each shifted atom ``z' = clip(r + d z, v_min, v_max)`` at fractional position ``b = (z' - v_min) / dz``
    gives its probability to the two atoms around it, ``floor(b)`` getting ``ceil(b) - b`` and ``ceil(b)`` getting
    ``b - floor(b)``; a ``b`` that falls on an atom gives that atom all of it. ``discount = 0`` (a termination)
    puts the whole mass on ``r``.

    Example::

        z = torch.linspace(-1, 1, 3)  # atoms -1, 0, 1
        categorical_projection(torch.tensor([[0.0, 0.0, 1.0]]), torch.tensor([0.5]), torch.tensor([0.0]), z)
        # tensor([[0.0000, 0.5000, 0.5000]])
    """
    n_atom = support.shape[0]
    v_min, v_max = support[0], support[-1]
    delta = (v_max - v_min) / (n_atom - 1)
    shifted = (reward.unsqueeze(-1) + discount.unsqueeze(-1) * support).clamp(v_min, v_max)
    b = ((shifted - v_min) / delta).clamp(0, n_atom - 1)
    lower, upper = b.floor(), b.ceil()
    to_lower = (upper - b) + (lower == upper).to(b.dtype)  # an exact atom keeps all of its mass
    to_upper = b - lower
    out = torch.zeros_like(next_probs)
    out.scatter_add_(-1, lower.long(), next_probs * to_lower)
    out.scatter_add_(-1, upper.long(), next_probs * to_upper)
    return out


def quantile_huber_loss(
    pred: torch.Tensor, target: torch.Tensor, tau: torch.Tensor, kappa: float = 1.0
) -> torch.Tensor:
    """Quantile Huber loss per sample ``[batch]`` (QR-DQN, IQN, FQF): for predicted quantile values ``pred``
    ``[batch, N]`` at fractions ``tau`` (``[batch, N]`` or ``[N]``) and target samples ``target`` ``[batch, M]``,
    ``sum_i mean_j |tau_i - 1{delta_ij < 0}| * L_kappa(delta_ij) / kappa`` with ``delta_ij = target_j - pred_i``
    and the Huber function ``L_kappa(d) = d**2 / 2`` for ``|d| <= kappa``, else ``kappa * (|d| - kappa / 2)``.
    The target gets no gradient.

    Example::

        loss = quantile_huber_loss(q_taken, target_quantiles, tau=(torch.arange(32) + 0.5) / 32)  # [batch]
    """
    if not kappa > 0:
        raise ValueError(f"learn.kappa must be > 0, got {kappa}")
    delta = target.detach().unsqueeze(1) - pred.unsqueeze(2)  # [batch, N, M]
    abs_delta = delta.abs()
    huber = torch.where(abs_delta <= kappa, 0.5 * delta.pow(2), kappa * (abs_delta - 0.5 * kappa))
    tau = tau.expand(pred.shape).unsqueeze(2)
    weight = (tau - (delta.detach() < 0).to(pred.dtype)).abs()
    return (weight * huber / kappa).sum(dim=1).mean(dim=1)


# ------------------------------------------------------------------------------------------- learning helpers
def init_q_learning(policy: Policy, model: nn.Module, lr: float, params: Any = None, **adam_kwargs: Any) -> None:
    """Give ``policy`` its trained ``model`` (moved to the policy's device), ``optimizer`` (Adam, or what
    ``policy.sync`` needs, over ``params``: parameters or parameter groups of ``model``, default all of them), the
    wrapped ``train_model`` from :meth:`Policy.distribute` and a frozen ``target_model`` copied after it (so it
    starts from rank 0's parameters, like the online network).

    Example::

        init_q_learning(self, CategoricalQNetwork(obs_space, 2, 51, -10, 10), lr=self.cfg.learn.learning_rate)
    """
    policy.model = model.to(policy.device)
    params = policy.model.parameters() if params is None else params
    policy.optimizer = policy.make_optimizer(params, lr=lr, **adam_kwargs)
    policy.train_model, policy.optimizer = policy.distribute(policy.model, policy.optimizer)
    policy.target_model = copy.deepcopy(policy.model).requires_grad_(False)


def update_target(target: nn.Module, source: nn.Module, train_iter: int, update_freq: int, theta: float | None) -> None:
    """After update number ``train_iter``: a soft update by ``theta`` when it is set, else a hard copy every
    ``update_freq`` updates.

    Example::

        update_target(self.target_model, self.model, self.train_iter, lc.target_update_freq, lc.target_theta)
    """
    if theta is not None:
        soft_update(target, source, theta)
    elif train_iter % int(update_freq) == 0:
        hard_update(target, source)


def step_generator(base_seed: int, step: int, device: str | torch.device = "cpu") -> torch.Generator:
    """A generator seeded by ``(base_seed, step)``: the same draws on every rank for the same update, with no
    state to checkpoint (a resumed run continues the sequence from its ``train_iter``).

    Example::

        g = step_generator(torch.initial_seed(), policy.train_iter)
        tau = torch.rand(64, 32, generator=g)
    """
    g = torch.Generator(device=device)
    g.manual_seed((int(base_seed) * 1_000_003 + int(step)) % (2**63 - 1))
    return g


def parameter_seed(model: nn.Module) -> int:
    """A seed from ``model``'s first parameter: after :meth:`Policy.distribute` (which gives every rank rank 0's
    initial parameters) the same on every rank, and the one a single process seeded as rank 0 gets, so it can
    seed :func:`step_generator` without a collective.

    Example::

        self.noise_seed = parameter_seed(self.model)  # right after init_q_learning(self, ...)
    """
    first = next(model.parameters()).detach().cpu().numpy().tobytes()
    return int.from_bytes(hashlib.sha256(first).digest()[:7], "little")


def global_rows(draw: torch.Tensor, local_rows: int, group: Any = None) -> torch.Tensor:
    """This rank's rows of a draw made for the global batch: ``draw`` has ``local_rows * world`` rows (the same
    on every rank, e.g. from :func:`step_generator`) and rank ``r`` of ``group`` takes rows
    ``[r * local_rows, (r + 1) * local_rows)``, the rows of its share of the global batch. So a per-sample draw
    (IQN's quantile fractions) is the one a single process makes for the same sample.

    Example::

        world = get_world_size()
        tau = global_rows(torch.rand(64 * world, 32, generator=g), 64)
    """
    rank = get_rank(group)
    if draw.shape[0] != local_rows * get_world_size(group):
        raise ValueError(f"draw has {draw.shape[0]} rows, expected {local_rows} x {get_world_size(group)} ranks")
    return draw[rank * local_rows : (rank + 1) * local_rows]
