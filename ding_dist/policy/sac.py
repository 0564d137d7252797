"""SAC: soft actor-critic for continuous actions (twin Q critics, squashed Gaussian actor, tuned entropy).

Reading order: the networks (:class:`SquashedGaussianActor`, :class:`TwinQCritic`, :class:`LogAlpha`),
the squashed-Gaussian sampler :func:`squashed_sample` (tanh with its log-prob correction), then
:class:`SACPolicy` — config, acting, and ``learn``, where the three losses are computed in plain sight:

- critic: ``y = r + discount * (min_i Q_target_i(s', a') - alpha * log pi(a'|s'))`` with
  ``a' ~ pi(.|s')``; loss ``MSE(Q_1(s, a), y) + MSE(Q_2(s, a), y)``;
- actor: ``E[alpha * log pi(a|s) - min_i Q_i(s, a)]`` with ``a ~ pi(.|s)`` reparameterized, the
  critics frozen so this backward produces (and synchronizes) actor gradients only;
- temperature (``learn.auto_alpha``): ``-E[log_alpha * (log pi(a|s) + target_entropy)]``, which
  raises alpha while the policy's entropy is below ``target_entropy`` and lowers it above.

Actions live in ``[-1, 1]`` inside the policy (actor output, replay buffer, critic input, log-probs,
entropy target); :meth:`SACPolicy.to_env_action` maps them affinely onto the env's Box bounds.
``discount`` comes from the replay buffer (``gamma**n``, 0 after a termination; a truncated
episode still bootstraps).

Distributed: the actor, the twin critic and ``log_alpha`` are each wrapped with
:meth:`Policy.distribute` together with their optimizer, so every gradient the policy applies is
averaged across ranks before its optimizer step; acting and evaluation use the raw modules.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ding_dist.policy.base import Policy, mlp, obs_dim, soft_update
from ding_dist.policy.encoders import is_conv_space
from ding_dist.policy.networks import EnsembleMLP, stack_member_state, stack_optimizer_state
from ding_dist.policy.registry import register_policy
from ding_dist.policy.replay_keys import replay_keys
from ding_dist.utils.keys import Key

__all__ = ["SACPolicy", "SquashedGaussianActor", "TwinQCritic", "LogAlpha", "squashed_sample", "stack_twin_checkpoint"]

_LOG_2PI = math.log(2.0 * math.pi)


class SquashedGaussianActor(nn.Module):
    """``obs -> (mean, log_std)`` of a diagonal Gaussian over pre-tanh actions.

    ``log_std`` is squashed smoothly into ``[log_std_min, log_std_max]``.

    Example::

        actor = SquashedGaussianActor(obs_size=3, action_size=1, hidden_sizes=[64, 64])
        mean, log_std = actor(torch.zeros(5, 3))  # (5, 1), (5, 1)
    """

    def __init__(
        self,
        obs_size: int,
        action_size: int,
        hidden_sizes: Sequence[int] = (256, 256),
        activation: str = "relu",
        log_std_min: float = -5.0,
        log_std_max: float = 2.0,
    ) -> None:
        super().__init__()
        if not hidden_sizes:
            raise ValueError("model.actor_hidden_sizes must name at least one hidden layer, got []")
        if not log_std_min < log_std_max:
            raise ValueError(f"model.log_std_min must be < log_std_max, got {log_std_min} >= {log_std_max}")
        last = int(hidden_sizes[-1])
        self.body = mlp([obs_size, *hidden_sizes], activation, out_activation=True)
        self.mean = nn.Linear(last, action_size)
        self.log_std = nn.Linear(last, action_size)
        self.log_std_min, self.log_std_max = float(log_std_min), float(log_std_max)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.body(obs)
        squashed = torch.tanh(self.log_std(h))  # in (-1, 1), mapped onto [min, max]
        log_std = self.log_std_min + 0.5 * (self.log_std_max - self.log_std_min) * (squashed + 1.0)
        return self.mean(h), log_std


class TwinQCritic(nn.Module):
    """Two independent Q-networks ``(obs, action) -> [Q_1, Q_2]``, of shape ``[2, batch]`` (it unpacks as
    ``q1, q2``), computed as one :class:`~ding_dist.policy.networks.EnsembleMLP` (one matmul per layer for both).

    Its parameters are the stacked layers ``q.<i>.weight`` ``[2, out, in]`` and ``q.<i>.bias`` ``[2, out]``;
    :attr:`q1` and :attr:`q2` are the two networks as plain MLPs sharing that storage. A state dict of the former
    layout (two MLPs ``q1.*`` and ``q2.*``) loads into it (stacked on load).

    Example::

        critic = TwinQCritic(obs_size=3, action_size=1, hidden_sizes=[64, 64])
        q1, q2 = critic(torch.zeros(5, 3), torch.zeros(5, 1))  # (5,), (5,)
    """

    def __init__(
        self, obs_size: int, action_size: int, hidden_sizes: Sequence[int] = (256, 256), activation: str = "relu"
    ) -> None:
        super().__init__()
        if not hidden_sizes:
            raise ValueError("model.critic_hidden_sizes must name at least one hidden layer, got []")
        sizes = [obs_size + action_size, *hidden_sizes, 1]
        self.q = EnsembleMLP([mlp(sizes, activation), mlp(sizes, activation)])  # drawn as two MLPs, in turn
        self.register_load_state_dict_pre_hook(_stack_twin_mlps)

    def forward(self, obs: torch.Tensor, action: torch.Tensor, members: int | None = None) -> torch.Tensor:
        """``[2, batch]`` (``members=1``: only ``Q_1``, ``[1, batch]``)."""
        return self.q(torch.cat([obs, action], dim=-1), members).squeeze(-1)

    @property
    def q1(self) -> nn.Sequential:
        """The first Q-network as a plain MLP sharing the ensemble's storage."""
        return self.q.member(0)

    @property
    def q2(self) -> nn.Sequential:
        """The second Q-network as a plain MLP sharing the ensemble's storage."""
        return self.q.member(1)


