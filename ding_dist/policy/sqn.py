"""SQN: soft Q-network for discrete actions, as DI-engine's ``sqn`` policy (soft Q-learning with twin Q-networks
and a tuned entropy temperature, after Haarnoja et al. 2018, "Soft Actor-Critic Algorithms and Applications",
arXiv:1812.05905; there is no actor: the policy is the Boltzmann distribution of the Q-values).

Reading order: :class:`TwinQNetwork` (two Q-networks of DQN's shape, one batched ensemble for vectors; acting and
evaluation use the first), then ``learn``. With ``alpha = exp(log_alpha)`` and ``Q' = min(Q'_1, Q'_2)`` of the target
networks at ``s'``:

- the next state's policy is ``pi = softmax(Q' / alpha)``, its soft value ``V = sum_b pi(b) (Q'(b) - alpha log
  pi(b))``; the target ``y = r + discount * V``; the loss ``(Q_1(s, a) - y)**2 + (Q_2(s, a) - y)**2`` per sample;
- the temperature's loss ``log_alpha * mean(H(pi) - learn.target_entropy)``, with that same ``pi``: alpha falls
  while the entropy is above the target;
- the target networks follow by Polyak averaging (``learn.target_theta``) after every update.

Acting (DI-engine's rule, in env steps): with probability ``p`` a sample of ``softmax(Q_1(s) / alpha)``, else a
uniform action, where ``p = 1 / (decay - k)`` while ``k < decay - 1000`` and ``0.999`` after, ``k`` the updates
done by then (``(env_step - learn.learning_starts) * update_per_collect / n_sample``) and ``decay`` is
``other.eps.decay``. Nothing in ``learn`` is sampled: N ranks on the halves of a batch apply the update one
process applies to the whole (the Q-networks and ``log_alpha`` each through :meth:`Policy.distribute`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ding_dist.policy.encoders import is_conv_space, obs_tensor
from ding_dist.policy.networks import AtomQNetwork, DuelingHead, EnsembleLinear, EnsembleMLP, stack_member_state
from ding_dist.policy.q_learning import QLearningPolicy, init_q_learning
from ding_dist.policy.registry import register_policy
from ding_dist.policy.sac import LogAlpha
from ding_dist.utils.keys import Key

__all__ = ["SQNPolicy", "TwinQEnsemble", "TwinQNetwork"]


class TwinQNetwork(nn.Module):
    """Two Q-networks of :class:`~ding_dist.policy.networks.AtomQNetwork`'s shape (one output per action, dueling or
    plain): ``forward(obs)`` the first's Q-values ``[batch, actions]``; ``forward(obs, full=True)`` both.

    For vector observations both are one ensemble (:class:`~ding_dist.policy.networks.EnsembleMLP` trunk and head
    streams: one matmul per layer for the two, parameters ``q.<module>.weight`` ``[2, out, in]``; acting computes the
    first only); for images two networks with convolutional trunks (``q1``, ``q2``). The two are drawn as two separate
    networks, in turn, and a state dict of the former vector layout (``q1.*``, ``q2.*``) loads into the ensemble.

    Example::

        net = TwinQNetwork(gym.spaces.Box(-1, 1, (4,)), 2, hidden_sizes=[64, 64], dueling=True)
        q1, q2 = net(torch.zeros(3, 4), full=True)  # (3, 2), (3, 2)
    """

    def __init__(
        self,
        obs_space: gym.Space,
        n_actions: int,
        hidden_sizes: Sequence[int] = (64, 64),
        dueling: bool = True,
        activation: str = "relu",
        conv_channels: Sequence[int] | None = None,
    ) -> None:
        super().__init__()
        q1 = AtomQNetwork(obs_space, n_actions, 1, hidden_sizes, dueling, activation, conv_channels=conv_channels)
        q2 = AtomQNetwork(obs_space, n_actions, 1, hidden_sizes, dueling, activation, conv_channels=conv_channels)
        self.q: TwinQEnsemble | None = None
        if is_conv_space(obs_space):  # submodules q1 and q2 (read through the properties below)
            self._modules["q1"], self._modules["q2"] = q1, q2
        else:
            self.q = TwinQEnsemble(q1, q2)
            self.register_load_state_dict_pre_hook(_stack_twin_q)

    def forward(self, obs: torch.Tensor, full: bool = False):
        if self.q is not None:
            return tuple(self.q(obs)) if full else self.q(obs, members=1)[0]
        return (self.q1(obs), self.q2(obs)) if full else self.q1(obs)

    @property
    def q1(self) -> nn.Module:
        """The first Q-network (for vectors its ``body`` and ``head`` share the ensemble's storage)."""
        return self.q.member(0) if self.q is not None else self._modules["q1"]

    @property
    def q2(self) -> nn.Module:
        """The second Q-network (for vectors its ``body`` and ``head`` share the ensemble's storage)."""
        return self.q.member(1) if self.q is not None else self._modules["q2"]


class TwinQEnsemble(nn.Module):
    """The two vector Q-networks of :class:`TwinQNetwork` as one ensemble: ``forward(obs, members=None)`` gives the
    Q-values ``[members, batch, actions]`` of the first ``members`` (both by default), each what its own
    :class:`~ding_dist.policy.networks.AtomQNetwork` gives (one atom) up to float rounding.

    Example::

        space = gym.spaces.Box(-1, 1, (4,))
        twin = TwinQEnsemble(*(AtomQNetwork(space, 2, 1, [8], dueling=True) for _ in range(2)))
        twin(torch.zeros(3, 4)).shape  # (2, 3, 2)
    """

    def __init__(self, q1: AtomQNetwork, q2: AtomQNetwork) -> None:
        super().__init__()
        self.body = EnsembleMLP([q1.body, q2.body])
        if isinstance(q1.head, DuelingHead):
            self.head: nn.Module = nn.Module()
            self.head.value = EnsembleMLP([q1.head.value, q2.head.value])
            self.head.advantage = EnsembleMLP([q1.head.advantage, q2.head.advantage])
        else:
            self.head = EnsembleLinear.stack([q1.head, q2.head])

    def member(self, i: int) -> nn.Module:
        """Member ``i``'s ``body`` and ``head`` (``head.value`` and ``head.advantage`` when dueling) as plain modules
        sharing this ensemble's storage, for inspecting or editing one member in place."""
        out = nn.Module()
        out.body = self.body.member(i)
        if isinstance(self.head, EnsembleLinear):
            out.head = self.head.member(i)
        else:
            out.head = nn.Module()
            out.head.value, out.head.advantage = self.head.value.member(i), self.head.advantage.member(i)
        return out

    def forward(self, obs: torch.Tensor, members: int | None = None) -> torch.Tensor:
        h = self.body(obs, members)
        if isinstance(self.head, EnsembleLinear):
            return self.head(h, members)
        adv = self.head.advantage(h, members)
        return self.head.value(h, members) + adv - adv.mean(dim=-1, keepdim=True)


def _stack_twin_q(module: nn.Module, state: dict, prefix: str, *_: Any) -> None:
    stack_member_state(state, prefix, {"q1": 0, "q2": 1}, lambda rest: rest, "q")


@register_policy("sqn")
class SQNPolicy(QLearningPolicy):
    """SQN for discrete actions.

    Config: the keys listed below (generated from ``keys``): QLearningPolicy's (DQN's; ``learn.learning_rate`` is the
    Q-networks' and ``learn.target_theta`` their Polyak rate) and the temperature's.

    Example::

        cfg = SQNPolicy.default_config()
        policy = SQNPolicy(cfg, env.single_observation_space, env.single_action_space)
        stats = policy.learn(replay.sample(cfg.learn.batch_size))  # {"loss", "alpha_loss", "alpha", ...}

    Reference tests: tests/policy/test_sqn.py (the twin soft-Q loss and the temperature loss).
    """

    algorithm = "SQN"
    _state_attrs = ("model", "target_model", "optimizer", "log_alpha", "alpha_optimizer")

    keys = QLearningPolicy.keys.plus(
        Key("model.hidden_sizes", [64, 64]),
        Key("model.dueling", True, "dueling Q-network head"),
        Key("learn.update_per_collect", 16),
        Key("learn.target_theta", 0.005),
        Key("learn.grad_clip_norm", None),
        Key("learn.alpha", 0.2, "entropy temperature (initial value when auto_alpha)"),
        Key("learn.learning_rate_alpha", 0.001, "Adam learning rate of the entropy temperature", "> 0"),
        Key(
            "learn.target_entropy", 0.2, "SQN: entropy target of the temperature (of the next state's Boltzmann policy)"
        ),
        Key("collect.n_sample", 16),
        Key("other.eps.decay", 2000, "SQN: DI-engine's rule: uniform actions until decay - 1000 updates, then samples"),
    ).minus("other.eps.type", "other.eps.start", "other.eps.end")

    def __init__(
        self, cfg: Mapping[str, Any], obs_space: gym.Space, action_space: gym.Space, device: str | torch.device = "cpu"
    ) -> None:
        super().__init__(cfg, obs_space, action_space, device)
        m, lc = self.cfg.model, self.cfg.learn
        if lc.target_theta is None or not 0.0 < lc.target_theta <= 1.0:
            raise ValueError(f"SQN needs learn.target_theta in (0, 1], got {lc.target_theta}")
        net = TwinQNetwork(obs_space, self.n_actions, m.hidden_sizes, m.dueling, m.activation, m.conv_channels)
        init_q_learning(self, net, lr=lc.learning_rate)
        self.log_alpha = LogAlpha(lc.alpha).to(self.device)
        self.alpha_optimizer = self.make_optimizer(self.log_alpha.parameters(), lr=lc.learning_rate_alpha)
        self.train_log_alpha, self.alpha_optimizer = self.distribute(self.log_alpha, self.alpha_optimizer)

    # --- acting ---------------------------------------------------------------------------------
    def policy_share(self, env_step: int) -> float:
        """The probability of a Boltzmann sample (else a uniform action) at global ``env_step``, DI-engine's rule.

        Example::

            policy.policy_share(0)  # 1 / 2000 with other.eps.decay=2000
        """
        c = self.cfg
        updates = max(0, env_step - c.learn.learning_starts) * c.learn.update_per_collect / c.collect.n_sample
        decay = c.other.eps.decay
        return 1.0 / (decay - updates) if updates < decay - 1000 else 0.999

    @torch.no_grad()
    def schedule_values(self, env_step: int) -> dict[str, float]:
        """The share of uniform actions at global ``env_step`` and the temperature."""
        return {"train/epsilon": 1.0 - self.policy_share(env_step), "train/alpha": float(self.log_alpha.value.exp())}

    @torch.no_grad()
    def collect_action(self, obs: np.ndarray, env_step: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        q = self.model(obs_tensor(obs, self.obs_space, self.device))
        actions = torch.multinomial(F.softmax(q / self.log_alpha.value.exp(), dim=-1), 1).squeeze(1)
        uniform = torch.rand(actions.shape, device=actions.device) >= self.policy_share(env_step)
        return torch.where(uniform, torch.randint_like(actions, self.n_actions), actions).cpu().numpy(), {}

    # --- learning -------------------------------------------------------------------------------
    def learn(self, batch: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """One update on a replay batch (keys ``obs, action, reward, next_obs, discount``)."""
        action = batch["action"].long()
        rows = torch.arange(action.shape[0], device=action.device)
        with torch.no_grad():
            alpha = self.log_alpha.value.exp()
            next_q = torch.min(*self.target_model(batch["next_obs"], full=True))
            log_pi = F.log_softmax(next_q / alpha, dim=-1)
            pi = log_pi.exp()
            target = batch["reward"] + batch["discount"] * (pi * (next_q - alpha * log_pi)).sum(dim=-1)
            entropy = -(pi * log_pi).sum(dim=-1)
        q1, q2 = (q[rows, action] for q in self.train_model(batch["obs"], full=True))
        stats = self.apply_loss((q1 - target).pow(2) + (q2 - target).pow(2), batch)  # also the target update

        alpha_loss = self.train_log_alpha() * (entropy - self.cfg.learn.target_entropy).mean()
        self.alpha_optimizer.zero_grad(set_to_none=True)
        alpha_loss.backward()
        self.alpha_optimizer.step()
        return {
            **stats,
            "alpha_loss": alpha_loss.detach(),
            "alpha": alpha.reshape(()),
            "entropy": entropy.mean(),
            "q_mean": q1.detach().mean(),
        }
