"""PG: REINFORCE, the Monte-Carlo policy gradient (Williams 1992), DI-engine's variant.

A policy network only (no critic, no baseline): on complete episodes, returns ``G_t = r_t + gamma * G_{t+1}``
(``collect.discount_factor``; an episode ends at a termination or a time limit, as in DI-engine, where both are
``done``) and steps on them, ``loss = -mean(log pi(a_t|s_t) * G_t) - entropy_weight * mean(H)``, then
``learn.grad_clip_norm`` and Adam. With ``learn.batch_size`` None (our configs' default), one step on all the
samples; with an int ``B``, DI-engine 0.5.3's loop (``ding/policy/pg.py``, ``split_data_generator``): one pass over
a shuffled order of the ``L`` samples in ``ceil(L / B)`` minibatches of ``B``, the last one the order's final ``B``
(overlapping the one before it), e.g. 200 samples, ``B = 64``: 4 Adam steps (``L <= B``: one step on all of them,
where DI-engine's loop would take only the order's last ``2L - B``). See :func:`episode_minibatches`.

DI-engine collects ``collect.n_episode`` whole episodes per step. The collector here hands over rollouts of
``collect.n_sample`` env steps, so :meth:`PGPolicy.learn` keeps each env's unfinished episode for the next rollout
and takes its step once the ranks together hold at least ``collect.n_episode`` complete episodes (one allreduce of
two counts per call decides, so every rank steps together), on all of them. Between steps it returns the last
step's statistics. An episode still open at a step continues into the next (its first part acted with the weights
before that step); open episodes are not saved in checkpoints (a resumed run starts them afresh).

Distributed: ``learn.batch_size`` is the global minibatch. The samples of every rank, in the order of their env
columns (rank 0's columns first, each column's episodes in time order: one process's order), are shuffled with a
seed rank 0 draws (one allgather of three counts per call decides the step, the sizes and the seed), and each
rank takes its samples of every global minibatch; its loss is their sum times ``N / (global minibatch size)``, so
after the sync engine's average the gradient is that of the mean over the global minibatch: the steps one process
takes on the same episodes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical, Normal

from ding_dist.comm import allgather, comm_device, get_rank, get_world_size
from ding_dist.data.replay import to_device
from ding_dist.policy.base import Policy, action_info, mlp, obs_dim
from ding_dist.policy.registry import register_policy
from ding_dist.utils.keys import Key

__all__ = ["PGPolicy", "PolicyNetwork", "episode_minibatches", "episode_returns"]

_STATS = ("loss", "policy_loss", "entropy", "return_mean")


class PolicyNetwork(nn.Module):
    """``obs -> logits`` (Discrete) or Gaussian means with a learned state-independent log-std (Box).

    Example::

        net = PolicyNetwork(obs_size=4, action_size=2, discrete=True, hidden_sizes=[64])
        net.distribution(net(torch.zeros(3, 4))).sample().shape  # (3,)
    """

    def __init__(self, obs_size: int, action_size: int, discrete: bool, hidden_sizes: Sequence[int] = (64, 64),
                 activation: str = "relu") -> None:  # fmt: skip
        super().__init__()
        self.discrete = discrete
        self.net = mlp([obs_size, *hidden_sizes, action_size], activation)
        if not discrete:
            self.log_std = nn.Parameter(torch.zeros(action_size))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(obs)

    def distribution(self, head: torch.Tensor) -> torch.distributions.Distribution:
        """The action distribution for outputs ``head`` (logits or Gaussian means)."""
        if self.discrete:  # validate_args=False: no per-call checks (each a host read) on the update's path
            return Categorical(logits=head, validate_args=False)
        return Normal(head, self.log_std.exp().expand_as(head), validate_args=False)


def episode_returns(reward: np.ndarray, gamma: float) -> np.ndarray:
    """Discounted returns-to-go ``G_t = r_t + gamma * G_{t+1}`` of one complete episode (``G`` after its end: 0).

    Example::

        episode_returns(np.array([1.0, 1.0, 1.0]), gamma=0.5)  # [1.75, 1.5, 1.0]
    """
    out = np.zeros(len(reward), dtype=np.float32)
    g = 0.0
    for t in reversed(range(len(reward))):
        g = float(reward[t]) + gamma * g
        out[t] = g
    return out


def episode_minibatches(total: int, batch_size: int | None, seed: int) -> list[np.ndarray]:
    """The minibatches (sample indices) of one PG learn call on ``total`` samples: DI-engine 0.5.3's
    ``split_data_generator``. A shuffled order (``numpy`` generator of ``seed``); a minibatch of ``batch_size``
    from each multiple of ``batch_size``, the last one the order's final ``batch_size`` (so it overlaps the one
    before when ``batch_size`` does not divide ``total``). ``batch_size`` None or at least ``total``: one minibatch
    of every sample (in order).

    Example::

        [len(mb) for mb in episode_minibatches(200, 64, seed=0)]  # [64, 64, 64, 64]: the last one is order[136:]
    """
    if batch_size is None or batch_size >= total:
        return [np.arange(total)]
    order = np.random.default_rng(seed).permutation(total)
    return [order[min(start, total - batch_size) :][:batch_size] for start in range(0, total, batch_size)]


@register_policy("pg")
class PGPolicy(Policy):
    """REINFORCE for Discrete or Box action spaces (vector observations).

    Config: the keys listed below (generated from ``keys``). DI-engine's defaults, but for ``learn.batch_size``
    (DI-engine's 64; its files get it from the translator).

    Example::

        policy = PGPolicy(PGPolicy.default_config(), env.single_observation_space, env.single_action_space)
        stats = policy.learn(rollout)  # a step once n_episode episodes are complete

    Reference tests: tests/policy/test_pg.py (an episode across two rollouts: its return and loss by hand;
    DI-engine's minibatch loop written out).
    """

    on_policy = True
    _state_attrs = ("model", "optimizer")

    keys = Policy.keys.plus(
        Key("model.hidden_sizes", [128, 128, 64, 64], "hidden layer sizes of the network(s)", "sizes"),
        Key("model.activation", "relu", "activation of the hidden layers"),
        Key("learn.batch_size", None, "", ">= 1 or None"),
        Key("learn.entropy_weight", 0.01, "entropy bonus weight"),
        Key("learn.grad_clip_norm", 5.0, "gradient norm clip, applied after the sync (None: off)", "> 0 or None"),
        Key("collect.n_sample", 128),
        Key(
            "collect.n_episode",
            8,
            "PG, PPO-PG: complete episodes per learn call, the run's total (each rank: n_episode / N; learned on all "
            "of them)",
            ">= 1",
        ),
        Key("collect.discount_factor", 0.99, "gamma of GAE", "[0, 1]"),
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
        self.model = PolicyNetwork(obs_dim(obs_space), action_size, self.discrete, m.hidden_sizes, m.activation)
        self._init_model()
        self.model.to(self.device)
        self.optimizer = self.make_optimizer(self.model.parameters(), lr=self.cfg.learn.learning_rate)
        self.train_model, self.optimizer = self.distribute(self.model, self.optimizer)
        if not self.discrete:
            self._low, self._high = action_space.low, action_space.high
        #: env column -> its unfinished episode's (obs, action, reward, *step_fields) and its last next_obs
        self._open: dict[int, list[np.ndarray]] = {}
        self._done: list[tuple[np.ndarray, ...]] = []  # complete episodes: (obs, action, G, *step_fields)
        self._done_column: list[int] = []  # each complete episode's env column
        zero = torch.zeros((), device=self.device)  # the same keys from the first call on (ranks report alike)
        self._stats: dict[str, torch.Tensor] = dict.fromkeys(_STATS, zero)

    #: Rollout fields kept per step beyond obs, action and reward (a subclass's extras, e.g. PPO-PG's ``logp``).
    step_fields: tuple[str, ...] = ()

    def _init_model(self) -> None:
        """Re-initialize ``self.model`` before it is distributed (PG: the layers' default initialization)."""

    def _flat_obs(self, obs: np.ndarray) -> torch.Tensor:
        x = self.as_tensor(obs)
        return x.reshape(x.shape[0], -1)

    @torch.no_grad()
    def collect_action(self, obs: np.ndarray, env_step: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        return self.model.distribution(self.model(self._flat_obs(obs))).sample().cpu().numpy(), {}

    def to_env_action(self, action: np.ndarray) -> np.ndarray:
        return action if self.discrete else np.clip(action, self._low, self._high)

    @torch.no_grad()
    def eval_action(self, obs: np.ndarray) -> np.ndarray:
        head = self.model(self._flat_obs(obs))
        return self.to_env_action((head.argmax(-1) if self.discrete else head).cpu().numpy())

    def _close_episodes(self, rollout: Mapping[str, np.ndarray]) -> None:
        """Append the rollout to each env's open episode (checking that it continues it); move the ones that ended
        to the complete episodes."""
        gamma = self.cfg.collect.discount_factor
        done = np.asarray(rollout["terminated"]) | np.asarray(rollout["truncated"])
        for n in range(done.shape[1]):
            parts = [rollout[k][:, n] for k in ("obs", "action", "reward", *self.step_fields)]
            if n in self._open:
                *old_parts, last_next_obs = self._open.pop(n)
                if not np.array_equal(last_next_obs, parts[0][0]):  # e.g. chunks of several actors
                    raise ValueError(
                        "PG joins each env's episode across rollouts, and this rollout does not continue the last "
                        f"one (env {n}): PG needs consecutive rollouts of the same envs (the data-parallel mode)"
                    )
                parts = [np.concatenate([old, new]) for old, new in zip(old_parts, parts)]
            ends = np.flatnonzero(np.concatenate([np.zeros(len(parts[0]) - done.shape[0], bool), done[:, n]]))
            start = 0
            for end in ends:
                obs, action, reward, *rest = (p[start : end + 1] for p in parts)
                self._done.append((obs, action, episode_returns(reward, gamma), *rest))
                self._done_column.append(n)
                start = end + 1
            if start < len(parts[0]):
                self._open[n] = [p[start:] for p in parts] + [rollout["next_obs"][-1, n]]

    def _rank_counts(self, extra: int = 0) -> tuple[int, list[int], int]:
        """The ranks' complete episodes together, every rank's sample count and rank 0's ``extra`` (one allgather)."""
        mine = torch.tensor([len(self._done), sum(len(e[2]) for e in self._done), extra], dtype=torch.int64)
        gathered = allgather(mine.to(comm_device(self.sync_group, like=mine)), group=self.sync_group)
        counts = torch.stack([c.cpu() for c in gathered])
        return int(counts[:, 0].sum()), [int(n) for n in counts[:, 1]], int(counts[0, 2])

    def _take_episodes(self) -> list[tuple[np.ndarray, ...]]:
        """The complete episodes in env-column order (each column's in time order: one process's order over the
        ranks' columns), emptied."""
        order = sorted(range(len(self._done)), key=self._done_column.__getitem__)  # stable: time order kept
        episodes = [self._done[i] for i in order]
        self._done, self._done_column = [], []
        return episodes

    def _logp_entropy(self, obs: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-probabilities of ``action`` and entropies under the wrapped model (its gradients are synchronized)."""
        dist = self.model.distribution(self.train_model(obs))
        if self.discrete:
            return dist.log_prob(action), dist.entropy()
        return dist.log_prob(action).sum(-1), dist.entropy().sum(-1)

    def _step(self, loss: torch.Tensor) -> None:
        """One optimizer step on ``loss`` (gradients averaged across ranks in ``backward``), clipped by
        ``learn.grad_clip_norm``."""
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.cfg.learn.grad_clip_norm is not None:
            nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.learn.grad_clip_norm)
        self.optimizer.step()
        self.train_iter += 1

    def learn(self, rollout: Mapping[str, np.ndarray]) -> dict[str, torch.Tensor]:
        """Take in one rollout (fields ``[T, N, ...]``, the one after the last); once the ranks hold at least
        ``collect.n_episode`` complete episodes together, one pass of REINFORCE steps over all of them (one step, or
        minibatches of ``learn.batch_size``: :func:`episode_minibatches`)."""
        lc = self.cfg.learn
        self._close_episodes(rollout)
        world, rank = get_world_size(self.sync_group), get_rank(self.sync_group)
        seed = 0 if lc.batch_size is None else int(torch.randint(0, 2**62, ()))  # rank 0's orders the minibatches
        episodes, rank_samples, seed = self._rank_counts(seed)
        if episodes < int(self.cfg.collect.n_episode):  # the run's total, over every rank
            return self._stats
        done = self._take_episodes()

        def cat(i: int) -> np.ndarray:
            return np.concatenate([e[i] for e in done]) if done else np.zeros((0,))

        obs = self.as_tensor(cat(0).reshape(-1, *self.obs_space.shape)).reshape(-1, obs_dim(self.obs_space))
        ret = self.as_tensor(cat(2))
        action = self.as_tensor(cat(1).reshape(len(ret), *self.action_space.shape))
        action = action.long() if self.discrete else action
        offset, size = sum(rank_samples[:rank]), rank_samples[rank]
        batch = None if lc.batch_size is None else int(lc.batch_size)  # the run's minibatch, over every rank
        plan = []  # (this rank's indices, its loss scale) per minibatch: on the host once per call
        for idx in episode_minibatches(sum(rank_samples), batch, seed):
            mine = idx[(idx >= offset) & (idx < offset + size)] - offset
            plan.append((to_device(torch.as_tensor(mine), self.device), world / len(idx)))

        stats = dict.fromkeys(_STATS, torch.zeros((), device=self.device))
        for idx, scale in plan:  # this rank's part of the mean over the global minibatch, times N (engine averages)
            logp, entropy = self._logp_entropy(obs[idx], action[idx])
            policy_loss = -(logp * ret[idx]).sum() * scale
            entropy_mean = entropy.sum() * scale
            loss = policy_loss - lc.entropy_weight * entropy_mean
            self._step(loss)
            for k, v in (("loss", loss), ("policy_loss", policy_loss), ("entropy", entropy_mean)):
                stats[k] = stats[k] + v.detach() / len(plan)
        stats["return_mean"] = ret.mean() if ret.numel() else torch.zeros((), device=self.device)
        self._stats = stats
        return stats
