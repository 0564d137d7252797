"""The base every epsilon-greedy Q-learner shares (DQN, C51, QR-DQN, MDQN, IQN, Rainbow, ...), in one place.

- :class:`QLearningPolicy`: DQN's config keys, acting on ``self.model(obs)`` (Q-values ``[batch, actions]``), and
  :meth:`QLearningPolicy.apply_loss` (one synchronized gradient step, then the target network's update). A policy
  file adds its network and its loss in ``learn``.
- :func:`init_q_learning` (optimizer, :meth:`Policy.distribute`, target copy) and :func:`update_target`
  (hard copies every K updates or a soft update per update); :func:`discrete_actions` (the action count, or a
  clear error).

Networks live in :mod:`ding_dist.policy.networks`, losses in :mod:`ding_dist.policy.losses`, exploration schedules in
:mod:`ding_dist.policy.exploration`.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from ding_dist.policy.base import Policy, action_info, hard_update, soft_update
from ding_dist.policy.encoders import obs_tensor
from ding_dist.policy.exploration import apex_epsilon, epsilon_schedule
from ding_dist.policy.replay_keys import prioritized_keys, replay_keys
from ding_dist.utils.keys import Key

__all__ = ["QLearningPolicy", "discrete_actions", "init_q_learning", "update_target"]


class QLearningPolicy(Policy):
    """The shared half of an epsilon-greedy Q-learner; a subclass builds ``self.model`` (whose ``forward(obs)``
    gives Q-values ``[batch, actions]``) with :func:`init_q_learning` and writes ``learn``.

    Config: the keys listed below (generated from ``keys``) (in a subclass). Prioritized replay as DQN's: with
    ``priority`` the replay samples by priority and :meth:`apply_loss` returns each sample's loss as its new priority;
    with ``priority_IS_weight`` the batch's importance weights multiply the per-sample loss. The replay gives ``reward``
    (the n-step sum) and ``discount`` (``gamma**n``, 0 after a termination), so no loss here needs ``gamma`` or
    ``nstep`` itself.

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
    pbt_keys = ("learn.learning_rate",)
    _state_attrs = ("model", "target_model", "optimizer")
    #: The algorithm's name in error messages.
    algorithm = "Q-learning"

    keys = Policy.keys.plus(
        Key("model.hidden_sizes", [128, 128], "hidden layer sizes of the network(s)", "sizes"),
        Key("model.activation", "relu", "activation of the hidden layers"),
        Key(
            "model.conv_channels",
            None,
            "on images: the three convolutions' channels (None: the Nature CNN's 32, 64, 64)",
        ),
        Key("learn.update_per_collect", 1, "updates per collect.n_sample global env steps", ">= 1", reader="pipeline"),
        Key("learn.learning_starts", 1000, "global env steps before the first update", ">= 0", reader="pipeline"),
        Key("learn.target_update_freq", 100, "hard target copy every K updates (when target_theta is None)", ">= 1"),
        Key("learn.target_theta", None, "soft target update rate per update (None: hard copies)", "(0, 1] or None"),
        Key("learn.grad_clip_norm", 10.0, "gradient norm clip, applied after the sync (None: off)", "> 0 or None"),
        Key("collect.n_sample", 8),
        Key("other.eps.type", "linear", "epsilon-greedy schedule shape"),
        Key("other.eps.start", 1.0, "epsilon at the first env step", "[0, 1]"),
        Key("other.eps.end", 0.05, "epsilon after the decay", "[0, 1]"),
        Key("other.eps.decay", 10000, "global env steps of the decay", ">= 0"),
        *replay_keys(100000, priority=True),
        *prioritized_keys(False),
        Key(
            "other.eps_ladder.enable",
            False,
            "Ape-X: actor i of N explores with base**(1 + alpha i / (N-1)), not the schedule",
        ),
        Key("other.eps_ladder.base", 0.4, "Ape-X: the base epsilon (actor 0's)", "[0, 1]"),
        Key("other.eps_ladder.alpha", 7.0, "Ape-X: the ladder's exponent"),
        Key("discount_factor", 0.99, "gamma", "[0, 1]"),
        Key("nstep", 1, "n-step return length", ">= 1"),
    )

    def __init__(
        self, cfg: Mapping[str, Any], obs_space: gym.Space, action_space: gym.Space, device: str | torch.device = "cpu"
    ) -> None:
        super().__init__(cfg, obs_space, action_space, device)
        self.n_actions = self.count_actions(action_space)
        if self.cfg.get("priority_IS_weight") and not self.cfg.get("priority"):
            raise ValueError("priority_IS_weight=True needs priority=True (importance weights come from priorities)")
        self.fixed_epsilon: float | None = None  # set by set_actor_index with other.eps_ladder.enable

    @property
    def action_branches(self) -> tuple[int, ...]:
        """The shape of one observation's greedy actions: ``()``, one choice (a subclass with one choice per action
        dimension says so: BDQ)."""
        return ()

    def count_actions(self, action_space: gym.Space) -> int:
        """The choices per action dimension: a Discrete space's ``n`` (a subclass may discretize a Box: BDQ)."""
        return discrete_actions(action_space, self.algorithm)

    def set_actor_index(self, actor: int, actors: int) -> None:
        """Actor ``actor`` of ``actors`` (the actor role calls this): with ``other.eps_ladder.enable`` (DQN, R2D2) it
        explores with :func:`~ding_dist.policy.exploration.apex_epsilon` from then on."""
        ladder = self.cfg.other.get("eps_ladder")
        if ladder is not None and ladder.enable:
            self.fixed_epsilon = apex_epsilon(actor, actors, ladder.base, ladder.alpha)

    def _epsilon(self, env_step: int) -> float:
        if self.fixed_epsilon is not None:
            return self.fixed_epsilon
        e = self.cfg.other.eps
        return epsilon_schedule(e.type, e.start, e.end, e.decay, env_step)

    @torch.no_grad()
    def schedule_values(self, env_step: int) -> dict[str, float]:
        """The exploration epsilon at global ``env_step`` (an Ape-X actor's own, with ``other.eps_ladder``)."""
        return {"train/epsilon": self._epsilon(env_step)}

    @torch.no_grad()
    def collect_action(self, obs: np.ndarray, env_step: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Epsilon-greedy actions. The coins are drawn first: when every env explores (most steps while epsilon is
        near 1), the network is not run. That read of the coins is a host read only on the CPU; on an accelerator
        the network runs unless epsilon is 1. The random draws are the same either way (coins, then actions)."""
        eps = self.schedule_values(env_step)["train/epsilon"]
        x = obs_tensor(obs, self.obs_space, self.device)
        shape = (x.shape[0], *self.action_branches)
        explore = torch.rand(shape, device=self.device) < eps  # drawn on the device, no host mask
        skip = eps >= 1.0 or (self.device.type == "cpu" and bool(explore.all()))
        random = torch.randint(self.n_actions, shape, device=self.device)
        if skip:
            return random.numpy(force=True), {}
        return torch.where(explore, random, self.model(x).argmax(dim=-1)).cpu().numpy(), {}

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


def discrete_actions(action_space: gym.Space, algorithm: str) -> int:
    """The number of actions of a Discrete ``action_space``; a clear error naming ``algorithm`` otherwise.

    Example::

        discrete_actions(gym.spaces.Discrete(2), "C51")  # 2
    """
    discrete, n = action_info(action_space)
    if not discrete:
        raise ValueError(f"{algorithm} needs a Discrete action space, got {action_space}")
    return n


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