def _stack_twin_mlps(module: nn.Module, state: dict, prefix: str, *_: Any) -> None:
    stack_member_state(state, prefix, {"q1": 0, "q2": 1}, lambda rest: rest, "q")


class LogAlpha(nn.Module):
    """The entropy temperature as a module holding ``log(alpha)``, so the sync engine can wrap it.

    Example::

        log_alpha = LogAlpha(0.2)
        log_alpha().exp()  # tensor(0.2000)
    """

    def __init__(self, init_alpha: float) -> None:
        super().__init__()
        if not init_alpha > 0:
            raise ValueError(f"learn.alpha must be > 0, got {init_alpha}")
        self.value = nn.Parameter(torch.tensor(math.log(init_alpha), dtype=torch.float32))

    def forward(self) -> torch.Tensor:
        return self.value


def squashed_sample(
    mean: torch.Tensor, log_std: torch.Tensor, noise: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Reparameterized sample ``a = tanh(mean + std * eps)`` in ``(-1, 1)`` and its log-density ``[batch]``.

    ``log pi(a) = log N(u; mean, std) - sum_j log(1 - tanh(u_j)**2)``; the correction is computed
    as ``2 * (log 2 - u - softplus(-2u))``, exact and stable for large ``|u|``. ``noise`` (optional)
    is the standard-normal ``eps`` (drawn from the global torch RNG when ``None``).

    Example::

        a, logp = squashed_sample(torch.zeros(4, 2), torch.zeros(4, 2))  # (4, 2), (4,)
    """
    std = log_std.exp()
    eps = torch.randn_like(mean) if noise is None else noise
    u = mean + std * eps
    gaussian_logp = (-0.5 * eps.pow(2) - log_std - 0.5 * _LOG_2PI).sum(-1)
    log_det_tanh = (2.0 * (math.log(2.0) - u - F.softplus(-2.0 * u))).sum(-1)
    return torch.tanh(u), gaussian_logp - log_det_tanh


@register_policy("sac")
class SACPolicy(Policy):
    """Soft actor-critic for Box action spaces with finite bounds.

    Config: the keys listed below (generated from ``keys``); ``learn.update_per_collect / collect.n_sample`` is the
    update-to-data ratio, and ``learn.learning_starts`` global env steps act uniformly at random.

    Example::

        cfg = SACPolicy.default_config()
        policy = SACPolicy(cfg, env.single_observation_space, env.single_action_space)
        actions, _ = policy.collect_action(obs, env_step=0)  # in [-1, 1]
        env_actions = policy.to_env_action(actions)  # on the env's bounds
        stats = policy.learn(replay.sample(cfg.learn.batch_size))  # {"critic_loss": ..., "alpha": ...}

    Reference tests: tests/policy/test_sac.py (the squashed log-probability, the critic terms, Polyak targets),
    tests/policy/test_q_references.py (twin-minimum soft target, entropy term, alpha loss).
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
        Key("model.actor_hidden_sizes", [256, 256], "hidden layer sizes of the actor", "sizes"),
        Key("model.critic_hidden_sizes", [256, 256], "hidden layer sizes of each Q critic", "sizes"),
        Key("model.activation", "relu", "activation of the hidden layers"),
        Key("model.log_std_min", -5.0, "lower clamp of the actor's log-std"),
        Key("model.log_std_max", 2.0, "upper clamp of the actor's log-std"),
        Key("learn.batch_size", 256),
        Key("learn.learning_rate_policy", 0.0003, "Adam learning rate of the actor", "> 0"),
        Key("learn.learning_rate_q", 0.001, "Adam learning rate of the critics", "> 0"),
        Key("learn.learning_rate_alpha", 0.001, "Adam learning rate of the entropy temperature", "> 0"),
        Key("learn.update_per_collect", 64, "updates per collect.n_sample global env steps", ">= 1", reader="pipeline"),
        Key("learn.learning_starts", 5000, "global env steps before the first update", ">= 0"),
        Key("learn.target_theta", 0.005, "soft target update rate per update (None: hard copies)", "(0, 1] or None"),
        Key("learn.alpha", 0.2, "entropy temperature (initial value when auto_alpha)"),
        Key("learn.auto_alpha", True, "tune alpha so the policy entropy tracks target_entropy"),
        Key("learn.target_entropy", None, "entropy target of auto_alpha (None: -action dimensions)"),
        Key("learn.grad_clip_norm", None, "gradient norm clip, applied after the sync (None: off)", "> 0 or None"),
        *replay_keys(1000000),
        Key("discount_factor", 0.99, "gamma", "[0, 1]"),
        Key("nstep", 1, "n-step return length", ">= 1"),
    ).minus("learn.learning_rate")

    def __init__(
        self,
        cfg: Mapping[str, Any],
        obs_space: gym.Space,
        action_space: gym.Space,
        device: str | torch.device = "cpu",
    ) -> None:
        super().__init__(cfg, obs_space, action_space, device)
        if not isinstance(action_space, gym.spaces.Box):
            raise ValueError(f"SAC needs a Box action space, got {action_space}")
        if is_conv_space(obs_space):  # its MLPs would take raw pixels
            raise ValueError(
                f"SAC here takes vector observations, got images {obs_space}; use PPO, IMPALA or DQN for pixels"
            )
        low, high = action_space.low.astype(np.float64), action_space.high.astype(np.float64)
        if not (np.isfinite(low).all() and np.isfinite(high).all() and (high > low).all()):
            raise ValueError(f"SAC needs finite action bounds with high > low, got low={low} high={high}")
        lc, m = self.cfg.learn, self.cfg.model
        if not 0.0 < lc.target_theta <= 1.0:
            raise ValueError(f"learn.target_theta must be in (0, 1], got {lc.target_theta}")
        self.action_shape = action_space.shape
        self.action_size = int(np.prod(action_space.shape))
        self._scale = ((high - low) / 2.0).astype(np.float32)  # env action = center + scale * a
        self._center = ((high + low) / 2.0).astype(np.float32)
        self.target_entropy = float(-self.action_size if lc.target_entropy is None else lc.target_entropy)
        n_obs = obs_dim(obs_space)

        self.actor = SquashedGaussianActor(
            n_obs, self.action_size, m.actor_hidden_sizes, m.activation, m.log_std_min, m.log_std_max
        ).to(self.device)
        self.critic = TwinQCritic(n_obs, self.action_size, m.critic_hidden_sizes, m.activation).to(self.device)
        self.log_alpha = LogAlpha(lc.alpha).to(self.device)
        self.actor_optimizer = self.make_optimizer(self.actor.parameters(), lr=lc.learning_rate_policy)
        self.critic_optimizer = self.make_optimizer(self.critic.parameters(), lr=lc.learning_rate_q)
        self.alpha_optimizer = self.make_optimizer(self.log_alpha.parameters(), lr=lc.learning_rate_alpha)
        # Every trained module goes through the sync engine (log_alpha too, even when alpha is fixed,
        # so all ranks start from rank 0's value and the checkpoint layout does not depend on auto_alpha).
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

    def _flat_obs(self, obs: np.ndarray) -> torch.Tensor:
        x = self.as_tensor(obs)
        return x.reshape(x.shape[0], -1)

    @torch.no_grad()
    def collect_action(self, obs: np.ndarray, env_step: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Actions in ``[-1, 1]``: uniform before ``learn.learning_starts`` global env steps, then sampled."""
        n = obs.shape[0]
        if env_step < self.cfg.learn.learning_starts:
            action = torch.rand(n, self.action_size) * 2.0 - 1.0
        else:
            action, _ = squashed_sample(*self.actor(self._flat_obs(obs)))
        return action.reshape(n, *self.action_shape).cpu().numpy().astype(np.float32), {}

    def to_env_action(self, action: np.ndarray) -> np.ndarray:
        """Map actions in ``[-1, 1]`` onto the env's Box bounds."""
        return np.clip(self._center + self._scale * action, self.action_space.low, self.action_space.high)

    @torch.no_grad()
    def eval_action(self, obs: np.ndarray) -> np.ndarray:
        """Greedy env actions: ``tanh(mean)`` mapped onto the bounds (raw actor, no collectives)."""
        mean, _ = self.actor(self._flat_obs(obs))
        action = torch.tanh(mean).reshape(obs.shape[0], *self.action_shape)
        return self.to_env_action(action.cpu().numpy())

    # --- learning -------------------------------------------------------------------------------
    def _step(self, optimizer: torch.optim.Optimizer, module: nn.Module, loss: torch.Tensor) -> None:
        """Backward through a wrapped module (gradients averaged across ranks), optional clip, step."""
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.cfg.learn.grad_clip_norm is not None:
            nn.utils.clip_grad_norm_(module.parameters(), self.cfg.learn.grad_clip_norm)
        optimizer.step()

    def learn(self, batch: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """One SAC update on a replay batch (keys ``obs, action, reward, next_obs, discount``)."""
        lc = self.cfg.learn
        obs = batch["obs"].reshape(batch["obs"].shape[0], -1)
        next_obs = batch["next_obs"].reshape(obs.shape[0], -1)
        action = batch["action"].reshape(obs.shape[0], -1)
        alpha = self.log_alpha.value.detach().exp()

        # Critic: soft Bellman target from the target critics and a fresh next action.
        with torch.no_grad():
            next_action, next_logp = squashed_sample(*self.actor(next_obs))
            next_v = self.critic_target(next_obs, next_action).amin(dim=0) - alpha * next_logp  # the twin minimum
            target = batch["reward"] + batch["discount"] * next_v
        q = self.train_critic(obs, action)  # [2, batch]: both critics in one pass
        critic_loss = F.mse_loss(q[0], target) + F.mse_loss(q[1], target)
        self._step(self.critic_optimizer, self.critic, critic_loss)

        # Actor: maximize min-Q plus entropy; critics frozen so no critic gradient is produced or sent.
        new_action, logp = squashed_sample(*self.train_actor(obs))
        self.critic.requires_grad_(False)
        try:
            actor_loss = (alpha * logp - self.critic(obs, new_action).amin(dim=0)).mean()
            self._step(self.actor_optimizer, self.actor, actor_loss)
        finally:
            self.critic.requires_grad_(True)

        # Temperature: move log_alpha so the policy's entropy tracks target_entropy.
        alpha_loss = -(self.train_log_alpha() * (logp.detach() + self.target_entropy)).mean()
        if lc.auto_alpha:
            self._step(self.alpha_optimizer, self.log_alpha, alpha_loss)

        soft_update(self.critic_target, self.critic, lc.target_theta)
        self.train_iter += 1
        return {  # detached device scalars: the learner reads them back once per log interval
            "critic_loss": critic_loss.detach(),
            "actor_loss": actor_loss.detach(),
            "alpha_loss": alpha_loss.detach(),
            "alpha": alpha.reshape(()),
            "entropy": -logp.detach().mean(),
            "q_mean": q[0].detach().mean(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """:meth:`Policy.load_state_dict`; a checkpoint whose critics are two separate MLPs is stacked on load."""
        super().load_state_dict(stack_twin_checkpoint(state))


def stack_twin_checkpoint(state: Mapping[str, Any]) -> Mapping[str, Any]:
    """A policy state whose ``critic`` holds two separate Q-networks (``q1.*``, ``q2.*``: the layout before
    :class:`TwinQCritic` stacked them) with its ``critic_optimizer`` state made over the stacked parameters; the
    critics themselves are stacked by their load hook. Any other state is returned as it is.

    Example::

        policy.load_state_dict(stack_twin_checkpoint(torch.load("old.pt")["policy"]))
    """
    critic = state.get("critic")
    if not isinstance(critic, Mapping) or not any(k.startswith("q1.") for k in critic):
        return state
    out = dict(state)
    if out.get("critic_optimizer") is not None:
        out["critic_optimizer"] = stack_optimizer_state(out["critic_optimizer"], members=2)
    return out
