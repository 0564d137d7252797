"""PPO: clipped surrogate objective, GAE, value clipping, entropy bonus, advantage normalization.

Discrete action spaces use a Categorical head, Box action spaces a Gaussian head with a learned,
state-independent log standard deviation. Reading order: the actor-critic network, then
:class:`PPOPolicy` — acting, :func:`compute_gae`, and ``learn`` with the loss written out.

Every minibatch update goes through the sync engine, so with N ranks each update averages the
gradients of N per-rank minibatches: the global minibatch is ``learn.batch_size`` (each rank
takes ``plan.rank_batch``, ``batch_size / N``), exactly as on one process. Advantage normalization uses the
statistics of that global minibatch (one small allreduce per ``learn`` call serves every minibatch),
so N ranks apply the update one process would.

With rollout preemption (``collect.preempt``, DD-PPO's straggler tolerance) the ranks' rollouts differ in
length; ``learn`` then weights each rank by its samples (see :meth:`PPOPolicy.minibatch_plan`), so the
update is still the one a single process makes on the union of the ranks' samples.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical, Normal

from ding_dist.comm import allreduce, comm_device, get_world_size
from ding_dist.policy.base import Policy, action_info, mlp, obs_dim
from ding_dist.policy.encoders import NatureCNN, conv_encoder, is_conv_space, obs_tensor
from ding_dist.policy.normalization import RunningObsNorm
from ding_dist.policy.registry import register_policy
from ding_dist.utils.keys import Key
from ding_dist.utils.plan import Plan

__all__ = ["PPOPolicy", "ActorCritic", "ImageActorCritic", "clipped_surrogate", "compute_gae", "minibatch_plan"]


class ActorCritic(nn.Module):
    """Separate actor and critic MLPs; ``forward(obs) -> (logits or mean, value)``.

    Hidden layers are orthogonally initialized with gain sqrt(2), the policy head with 0.01 and the
    value head with 1 (the usual PPO initialization).

    Example::

        net = ActorCritic(obs_size=4, action_size=2, discrete=True, hidden_sizes=[64, 64])
        logits, value = net(torch.zeros(3, 4))  # shapes (3, 2), (3,)
    """

    def __init__(
        self,
        obs_size: int,
        action_size: int,
        discrete: bool,
        hidden_sizes: Sequence[int] = (64, 64),
        activation: str = "tanh",
        log_std_init: float = 0.0,
    ) -> None:
        super().__init__()
        self.discrete = discrete
        self.actor = mlp([obs_size, *hidden_sizes, action_size], activation, out_gain=0.01)
        self.critic = mlp([obs_size, *hidden_sizes, 1], activation, out_gain=1.0)
        for net in (self.actor, self.critic):
            for layer in list(net)[:-1]:
                if isinstance(layer, nn.Linear):
                    nn.init.orthogonal_(layer.weight, gain=math.sqrt(2))
                    nn.init.zeros_(layer.bias)
        if not discrete:
            self.log_std = nn.Parameter(torch.full((action_size,), float(log_std_init)))

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.actor(obs), self.critic(obs).squeeze(-1)

    def distribution(self, head: torch.Tensor) -> torch.distributions.Distribution:
        """The action distribution for actor outputs ``head`` (logits or Gaussian means)."""
        if self.discrete:  # validate_args=False: no per-call checks (each a host read) on the update's path
            return Categorical(logits=head, validate_args=False)
        return Normal(head, self.log_std.exp().expand_as(head), validate_args=False)


class ImageActorCritic(nn.Module):
    """Actor and critic heads on one shared convolutional trunk: by default a
    :class:`~ding_dist.policy.encoders.NatureCNN` (CleanRL's Atari PPO network), or ``encoder`` (e.g. the MinAtar
    network that :func:`~ding_dist.policy.encoders.conv_encoder` picks for grids): orthogonal init, gain sqrt(2)
    in the trunk, 0.01 on the policy head, 1 on the value head.

    Example::

        net = ImageActorCritic((4, 84, 84), action_size=6)
        logits, value = net(torch.zeros(3, 4, 84, 84, dtype=torch.uint8))  # (3, 6), (3,)
    """

    discrete = True

    def __init__(
        self, obs_shape: Sequence[int], action_size: int, features: int = 512, encoder: nn.Module | None = None
    ) -> None:
        super().__init__()
        self.trunk = NatureCNN(obs_shape, features, orthogonal=True) if encoder is None else encoder
        features = self.trunk.out_features
        self.actor = nn.Linear(features, action_size)
        self.critic = nn.Linear(features, 1)
        for head, gain in ((self.actor, 0.01), (self.critic, 1.0)):
            nn.init.orthogonal_(head.weight, gain=gain)
            nn.init.zeros_(head.bias)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.trunk(obs)
        return self.actor(h), self.critic(h).squeeze(-1)

    def distribution(self, head: torch.Tensor) -> torch.distributions.Distribution:
        """Categorical over the actor's logits."""
        return Categorical(logits=head, validate_args=False)


