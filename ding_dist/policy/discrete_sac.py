"""Discrete SAC: soft actor-critic over a categorical policy (Christodoulou 2019, "Soft Actor-Critic for Discrete
Action Settings", arXiv:1910.07207), as DI-engine's ``discrete_sac``.

Reading order: the networks (:class:`CategoricalActor`, :class:`TwinQValues`: Q-values of every action), the two
expectations over the policy (:func:`expected_soft_value`, :func:`discrete_policy_loss`), then
:class:`DiscreteSACPolicy` — config, acting, and ``learn``, where the three losses are computed in plain sight.
With ``pi = softmax(actor(s))`` the expectations over actions are exact sums, so nothing in ``learn`` is sampled:

- critic: ``y = r + discount * sum_b pi(b | s') * (min_i Q_target_i(s', b) - alpha * log pi(b | s'))``; loss
  ``MSE(Q_1(s, a), y) + MSE(Q_2(s, a), y)``;
- actor: ``sum_b pi(b | s) * (alpha * log pi(b | s) - min_i Q_i(s, b))``, averaged over the batch, with the
  critics just updated and held fixed;
- temperature (``learn.auto_alpha``): ``log_alpha * (H(pi(. | s)) - target_entropy)``, averaged over the batch,
  which lowers alpha while the policy's entropy is above ``target_entropy``. DI-engine's default target is
  ``-n_actions``, below any categorical entropy, so with it alpha only falls.

Acting samples the policy, with ``other.eps`` of uniformly random actions mixed in (DI-engine's
``eps_greedy_multinomial_sample``) and uniformly random actions before ``learn.learning_starts`` global env steps
(DI-engine's ``random_collect_size``); evaluation takes the most probable action. Distributed as SAC: the actor,
the twin critic and ``log_alpha`` each go through :meth:`Policy.distribute` with their optimizer.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ding_dist.policy.base import Policy, soft_update
from ding_dist.policy.encoders import is_conv_space, obs_tensor
from ding_dist.policy.exploration import epsilon_schedule
from ding_dist.policy.networks import EnsembleMLP, stack_member_state, trunk
from ding_dist.policy.q_learning import discrete_actions
from ding_dist.policy.registry import register_policy
from ding_dist.policy.replay_keys import replay_keys
from ding_dist.policy.sac import LogAlpha, stack_twin_checkpoint
from ding_dist.utils.keys import Key

__all__ = ["CategoricalActor", "DiscreteSACPolicy", "TwinQValues", "discrete_policy_loss", "expected_soft_value"]


class CategoricalActor(nn.Module):
    """``obs -> logits`` ``[batch, actions]`` of a categorical policy: a :func:`~ding_dist.policy.networks.trunk` and
    a linear layer.

    Example::

        actor = CategoricalActor(gym.spaces.Box(-1, 1, (4,)), n_actions=2, hidden_sizes=[64, 64])
        actor(torch.zeros(5, 4)).shape  # (5, 2)
    """

    def __init__(
        self, obs_space: gym.Space, n_actions: int, hidden_sizes: Sequence[int] = (64, 64), activation: str = "relu"
    ) -> None:
        super().__init__()
        self.body, width = trunk(obs_space, hidden_sizes, activation)
        self.logits = nn.Linear(width, int(n_actions))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.logits(self.body(obs))


class TwinQValues(nn.Module):
    """Two independent Q-networks ``obs -> [Q_1, Q_2]``, of shape ``[2, batch, actions]`` (it unpacks as ``q1, q2``):
    for vector observations one :class:`~ding_dist.policy.networks.EnsembleMLP` (one matmul per layer for both,
    parameters ``q.<i>.weight`` ``[2, out, in]``), for images two networks with convolutional trunks.

    :attr:`q1` and :attr:`q2` are the two networks (for vectors plain MLPs sharing the ensemble's storage). A state
    dict of the former vector layout (``q1.*``, ``q2.*``: a trunk and a head each) loads into it (stacked on load).

    Example::

        critic = TwinQValues(gym.spaces.Box(-1, 1, (4,)), n_actions=2, hidden_sizes=[64, 64])
        q1, q2 = critic(torch.zeros(5, 4))  # (5, 2), (5, 2)
    """

    def __init__(
        self, obs_space: gym.Space, n_actions: int, hidden_sizes: Sequence[int] = (64, 64), activation: str = "relu"
    ) -> None:
        super().__init__()
        body1, width = trunk(obs_space, hidden_sizes, activation)
        body2, _ = trunk(obs_space, hidden_sizes, activation)
        head1, head2 = nn.Linear(width, int(n_actions)), nn.Linear(width, int(n_actions))  # drawn as before, in turn
        self.q: EnsembleMLP | None = None
        if is_conv_space(obs_space):  # submodules q1 and q2 (read through the properties below)
            self._modules["q1"], self._modules["q2"] = nn.Sequential(body1, head1), nn.Sequential(body2, head2)
        else:
            self.q = EnsembleMLP([nn.Sequential(*body1, head1), nn.Sequential(*body2, head2)])
            self.register_load_state_dict_pre_hook(functools.partial(_stack_twin_values, head_index=len(body1)))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        if self.q is not None:
            return self.q(obs)
        return torch.stack([self.q1(obs), self.q2(obs)])

    @property
    def q1(self) -> nn.Sequential:
        """The first Q-network (for vectors a plain MLP sharing the ensemble's storage)."""
        return self.q.member(0) if self.q is not None else self._modules["q1"]

    @property
    def q2(self) -> nn.Sequential:
        """The second Q-network (for vectors a plain MLP sharing the ensemble's storage)."""
        return self.q.member(1) if self.q is not None else self._modules["q2"]


def _stack_twin_values(module: nn.Module, state: dict, prefix: str, *_: Any, head_index: int) -> None:
    def flat_key(rest: str) -> str:  # the former Sequential(trunk, head): 0.<j>.* -> <j>.*, 1.* -> <head_index>.*
        first, _, tail = rest.partition(".")
        return tail if first == "0" else f"{head_index}.{tail}"

    stack_member_state(state, prefix, {"q1": 0, "q2": 1}, flat_key, "q")


def expected_soft_value(logits: torch.Tensor, q: torch.Tensor, alpha: float | torch.Tensor) -> torch.Tensor:
    """The soft value ``sum_b pi(b) * (q(b) - alpha * log pi(b))`` ``[batch]`` of the policy ``pi = softmax(logits)``
    under Q-values ``q`` (both ``[batch, actions]``).

    Example::

        logits = torch.log(torch.tensor([[0.25, 0.75]]))
        expected_soft_value(logits, torch.tensor([[1.0, 2.0]]), 1.0)  # 1.75 + H([1/4, 3/4])
    """
    log_pi = F.log_softmax(logits, dim=-1)
    return (log_pi.exp() * (q - alpha * log_pi)).sum(dim=-1)


def discrete_policy_loss(logits: torch.Tensor, q: torch.Tensor, alpha: float | torch.Tensor) -> torch.Tensor:
    """The actor's loss per sample ``sum_b pi(b) * (alpha * log pi(b) - q(b))`` ``[batch]``, ``pi = softmax(logits)``:
    minus :func:`expected_soft_value`, with the gradient reaching ``logits`` only.

    Example::

        loss = discrete_policy_loss(actor(obs), torch.min(*critic(obs)).detach(), alpha).mean()
    """
    return -expected_soft_value(logits, q.detach(), alpha)


# "sac_discrete": the type name of DI-engine's older cartpole_sac_config.py
@register_policy("discrete_sac", aliases=("sac_discrete",))
class DiscreteSACPolicy(Policy):
    """Soft actor-critic for Discrete action spaces.

    Config: the keys listed below (generated from ``keys``); ``learn.learning_starts`` global env steps act uniformly at
    random, and ``other.eps`` mixes uniformly random actions into the sampled ones (the default: none).

    Example::

        cfg = DiscreteSACPolicy.default_config()
        policy = DiscreteSACPolicy(cfg, env.single_observation_space, env.single_action_space)
        stats = policy.learn(replay.sample(cfg.learn.batch_size))  # {"critic_loss": ..., "alpha": ...}

    Reference tests: tests/policy/test_discrete_sac.py (the expected soft value, the policy loss and one step by
    hand).
    """

    on_policy = False
    _state_attrs = (
        "actor",
        "critic",
        "critic_target",
        "log_alpha",
        "actor_optimizer",
        "critic_optimizer",
        "alpha_optimizer",
    )

    keys = Policy.keys.plus(
        Key("model.actor_hidden_sizes", [64, 64], "hidden layer sizes of the actor", "sizes"),
        Key("model.critic_hidden_sizes", [64, 64], "hidden layer sizes of each Q critic", "sizes"),
        Key("model.activation", "relu", "activation of the hidden layers"),
        Key("learn.learning_rate_policy", 0.0003, "Adam learning rate of the actor", "> 0"),
        Key("learn.learning_rate_q", 0.0003, "Adam learning rate of the critics", "> 0"),
        Key("learn.learning_rate_alpha", 0.0003, "Adam learning rate of the entropy temperature", "> 0"),
        Key("learn.update_per_collect", 1, "updates per collect.n_sample global env steps", ">= 1", reader="pipeline"),
        Key("learn.learning_starts", 1000, "global env steps before the first update", ">= 0"),
        Key("learn.target_theta", 0.005, "soft target update rate per update (None: hard copies)", "(0, 1] or None"),
        Key("learn.alpha", 0.2, "entropy temperature (initial value when auto_alpha)"),
        Key("learn.auto_alpha", True, "tune alpha so the policy entropy tracks target_entropy"),
        Key("learn.target_entropy", None, "entropy target of auto_alpha (None: -action dimensions)"),
        Key("learn.grad_clip_norm", None, "gradient norm clip, applied after the sync (None: off)", "> 0 or None"),
        Key("collect.n_sample", 8),
        Key("other.eps.type", "linear", "epsilon-greedy schedule shape"),
        Key("other.eps.start", 0.0, "epsilon at the first env step", "[0, 1]"),
        Key("other.eps.end", 0.0, "epsilon after the decay", "[0, 1]"),
        Key("other.eps.decay", 1, "global env steps of the decay", ">= 0"),
        *replay_keys(100000),
        Key("discount_factor", 0.99, "gamma", "[0, 1]"),
        Key("nstep", 1, "n-step return length", ">= 1"),
    ).minus("learn.learning_rate")

    def __init__(
        self, cfg: Mapping[str, Any], obs_space: gym.Space, action_space: gym.Space, device: str | torch.device = "cpu"
    ) -> None:
        super().__init__(cfg, obs_space, action_space, device)
        self.n_actions = discrete_actions(action_space, "discrete SAC")
        lc, m = self.cfg.learn, self.cfg.model
        if not 0.0 < lc.target_theta <= 1.0:
            raise ValueError(f"learn.target_theta must be in (0, 1], got {lc.target_theta}")
        self.target_entropy = float(-self.n_actions if lc.target_entropy is None else lc.target_entropy)
        self.actor = CategoricalActor(obs_space, self.n_actions, m.actor_hidden_sizes, m.activation).to(self.device)
        self.critic = TwinQValues(obs_space, self.n_actions, m.critic_hidden_sizes, m.activation).to(self.device)
        self.log_alpha = LogAlpha(lc.alpha).to(self.device)
        self.actor_optimizer = self.make_optimizer(self.actor.parameters(), lr=lc.learning_rate_policy)
        self.critic_optimizer = self.make_optimizer(self.critic.parameters(), lr=lc.learning_rate_q)
        self.alpha_optimizer = self.make_optimizer(self.log_alpha.parameters(), lr=lc.learning_rate_alpha)
        self.train_actor, self.actor_optimizer = self.distribute(self.actor, self.actor_optimizer)
        self.train_critic, self.critic_optimizer = self.distribute(self.critic, self.critic_optimizer)
        self.train_log_alpha, self.alpha_optimizer = self.distribute(self.log_alpha, self.alpha_optimizer)
        # Copied after distribute, which gives every rank rank 0's initial parameters.
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)

    # --- acting ---------------------------------------------------------------------------------
    @property
    def alpha(self) -> float:
        """Current entropy temperature."""
        return float(self.log_alpha.value.detach().exp())

    @torch.no_grad()
    def schedule_values(self, env_step: int) -> dict[str, float]:
        """The share of uniformly random actions at global ``env_step``."""
        e = self.cfg.other.eps
        return {"train/epsilon": epsilon_schedule(e.type, e.start, e.end, e.decay, env_step)}

    @torch.no_grad()
    def collect_action(self, obs: np.ndarray, env_step: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Samples of the policy (uniform before ``learn.learning_starts``; epsilon of them uniform after)."""
        logits = self.actor(obs_tensor(obs, self.obs_space, self.device))
        actions = torch.multinomial(F.softmax(logits, dim=-1), 1).squeeze(1)
        eps = 1.0 if env_step < self.cfg.learn.learning_starts else self.schedule_values(env_step)["train/epsilon"]
        explore = torch.rand(actions.shape, device=actions.device) < eps
        return torch.where(explore, torch.randint_like(actions, self.n_actions), actions).cpu().numpy(), {}

    @torch.no_grad()
    def eval_action(self, obs: np.ndarray) -> np.ndarray:
        return self.actor(obs_tensor(obs, self.obs_space, self.device)).argmax(dim=-1).cpu().numpy()

    # --- learning -------------------------------------------------------------------------------
    def _step(self, optimizer: torch.optim.Optimizer, module: nn.Module, loss: torch.Tensor) -> None:
        """Backward through a wrapped module (gradients averaged across ranks), optional clip, step."""
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.cfg.learn.grad_clip_norm is not None:
            nn.utils.clip_grad_norm_(module.parameters(), self.cfg.learn.grad_clip_norm)
        optimizer.step()

    def learn(self, batch: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """One discrete-SAC update on a replay batch (keys ``obs, action, reward, next_obs, discount``)."""
        lc = self.cfg.learn
        alpha = self.log_alpha.value.detach().exp()

        # Critic: the soft value of the next state, an exact expectation over the current policy.
        with torch.no_grad():
            next_q = self.critic_target(batch["next_obs"]).amin(dim=0)  # the twin minimum, [batch, actions]
            next_v = expected_soft_value(self.actor(batch["next_obs"]), next_q, alpha)
            target = batch["reward"] + batch["discount"] * next_v
        q_all = self.train_critic(batch["obs"])  # [2, batch, actions]: both critics in one pass
        action = batch["action"].long().view(1, -1, 1).expand(q_all.shape[0], -1, 1)
        q_taken = q_all.gather(2, action).squeeze(2)
        critic_loss = F.mse_loss(q_taken[0], target) + F.mse_loss(q_taken[1], target)
        self._step(self.critic_optimizer, self.critic, critic_loss)

        # Actor: the updated critics held fixed (computed without gradients, so none is produced or sent).
        logits = self.train_actor(batch["obs"])
        with torch.no_grad():
            q = self.critic(batch["obs"]).amin(dim=0)
        actor_loss = discrete_policy_loss(logits, q, alpha).mean()
        self._step(self.actor_optimizer, self.actor, actor_loss)

        # Temperature: move log_alpha so the policy's entropy tracks target_entropy.
        log_pi = F.log_softmax(logits.detach(), dim=-1)
        entropy = -(log_pi.exp() * log_pi).sum(dim=-1)
        alpha_loss = (self.train_log_alpha() * (entropy - self.target_entropy)).mean()
        if lc.auto_alpha:
            self._step(self.alpha_optimizer, self.log_alpha, alpha_loss)

        soft_update(self.critic_target, self.critic, lc.target_theta)
        self.train_iter += 1
        return {
            "critic_loss": critic_loss.detach(),
            "actor_loss": actor_loss.detach(),
            "alpha_loss": alpha_loss.detach(),
            "alpha": alpha.reshape(()),
            "entropy": entropy.mean(),
            "q_mean": q_taken[0].detach().mean(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """:meth:`Policy.load_state_dict`; a checkpoint whose vector critics are two separate MLPs is stacked on
        load."""
        if self.critic.q is None:  # image critics keep the two-network layout
            return super().load_state_dict(state)
        return super().load_state_dict(stack_twin_checkpoint(state))
