"""Networks and heads the value-based policies share: :func:`trunk` (Nature-CNN for images, the MinAtar network for
0/1 grids, else an MLP), :class:`NoisyLinear` (Rainbow's noisy layer, its noise from a generator the caller passes,
so every rank can draw the same noise), :class:`DuelingHead` (``V + A - mean A``, per atom), :class:`AtomQNetwork`
(a trunk and a plain or dueling head giving ``[batch, actions, atoms]``) and :class:`CategoricalQNetwork` (C51's
distribution on a fixed support).

Ensembles (the twin critics of SAC, TD3 and discrete SAC): :class:`EnsembleLinear` holds the same layer of every
member stacked (``weight [members, out, in]``) and computes them all in one batched matmul; :class:`EnsembleMLP` is
a stack of such layers built from member MLPs, so every member starts from the weights its own MLP would have had.
:func:`stack_member_state` and :func:`stack_optimizer_state` turn checkpoints of separate member networks into
the stacked layout.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium as gym
import torch
import torch.nn.functional as F
from torch import nn

from ding_dist.policy.base import mlp, obs_dim
from ding_dist.policy.encoders import conv_encoder, is_conv_space

__all__ = [
    "AtomQNetwork",
    "CategoricalQNetwork",
    "DuelingHead",
    "EnsembleLinear",
    "EnsembleMLP",
    "NoisyLinear",
    "features",
    "stack_member_state",
    "stack_optimizer_state",
    "trunk",
]


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


def _linear(noisy: bool, sigma0: float) -> Any:
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


class EnsembleLinear(nn.Module):
    """The same linear layer of ``members`` independent networks, computed at once: ``weight [members, out, in]``,
    ``bias [members, out]``. Input ``[batch, in]`` (every member sees it: one matmul over the stacked weights) or
    ``[members, batch, in]`` (one batched matmul); output ``[members, batch, out]``. Member ``i`` computes what
    ``nn.Linear`` with ``weight[i]`` and ``bias[i]`` computes, up to float rounding.

    Example::

        layer = EnsembleLinear.stack([nn.Linear(4, 8), nn.Linear(4, 8)])
        layer(torch.zeros(5, 4)).shape  # (2, 5, 8)
    """

    def __init__(self, members: int, in_features: int, out_features: int) -> None:
        super().__init__()
        self.members, self.in_features, self.out_features = int(members), int(in_features), int(out_features)
        self.weight = nn.Parameter(torch.empty(self.members, self.out_features, self.in_features))
        self.bias = nn.Parameter(torch.empty(self.members, self.out_features))
        bound = 1.0 / math.sqrt(self.in_features)  # nn.Linear's default initialization, per member
        for i in range(self.members):
            nn.init.kaiming_uniform_(self.weight.data[i], a=math.sqrt(5))
        nn.init.uniform_(self.bias, -bound, bound)

    @classmethod
    def stack(cls, layers: Sequence[nn.Linear]) -> EnsembleLinear:
        """One layer holding copies of ``layers``' weights (all of one shape, each with a bias), member by member."""
        shapes = {(m.in_features, m.out_features, m.bias is not None) for m in layers}
        if len(shapes) != 1 or not next(iter(shapes))[2]:
            raise ValueError(f"EnsembleLinear.stack needs linear layers of one shape with biases, got {layers}")
        out = cls.__new__(cls)
        nn.Module.__init__(out)
        out.members, out.in_features, out.out_features = len(layers), layers[0].in_features, layers[0].out_features
        out.weight = nn.Parameter(torch.stack([m.weight.detach() for m in layers]))
        out.bias = nn.Parameter(torch.stack([m.bias.detach() for m in layers]))
        return out

    def forward(self, x: torch.Tensor, members: int | None = None) -> torch.Tensor:
        """``members``: compute only the first that many members (all by default)."""
        w, b = (self.weight, self.bias) if members is None else (self.weight[:members], self.bias[:members])
        n = w.shape[0]
        if x.dim() == 2:  # a shared input: one matmul over the members' stacked rows
            out = F.linear(x, w.reshape(n * self.out_features, self.in_features), b.reshape(-1))
            return out.view(x.shape[0], n, self.out_features).transpose(0, 1)
        return torch.baddbmm(b.unsqueeze(1), x, w.transpose(1, 2))

    def member(self, i: int) -> nn.Linear:
        """Member ``i`` as an ``nn.Linear`` whose parameters share this layer's storage (editing them in place edits
        the ensemble; the ensemble's own forward is what trains)."""
        layer = nn.Linear(self.in_features, self.out_features, device="meta")
        layer.weight = nn.Parameter(self.weight.detach()[i], requires_grad=self.weight.requires_grad)
        layer.bias = nn.Parameter(self.bias.detach()[i], requires_grad=self.bias.requires_grad)
        return layer

    def extra_repr(self) -> str:
        return f"members={self.members}, in_features={self.in_features}, out_features={self.out_features}"