def compute_gae(
    reward: np.ndarray,
    value: np.ndarray,
    next_value: np.ndarray,
    done: np.ndarray,
    gamma: float,
    gae_lambda: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Generalized advantage estimation over a ``[T, N]`` rollout.

    ``next_value[t]`` is the value of the state after step ``t`` (used only where ``done[t]`` is
    False); ``done[t]`` cuts the recursion at episode ends. Truncation bootstrapping is folded into
    ``reward`` by the caller. Returns ``(advantages, returns = advantages + value)``.

    Example::

        adv, ret = compute_gae(r, v, v_next, done, gamma=0.99, gae_lambda=0.95)
    """
    adv = np.zeros_like(reward, dtype=np.float32)
    last = np.zeros(reward.shape[1:], dtype=np.float32)
    for t in reversed(range(len(reward))):
        nonterminal = 1.0 - done[t]
        delta = reward[t] + gamma * next_value[t] * nonterminal - value[t]
        last = delta + gamma * gae_lambda * nonterminal * last
        adv[t] = last
    return adv, adv + value


def clipped_surrogate(
    logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor, clip_ratio: float, mean: Any = torch.mean
) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO's clipped policy loss ``mean(max(-A * ratio, -A * clip(ratio, 1 - eps, 1 + eps)))`` and the ``ratio``
    ``exp(logp - old_logp)``; ``mean`` reduces the per-sample terms (default: their mean).

    Example::

        loss, ratio = clipped_surrogate(logp, old_logp, adv, clip_ratio=0.2)
    """
    ratio = (logp - old_logp).exp()
    return mean(torch.max(-adv * ratio, -adv * ratio.clamp(1.0 - clip_ratio, 1.0 + clip_ratio))), ratio


def minibatch_plan(plan: Plan, size: int, rank_samples: Sequence[int] | None) -> tuple[int, int, int | None]:
    """``(minibatches, local minibatch size, global minibatch size)`` for ``size`` samples on this rank.

    Without ``rank_samples`` (every rank's sample count), or with equal counts, the local minibatch is
    ``plan.rank_batch``, the ragged tail is dropped and the global size is None: the loss is the local
    minibatch's mean, averaged across ranks by the sync engine (today's update, bitwise). With unequal counts (a
    preempted straggler) every rank runs the same number of minibatches, ``max(1, total // plan.batch)`` (so the
    collectives match), each taking a share of its samples proportional to its count,
    ``min(count // minibatches, ceil(plan.batch * count / total))``; the loss is then ``N / M`` times the sum of
    the per-sample terms (``M``: the sum of the ranks' shares), so after the engine's average over N ranks the
    gradient is that of the mean over the global minibatch of ``M`` samples: the update one process makes on the
    union of the ranks' samples.

    Example::

        minibatch_plan(Plan(ranks=2, batch=64), 100, [100, 40])  # (2, 46, 65)
    """
    if rank_samples is None or len(set(int(n) for n in rank_samples)) <= 1:
        batch = max(1, min(int(plan.rank_batch), size))
        return size // batch, batch, None
    counts = [int(n) for n in rank_samples]
    if len(counts) != plan.ranks:
        raise ValueError(f"minibatch_plan: {len(counts)} rank sample counts for a plan over {plan.ranks} ranks")
    total, global_batch = sum(counts), int(plan.batch)
    n_minibatch = max(1, min(total // global_batch, min(counts)))  # at least one sample per rank and minibatch

    def share(n: int) -> int:
        return min(n // n_minibatch, -(-global_batch * n // total))

    return n_minibatch, share(size), sum(share(n) for n in counts)


@register_policy("ppo")
class PPOPolicy(Policy):
    """PPO for discrete (Categorical) or continuous (Gaussian) actions.

    Config: the keys listed below (generated from ``keys``).

    Example::

        cfg = PPOPolicy.default_config()
        policy = PPOPolicy(cfg, env.single_observation_space, env.single_action_space)
        actions, extras = policy.collect_action(obs, env_step=0)  # extras: logp, value
        stats = policy.learn(rollout)  # rollout from the collector, fields [T, N, ...]

    Reference tests: tests/policy/test_ppo.py (test_one_minibatch_is_the_clipped_loss_on_gae_by_hand: GAE, advantage
    normalization, clipped surrogate, value clip, entropy).
    """

    on_policy = True
    _state_attrs = ("model", "optimizer")
    pbt_keys = ("learn.learning_rate", "learn.entropy_weight", "learn.clip_ratio")

    keys = Policy.keys.plus(
        Key("model.hidden_sizes", [64, 64], "hidden layer sizes of the network(s)", "sizes"),
        Key("model.activation", "tanh", "activation of the hidden layers"),
        Key("model.log_std_init", 0.0, "initial Gaussian log-std for Box actions"),
        Key("model.obs_norm", False, "normalize vector observations with running statistics synchronized across ranks"),
        Key(
            "model.conv_channels",
            None,
            "on images: the three convolutions' channels (None: the Nature CNN's 32, 64, 64)",
        ),
        Key(
            "learn.batch_size",
            64,
            "minibatch, the run's total (each rank: batch_size / N; the ragged tail of a shuffled rollout is dropped)",
        ),
        Key("learn.learning_rate", 0.0003),
        Key("learn.epoch_per_collect", 10, "epochs over each rollout", ">= 1"),
        Key("learn.clip_ratio", 0.2, "policy ratio clip", "> 0"),
        Key("learn.value_clip_ratio", None, "value clip (None: off)", "> 0 or None"),
        Key("learn.value_weight", 0.5, "value loss weight"),
        Key("learn.entropy_weight", 0.0, "entropy bonus weight"),
        Key("learn.adv_norm", True, "normalize advantages with the statistics of the global minibatch (all ranks)"),
        Key("learn.grad_clip_norm", 0.5, "gradient norm clip, applied after the sync (None: off)", "> 0 or None"),
        Key(
            "learn.lr_decay_collects",
            None,
            "linear learning-rate decay over this many collects, then lr_decay_min_factor x learning_rate "
            "(None: constant)",
        ),
        Key("learn.lr_decay_min_factor", 0.0, "the learning rate's final factor with lr_decay_collects"),
        Key("learn.betas", [0.9, 0.999], "Adam's betas"),
        Key("learn.eps", 1e-05, "Adam's eps"),
        Key("collect.n_sample", 2048, "rollout length per iteration, the run's total (each rank: n_sample / N)"),
        Key("collect.discount_factor", 0.99, "gamma of GAE", "[0, 1]"),
        Key("collect.gae_lambda", 0.95, "lambda of GAE", "[0, 1]"),
        Key(
            "collect.preempt",
            False,
            "DD-PPO's straggler preemption: ranks slower than the others cut their rollout short",
            reader="pipeline",
        ),
        Key(
            "collect.preempt_fraction",
            0.6,
            "preempt once this fraction of the ranks finished a rollout (finished >= f N)",
            "(0, 1]",
            reader="pipeline",
        ),
        Key(
            "collect.preempt_min_share",
            0.25,
            "a preempted rank still collects at least this share of its rollout",
            "(0, 1]",
            reader="pipeline",
        ),
    )

    def __init__(
        self,
        cfg: Mapping[str, Any],
        obs_space: gym.Space,
        action_space: gym.Space,
        device: str | torch.device = "cpu",
    ) -> None:
        super().__init__(cfg, obs_space, action_space, device)
        self.discrete, action_size = action_info(action_space)
        m = self.cfg.model
        if is_conv_space(obs_space):  # shared conv trunk (Nature-CNN for images, MinAtar's for grids); uint8 in
            if not self.discrete:
                raise ValueError(f"PPO on image observations needs a Discrete action space, got {action_space}")
            encoder = conv_encoder(obs_space, orthogonal=True, channels=m.get("conv_channels"))
            self.model: nn.Module = ImageActorCritic(obs_space.shape, action_size, encoder=encoder).to(self.device)
        else:
            self.model = ActorCritic(
                obs_dim(obs_space), action_size, self.discrete, m.hidden_sizes, m.activation, m.log_std_init
            ).to(self.device)
        #: Rank-synchronized running observation statistics (``model.obs_norm``, vector observations): updated from
        #: collected observations, merged across ranks once at the end of each ``learn``, so a rollout is
        #: normalized with the same statistics when collected and when learned from; saved in checkpoints.
        self.obs_norm: RunningObsNorm | None = None
        if m.get("obs_norm", False) and not is_conv_space(obs_space):
            self.obs_norm = RunningObsNorm(obs_space.shape, group=self.sync_group).to(self.device)
            self._state_attrs = (*type(self)._state_attrs, "obs_norm")
        lc = self.cfg.learn
        betas = tuple(float(b) for b in lc.get("betas", (0.9, 0.999)))
        self.optimizer = self.make_optimizer(
            self.model.parameters(), lr=lc.learning_rate, eps=float(lc.get("eps", 1e-5)), betas=betas
        )
        self.train_model, self.optimizer = self.distribute(self.model, self.optimizer)
        if not self.discrete:
            self._low, self._high = action_space.low, action_space.high

    def _obs(self, obs: np.ndarray) -> torch.Tensor:
        x = obs_tensor(obs, self.obs_space, self.device)
        return x if self.obs_norm is None else self.obs_norm(x)

    def _log_prob(self, dist: torch.distributions.Distribution, action: torch.Tensor) -> torch.Tensor:
        logp = dist.log_prob(action)
        return logp if self.discrete else logp.sum(-1)

    @torch.no_grad()
    def collect_action(self, obs: np.ndarray, env_step: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        if self.obs_norm is not None:
            self.obs_norm.observe(obs)  # pending until the next learn's sync
        head, value = self.model(self._obs(obs))
        dist = self.model.distribution(head)
        action = dist.sample()
        extras = {"logp": self._log_prob(dist, action).cpu().numpy(), "value": value.cpu().numpy()}
        return action.cpu().numpy(), extras

    def to_env_action(self, action: np.ndarray) -> np.ndarray:
        # Gaussian samples are stored as drawn (their log-prob is what PPO needs) and clipped for the env.
        return action if self.discrete else np.clip(action, self._low, self._high)

    @torch.no_grad()
    def eval_action(self, obs: np.ndarray) -> np.ndarray:
        head, _ = self.model(self._obs(obs))
        action = head.argmax(dim=-1) if self.discrete else head
        return self.to_env_action(action.cpu().numpy())

    @torch.no_grad()
    def _value(self, obs: np.ndarray) -> np.ndarray:
        return self.model(self._obs(obs))[1].cpu().numpy()

    def advantages(self, rollout: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """GAE advantages and value targets ``[T, N]`` for a rollout from the collector."""
        cc = self.cfg.collect
        reward = rollout["reward"].astype(np.float32)  # a copy: the rollout stays as collected
        value = rollout["value"]
        done = rollout["terminated"] | rollout["truncated"]

        # A truncated episode did not end in the MDP: add gamma * V(final obs) to its last reward.
        truncated = rollout["truncated"]
        if truncated.any():
            reward[truncated] += cc.discount_factor * self._value(rollout["next_obs"][truncated])
        next_value = np.concatenate([value[1:], self._value(rollout["last_obs"])[None]], axis=0)
        return compute_gae(reward, value, next_value, done, cc.discount_factor, cc.gae_lambda)

    def global_minibatch_stats(self, adv: torch.Tensor, n: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean and (unbiased) std of each global minibatch of advantages, over every rank's part of it.

        ``adv`` is ``[epochs, minibatches, local batch]``; one allreduce of the packed sums and sums of
        squares (float64) serves every minibatch of the call. With N ranks each holding ``batch / N`` of a
        minibatch, the result equals the statistics one process computes on the whole minibatch. ``n`` is
        the global minibatch size (default: the local one times N; ranks' parts may differ under preemption).

        Example::

            mean, std = policy.global_minibatch_stats(adv_all[minibatches])  # each [epochs, minibatches]
        """
        a = adv.detach().double()
        packed = torch.stack([a.sum(-1), (a * a).sum(-1)], dim=-1)
        packed = packed.to(comm_device(self.sync_group, like=packed))
        allreduce(packed, op="sum", group=self.sync_group)
        packed = packed.to(adv.device)
        n = adv.shape[-1] * get_world_size(self.sync_group) if n is None else n
        mean = packed[..., 0] / n
        var = (packed[..., 1] - n * mean * mean) / max(n - 1, 1)
        return mean.to(adv.dtype), var.clamp(min=0.0).sqrt().to(adv.dtype)

    def _decay_learning_rate(self) -> None:
        """``learn.lr_decay_collects`` N: the learning rate of collect ``k`` (0, 1, ...) is ``learning_rate *
        max(1 - k * (1 - m) / N, m)``, ``m = learn.lr_decay_min_factor`` (DI-engine's linear ``lr_scheduler``). ``k``
        lives in the optimizer's param groups (``collects_done``), so a resumed run continues the schedule."""
        n = self.cfg.learn.get("lr_decay_collects")
        if not n or self.optimizer is None:
            return
        low = float(self.cfg.learn.get("lr_decay_min_factor", 0.0))
        for group in self.optimizer.param_groups:
            k = int(group.get("collects_done", 0))
            group["lr"] = float(self.cfg.learn.learning_rate) * max(1.0 - k * (1.0 - low) / n, low)
            group["collects_done"] = k + 1

    def minibatch_plan(self, size: int, rank_samples: Sequence[int] | None) -> tuple[int, int, int | None]:
        """:func:`minibatch_plan` with this policy's :attr:`plan` (``learn.batch_size`` over its ranks).

        Example::

            policy.minibatch_plan(100, [100, 40])  # learn.batch_size 64 over 2 ranks: (2, 46, 65)
        """
        return minibatch_plan(self.plan, size, rank_samples)

    def learn(self, rollout: Mapping[str, np.ndarray]) -> dict[str, torch.Tensor]:
        """All PPO epochs over one rollout (fields ``[T, N, ...]`` plus ``last_obs`` ``[N, ...]``).

        ``rollout["rank_samples"]`` (optional, set by the data-parallel loop under preemption): every
        rank's sample count, for :meth:`minibatch_plan`.
        """
        lc = self.cfg.learn
        self._decay_learning_rate()
        adv, ret = self.advantages(rollout)

        def flat(x: np.ndarray) -> torch.Tensor:  # [T, N, ...] -> [T*N, ...]
            return self.as_tensor(x.reshape(-1, *x.shape[2:]))

        obs = self._obs(rollout["obs"].reshape(-1, *rollout["obs"].shape[2:]))  # uint8 stays uint8 (images)
        old_logp, old_value = flat(rollout["logp"]), flat(rollout["value"])
        action = flat(rollout["action"]) if not self.discrete else flat(rollout["action"]).long()
        adv_all, ret_all = flat(adv), flat(ret)

        size = obs.shape[0]
        # the same number of minibatches on every rank (the ragged tail is dropped)
        n_minibatch, batch, global_batch = self.minibatch_plan(size, rollout.get("rank_samples"))
        if global_batch is None:
            mean = torch.mean
        else:  # this rank's part of the mean over the global minibatch, times N (the engine averages)
            scale = get_world_size(self.sync_group) / global_batch

            def mean(x: torch.Tensor) -> torch.Tensor:
                return x.sum() * scale

        # Every epoch's minibatch indices up front, so the advantage statistics of all of them cost one collective.
        orders = torch.stack([torch.randperm(size, device=self.device) for _ in range(lc.epoch_per_collect)])
        minibatches = orders[:, : n_minibatch * batch].reshape(lc.epoch_per_collect, n_minibatch, batch)
        if lc.adv_norm:
            adv_mean, adv_std = self.global_minibatch_stats(adv_all[minibatches], global_batch)
        stats: dict[str, torch.Tensor] = {}
        n_updates = 0
        for epoch in range(lc.epoch_per_collect):
            for mb in range(n_minibatch):
                idx = minibatches[epoch, mb]
                head, v = self.train_model(obs[idx])
                dist = self.model.distribution(head)
                logp = self._log_prob(dist, action[idx])
                entropy = dist.entropy() if self.discrete else dist.entropy().sum(-1)

                a = adv_all[idx]
                if lc.adv_norm:  # statistics of the global minibatch (all ranks' parts), as on one process
                    a = (a - adv_mean[epoch, mb]) / (adv_std[epoch, mb] + 1e-8)
                policy_loss, ratio = clipped_surrogate(logp, old_logp[idx], a, lc.clip_ratio, mean)

                r = ret_all[idx]
                if lc.value_clip_ratio is not None:
                    v_clipped = old_value[idx] + (v - old_value[idx]).clamp(-lc.value_clip_ratio, lc.value_clip_ratio)
                    value_loss = 0.5 * mean(torch.max((v - r) ** 2, (v_clipped - r) ** 2))
                else:
                    value_loss = 0.5 * mean((v - r) ** 2)

                loss = policy_loss + lc.value_weight * value_loss - lc.entropy_weight * mean(entropy)

                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()  # through the wrapped model: gradients are averaged across ranks
                if lc.grad_clip_norm is not None:
                    nn.utils.clip_grad_norm_(self.model.parameters(), lc.grad_clip_norm)
                self.optimizer.step()
                self.train_iter += 1
                n_updates += 1

                with torch.no_grad():  # device scalars, summed on the device: no host read per minibatch
                    step_stats = {
                        "loss": loss,
                        "policy_loss": policy_loss,
                        "value_loss": value_loss,
                        "entropy": entropy.mean(),
                        "approx_kl": ((ratio - 1) - (logp - old_logp[idx])).mean(),
                        "clip_frac": ((ratio - 1).abs() > lc.clip_ratio).float().mean(),
                    }
                for k, val in step_stats.items():
                    val = val.detach()
                    stats[k] = stats[k] + val if k in stats else val
        if self.obs_norm is not None:
            self.obs_norm.sync()  # one allreduce; the next rollout is collected with the merged statistics
        return {k: v / max(1, n_updates) for k, v in stats.items()}
