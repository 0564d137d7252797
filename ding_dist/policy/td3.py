"""TD3: twin delayed DDPG for continuous actions (Fujimoto et al. 2018, arXiv:1802.09477).

A deterministic actor ``pi(s)`` in ``[-1, 1]`` (:class:`~ding_dist.policy.continuous.DeterministicActor`) and
Q critics (twin, :class:`~ding_dist.policy.sac.TwinQCritic`; or one, DDPG), each with a target copy. One update on
a replay batch, with DI-engine's meaning of every key:

- critic: ``y = r + discount * min_i Q'_i(s', a')`` with the target action smoothed,
  ``a' = clip(pi'(s') + clip(sigma * eps, noise_range.min, noise_range.max), -1, 1)`` (``learn.noise``,
  ``learn.noise_sigma``, ``learn.noise_range``); loss ``MSE(Q_1(s, a), y) + MSE(Q_2(s, a), y)``;
- actor, every ``learn.actor_update_freq``-th update (the 2nd, 4th, ... for 2): ``-mean Q_1(s, pi(s))``, the
  critics frozen so this backward produces (and synchronizes) actor gradients only;
- targets: actor and critics Polyak-averaged by ``learn.target_theta`` after every update (DI-engine updates the
  target networks every iteration, the paper with the delayed actor updates).

Exploration: ``clip(pi(s) + N(0, collect.noise_sigma), -1, 1)``, uniform actions before ``learn.learning_starts``
global env steps; :meth:`TD3Policy.to_env_action` maps ``[-1, 1]`` onto the env's bounds.

Distributed: actor and critics are each wrapped with :meth:`Policy.distribute` with their optimizer, so gradients
are averaged across ranks before each step. The smoothing noise of update ``k`` is drawn for the global batch from a
generator seeded by ``(actor.noise_seed, k)`` (rank 0's seed on every rank) and each rank takes its rows, so N ranks
apply the update one process makes on the same global batch.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ding_dist.comm import get_world_size
from ding_dist.policy.base import Policy, obs_dim, soft_update
from ding_dist.policy.continuous import BoxActions, DeterministicActor, QCritic, gaussian_noise
from ding_dist.policy.encoders import is_conv_space
from ding_dist.policy.registry import register_policy
from ding_dist.policy.replay_keys import replay_keys
from ding_dist.policy.rng import global_rows, step_generator
from ding_dist.policy.sac import TwinQCritic, stack_twin_checkpoint
from ding_dist.utils.keys import Key

__all__ = ["TD3Policy"]


@register_policy("td3")
class TD3Policy(Policy):
    """TD3 for Box action spaces with finite bounds (with ``model.twin_critic=False``, ``learn.noise=False`` and
    ``learn.actor_update_freq=1``: DDPG, see :class:`~ding_dist.policy.ddpg.DDPGPolicy`).

    Config: the keys listed below (generated from ``keys``); ``learn.learning_starts`` global env steps act uniformly at
    random.

    Example::

        cfg = TD3Policy.default_config()
        policy = TD3Policy(cfg, env.single_observation_space, env.single_action_space)
        actions, _ = policy.collect_action(obs, env_step=0)  # in [-1, 1]
        stats = policy.learn(replay.sample(cfg.learn.batch_size))  # {"critic_loss": ..., "actor_loss": ...}

    Reference tests: tests/policy/test_td3.py (the smoothed twin-minimum target, the delayed actor),
    tests/policy/test_q_references.py (twin minimum at the clipped smoothed action).
    """

    on_policy = False
    _state_attrs = ("actor", "actor_target", "critic", "critic_target", "actor_optimizer", "critic_optimizer")
    algorithm = "TD3"

    keys = Policy.keys.plus(
        Key("model.actor_hidden_sizes", [256, 256], "hidden layer sizes of the actor", "sizes"),
        Key("model.critic_hidden_sizes", [256, 256], "hidden layer sizes of each Q critic", "sizes"),
        Key("model.activation", "relu", "activation of the hidden layers"),
        Key("model.twin_critic", True, "two Q critics, the target from their minimum (TD3); one critic (DDPG)"),
        Key("learn.batch_size", 256),
        Key("learn.learning_rate_actor", 0.001, "Adam learning rate of the actor", "> 0"),
        Key("learn.learning_rate_critic", 0.001, "Adam learning rate of the critic(s)", "> 0"),
        Key("learn.update_per_collect", 64, "updates per collect.n_sample global env steps", ">= 1", reader="pipeline"),
        Key("learn.learning_starts", 25000, "global env steps before the first update", ">= 0"),
        Key("learn.target_theta", 0.005, "soft target update rate per update (None: hard copies)", "(0, 1] or None"),
        Key(
            "learn.actor_update_freq",
            2,
            "update the actor on every K-th critic update (TD3's delayed policy updates)",
            ">= 1",
        ),
        Key("learn.noise", True, "target policy smoothing: clipped Gaussian noise on the target action"),
        Key("learn.noise_sigma", 0.2, "std of the target-smoothing noise (actions in [-1, 1])", "number >= 0"),
        Key("learn.noise_range.min", -0.5, "lower clip of the target-smoothing noise"),
        Key("learn.noise_range.max", 0.5, "upper clip of the target-smoothing noise"),
        Key("learn.grad_clip_norm", None, "gradient norm clip, applied after the sync (None: off)", "> 0 or None"),
        Key(
            "collect.noise_sigma",
            0.1,
            "std of the Gaussian exploration noise added to the actor's action (in [-1, 1])",
            "number >= 0",
        ),
        *replay_keys(100000),
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
        self.box = BoxActions(action_space, self.algorithm)
        if is_conv_space(obs_space):
            raise ValueError(f"{self.algorithm} here takes vector observations, got images {obs_space}")
        lc, m = self.cfg.learn, self.cfg.model
        if not 0.0 < lc.target_theta <= 1.0:
            raise ValueError(f"learn.target_theta must be in (0, 1], got {lc.target_theta}")
        if int(lc.actor_update_freq) < 1:
            raise ValueError(f"learn.actor_update_freq must be >= 1, got {lc.actor_update_freq}")
        if lc.noise and not lc.noise_range.min <= 0.0 <= lc.noise_range.max:
            raise ValueError(f"learn.noise_range must contain 0, got {dict(lc.noise_range)}")
        n_obs, n_act = obs_dim(obs_space), self.box.size

        self.actor = DeterministicActor(n_obs, n_act, m.actor_hidden_sizes, m.activation).to(self.device)
        self.critic = self.build_critic(n_obs, n_act).to(self.device)
        self._twin = isinstance(self.critic, TwinQCritic)  # [2, batch] from one pass, else [batch]
        self.actor_optimizer = self.make_optimizer(self.actor.parameters(), lr=lc.learning_rate_actor)
        self.critic_optimizer = self.make_optimizer(self.critic.parameters(), lr=lc.learning_rate_critic)
        self.train_actor, self.actor_optimizer = self.distribute(self.actor, self.actor_optimizer)
        self.train_critic, self.critic_optimizer = self.distribute(self.critic, self.critic_optimizer)
        # Copied after distribute, which gives every rank rank 0's initial parameters (and noise seed).
        self.actor_target = copy.deepcopy(self.actor).requires_grad_(False)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        self._actor_loss = torch.zeros((), device=self.device)  # the last one, reported between actor updates
        self._noise_seed = int(self.actor.noise_seed)  # read once (not a device read per update)

    def build_critic(self, n_obs: int, n_act: int) -> nn.Module:
        """The critic(s): twin Q critics, or one with ``model.twin_critic=False`` (a subclass may change it: D4PG)."""
        m = self.cfg.model
        critic_cls = TwinQCritic if m.twin_critic else QCritic
        return critic_cls(n_obs, n_act, m.critic_hidden_sizes, m.activation)

    # --- acting ---------------------------------------------------------------------------------
    def _flat_obs(self, obs: np.ndarray) -> torch.Tensor:
        x = self.as_tensor(obs)
        return x.reshape(x.shape[0], -1)

    @torch.no_grad()
    def collect_action(self, obs: np.ndarray, env_step: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Actions in ``[-1, 1]``: uniform before ``learn.learning_starts`` global env steps, then
        ``clip(pi(s) + N(0, collect.noise_sigma), -1, 1)``."""
        n = obs.shape[0]
        if env_step < self.cfg.learn.learning_starts:
            action = torch.rand(n, self.box.size) * 2.0 - 1.0
        else:
            action = self.actor(self._flat_obs(obs))
            action = action + gaussian_noise(action.shape, self.cfg.collect.noise_sigma, device=self.device)
            action = action.clamp(-1.0, 1.0)
        return action.reshape(n, *self.box.shape).cpu().numpy().astype(np.float32), {}

    def to_env_action(self, action: np.ndarray) -> np.ndarray:
        """Map actions in ``[-1, 1]`` onto the env's Box bounds."""
        return self.box.to_env(action)

    @torch.no_grad()
    def eval_action(self, obs: np.ndarray) -> np.ndarray:
        """Greedy env actions ``pi(s)`` mapped onto the bounds (raw actor, no collectives)."""
        action = self.actor(self._flat_obs(obs)).reshape(obs.shape[0], *self.box.shape)
        return self.to_env_action(action.cpu().numpy())

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """:meth:`Policy.load_state_dict`; a checkpoint whose twin critics are two separate MLPs is stacked on load."""
        super().load_state_dict(stack_twin_checkpoint(state))
        self._noise_seed = int(self.actor.noise_seed)

    # --- learning -------------------------------------------------------------------------------
    def _step(self, optimizer: torch.optim.Optimizer, module: nn.Module, loss: torch.Tensor) -> None:
        """Backward through a wrapped module (gradients averaged across ranks), optional clip, step."""
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.cfg.learn.grad_clip_norm is not None:
            nn.utils.clip_grad_norm_(module.parameters(), self.cfg.learn.grad_clip_norm)
        optimizer.step()

    def smoothing_noise(self, rows: int) -> torch.Tensor:
        """This rank's ``[rows, action_size]`` of update ``train_iter``'s clipped target-smoothing noise, drawn for
        the global batch (``rows`` x the ranks of the sync group) from ``(actor.noise_seed, train_iter)``.

        Example::

            policy.smoothing_noise(128)  # every entry in [noise_range.min, noise_range.max]
        """
        lc = self.cfg.learn
        world = get_world_size(self.sync_group)
        g = step_generator(self._noise_seed, self.train_iter)
        draw = gaussian_noise((rows * world, self.box.size), lc.noise_sigma, (lc.noise_range.min, lc.noise_range.max),
                              generator=g)  # fmt: skip
        # host to device without waiting for the device (a blocking copy would be a host sync every update)
        return global_rows(draw, rows, self.sync_group).to(self.device, non_blocking=True)

    def _q(self, critic: nn.Module, obs: torch.Tensor, action: torch.Tensor, first: bool = False) -> torch.Tensor:
        """The critics' Q-values ``[critics, batch]`` (``first``: only ``Q_1``, ``[1, batch]``)."""
        if self._twin:
            return critic(obs, action, 1 if first else None)
        return critic(obs, action).unsqueeze(0)

    def learn(self, batch: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """One update on a replay batch (keys ``obs, action, reward, next_obs, discount``)."""
        lc = self.cfg.learn
        obs = batch["obs"].reshape(batch["obs"].shape[0], -1)
        next_obs = batch["next_obs"].reshape(obs.shape[0], -1)
        action = batch["action"].reshape(obs.shape[0], -1)

        # Critic: the Bellman target from the target networks, the target action smoothed by clipped noise.
        with torch.no_grad():
            next_action = self.actor_target(next_obs)
            if lc.noise:
                next_action = (next_action + self.smoothing_noise(obs.shape[0])).clamp(-1.0, 1.0)
            next_q = self._q(self.critic_target, next_obs, next_action).amin(dim=0)  # the twin minimum
            target = batch["reward"] + batch["discount"] * next_q
        qs = self._q(self.train_critic, obs, action)  # [critics, batch]: the twins in one pass
        critic_loss = F.mse_loss(qs[0], target)
        for q in qs[1:]:
            critic_loss = critic_loss + F.mse_loss(q, target)
        self._step(self.critic_optimizer, self.critic, critic_loss)

        # Actor, delayed: maximize Q_1(s, pi(s)); critics frozen so no critic gradient is produced or sent.
        if (self.train_iter + 1) % int(lc.actor_update_freq) == 0:
            self.critic.requires_grad_(False)
            try:
                actor_loss = -self._q(self.critic, obs, self.train_actor(obs), first=True)[0].mean()
                self._step(self.actor_optimizer, self.actor, actor_loss)
            finally:
                self.critic.requires_grad_(True)
            self._actor_loss = actor_loss.detach()

        soft_update(self.actor_target, self.actor, lc.target_theta)
        soft_update(self.critic_target, self.critic, lc.target_theta)
        self.train_iter += 1
        return {  # detached device scalars: the learner reads them back once per log interval
            "critic_loss": critic_loss.detach(),
            "actor_loss": self._actor_loss,
            "q_mean": qs[0].detach().mean(),
            "target_q_mean": target.mean(),
        }