class EnsembleMLP(nn.Sequential):
    """Several MLPs of one shape as one network: ``forward(x [batch, in])`` gives ``[members, batch, out]``, each
    member's output what its own MLP gives up to float rounding, with one matmul per layer for all of them. Built from
    the member MLPs (``nn.Sequential`` of ``nn.Linear`` and parameter-free activations, as
    :func:`~ding_dist.policy.base.mlp` makes), whose weights it copies, so that building the members as before keeps
    the initial weights (and the random draws) of separate networks. Its layers keep the members' indices:
    ``0.weight`` is ``[members, out, in]``.

    Example::

        net = EnsembleMLP([mlp([4, 64, 1]), mlp([4, 64, 1])])
        net(torch.zeros(5, 4)).shape  # (2, 5, 1)
        net.member(1)  # the second MLP, sharing the ensemble's storage
    """

    def __init__(self, members: Sequence[nn.Sequential]) -> None:
        if len(members) < 1 or len({len(m) for m in members}) != 1:
            raise ValueError(f"EnsembleMLP needs member MLPs of one structure, got {len(members)} members")
        layers: list[nn.Module] = []
        for parts in zip(*members):
            if all(isinstance(p, nn.Linear) for p in parts):
                layers.append(EnsembleLinear.stack(parts))
            elif len({type(p) for p in parts}) == 1 and not any(True for p in parts for _ in p.parameters()):
                layers.append(copy.deepcopy(parts[0]))  # an activation, the same for every member
            else:
                raise ValueError(f"EnsembleMLP takes linear layers and parameter-free activations, got {parts}")
        super().__init__(*layers)
        self.members = len(members)

    def forward(self, x: torch.Tensor, members: int | None = None) -> torch.Tensor:  # type: ignore[override]
        """``x [batch, in]``; ``members``: compute only the first that many members (all by default)."""
        for layer in self:
            x = layer(x, members) if isinstance(layer, EnsembleLinear) else layer(x)
        return x

    def member(self, i: int) -> nn.Sequential:
        """Member ``i`` as a plain ``nn.Sequential`` whose parameters share this network's storage (for inspecting
        or editing one member in place)."""
        return nn.Sequential(*(m.member(i) if isinstance(m, EnsembleLinear) else m for m in self))


def stack_member_state(
    state: dict[str, Any], prefix: str, members: Mapping[str, int], rename: Callable[[str], str], into: str
) -> None:
    """Rewrite, in place, a state dict of separate member networks into :class:`EnsembleMLP`'s layout: every key
    ``prefix + name + "." + rest`` of the members ``{name: index}`` becomes ``prefix + into + "." + rename(rest)``,
    the members' tensors stacked in index order. Keys of other modules are left alone; nothing happens when the
    state already has the stacked layout.

    Example::

        sd = {"q1.0.weight": torch.zeros(8, 4), "q2.0.weight": torch.ones(8, 4)}
        stack_member_state(sd, "", {"q1": 0, "q2": 1}, lambda rest: rest, "q")
        sd["q.0.weight"].shape  # (2, 8, 4)
    """
    order = sorted(members, key=members.__getitem__)
    first = f"{prefix}{order[0]}."
    for key in [k for k in state if k.startswith(first)]:
        rest = key[len(first) :]
        parts = [state.pop(f"{prefix}{name}.{rest}") for name in order]
        state[f"{prefix}{into}.{rename(rest)}"] = torch.stack(parts)


def stack_optimizer_state(state: Mapping[str, Any], members: int) -> dict[str, Any]:
    """A torch optimizer state dict over the parameters of ``members`` separate networks (all of the first member's,
    then the second's, ...) made into one over their stacked parameters (:class:`EnsembleMLP`): per-element entries
    (Adam's moments) stacked, scalar entries (``step``) taken from the first member (equal for parameters always
    stepped together).

    Example::

        opt = torch.optim.Adam([*mlp([4, 8, 1]).parameters(), *mlp([4, 8, 1]).parameters()])
        stacked = stack_optimizer_state(opt.state_dict(), members=2)  # over 4 parameters, not 8
    """
    groups, new_state, next_id = [], {}, 0
    for group in state["param_groups"]:
        ids = list(group["params"])
        if len(ids) % members:
            raise ValueError(f"a parameter group of {len(ids)} parameters does not split into {members} members")
        per = len(ids) // members
        new_ids = []
        for j in range(per):
            old = [ids[j + m * per] for m in range(members)]
            entries = [state["state"].get(i) for i in old]
            if all(e is not None for e in entries):
                new_state[next_id] = {
                    k: torch.stack([e[k] for e in entries]) if torch.is_tensor(v) and v.dim() > 0 else v
                    for k, v in entries[0].items()
                }
            new_ids.append(next_id)
            next_id += 1
        groups.append({**group, "params": new_ids})
    return {"state": new_state, "param_groups": groups}
