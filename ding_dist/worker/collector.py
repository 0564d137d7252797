"""The collector (actor): steps one rank's vector env with the policy's exploratory actions."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from ding_dist.envs.env import close_vec_env
from ding_dist.envs.grouped import GroupedVectorEnv
from ding_dist.policy.base import Policy

__all__ = ["Collector", "RolloutPreemption"]

logger = logging.getLogger(__name__)


class RolloutPreemption:
    """DD-PPO's preemption of stragglers: once ``fraction`` of the ranks have finished their rollout, the
    others stop as soon as they have at least ``min_share`` of it.

    The ranks share one counter per rollout in the process group's TCP store (``store.add``): a rank that
    finishes its rollout adds 1; a rank still collecting reads it (``add(key, 0)``, one round trip to the
    store) every :attr:`check_every` vector steps once it holds ``min_share`` of its steps, so the hot path
    gains no collective. A rank stops when ``finished >= fraction * world`` (DD-PPO's test: with 2 ranks
    the default 0.6 waits for both, i.e. never preempts; 0.5 lets the first rank preempt the other). Every
    rank creates its preemption in the same order and calls :meth:`begin` once per rollout, so the keys
    agree; the previous rollout's key is deleted by rank 0 at the next :meth:`begin` (every rank has left
    that rollout by then: the data-parallel loop's allreduce of the rollout lengths separates them; without
    one, a late read finds a fresh zero counter and the rank is merely not preempted). A world of one never
    preempts.

    Example::

        pre = RolloutPreemption(fraction=0.5, min_share=0.25)
        rollout = collector.collect(64, env_step, preemption=pre)   # 16 to 64 vector steps
    """

    #: vector steps between two reads of the counter
    check_every = 4
    _instances = 0

    def __init__(self, fraction: float, min_share: float, store: Any = None) -> None:
        from ding_dist.comm import get_rank, get_world_size

        if not 0 < fraction <= 1 or not 0 < min_share <= 1:
            raise ValueError(f"fraction and min_share must be in (0, 1], got {fraction} and {min_share}")
        self.world, self.rank = get_world_size(), get_rank()
        self.needed = fraction * self.world
        self.min_share = min_share
        self.store = store
        if self.store is None and self.world > 1:
            import torch.distributed as dist

            self.store = dist.distributed_c10d._get_default_store()
        type(self)._instances += 1
        self._prefix = f"ding_dist/preempt/{type(self)._instances}/"
        self._round = 0
        self.key = ""

    @property
    def active(self) -> bool:
        """False in a world of one (nothing to wait for)."""
        return self.store is not None

    def begin(self) -> None:
        """Start a new rollout (every rank, once per rollout, before collecting)."""
        if self.active and self.rank == 0 and self._round > 0:
            self.store.delete_key(self.key)
        self._round += 1
        self.key = f"{self._prefix}{self._round}"

    def min_steps(self, n_steps: int) -> int:
        """The fewest vector steps of a preempted rollout of ``n_steps``."""
        return max(1, math.ceil(self.min_share * n_steps))

    def preempted(self, done: int, n_steps: int) -> bool:
        """True when this rank, ``done`` of ``n_steps`` vector steps in, should stop."""
        if not self.active or done >= n_steps or done < self.min_steps(n_steps):
            return False
        if (done - self.min_steps(n_steps)) % self.check_every:
            return False
        return self.store.add(self.key, 0) >= self.needed

    def finished(self) -> None:
        """This rank collected its whole rollout."""
        if self.active:
            self.store.add(self.key, 1)


class Collector:
    """Collect fixed-length rollouts from a SAME_STEP-autoreset vector env (see :mod:`ding_dist.envs`).

    Each :meth:`collect` call returns a dict of arrays shaped ``[T, num_envs, ...]``:
    ``obs, action, reward, next_obs, terminated, truncated`` plus the policy's extras (PPO: ``logp``,
    ``value``), and ``last_obs`` ``[num_envs, ...]`` (the observation the next call starts from).
    ``next_obs`` is the real successor observation: for a finished episode, the final observation
    from ``info["final_obs"]`` rather than the reset one. Finished episodes are counted in
    :attr:`episode_returns` / :attr:`episode_lengths` until :meth:`pop_episodes` takes them.

    Double-buffered sampling: on a :class:`~ding_dist.envs.grouped.GroupedVectorEnv` (``env.sample_groups`` G > 1)
    the policy computes group ``g + 1``'s actions while group ``g`` steps (in the env workers, with the async
    manager); each env sees the same observations and actions as with one group, and the rollout keeps the layout
    above, in env order. A policy with ``recurrent = True`` (per-env recurrent state over all envs) and
    non-array observations use the groups as one batch (one log line says so).

    Example::

        venv = make_vec_env({"id": "CartPole-v1"}, num_envs=4)
        collector = Collector(venv, policy, seeds=env_seeds(0, 0, "collector", 4))
        rollout = collector.collect(n_steps=16, env_step=0)  # 16 vector steps = 64 transitions
    """

    def __init__(self, venv: gym.vector.VectorEnv, policy: Policy, seeds: Sequence[int]) -> None:
        if len(seeds) != venv.num_envs:
            raise ValueError(f"need one seed per env: {venv.num_envs} envs, got {len(seeds)} seeds")
        self.venv = venv
        self.policy = policy
        self.num_envs = venv.num_envs
        self.obs, _ = venv.reset(seed=list(seeds))
        self._ep_return = np.zeros(self.num_envs, dtype=np.float64)
        self._ep_length = np.zeros(self.num_envs, dtype=np.int64)
        self.episode_returns: list[float] = []
        self.episode_lengths: list[int] = []
        # Envs that end an episode at each lost life and clip rewards (Atari training) report the real game's
        # return and length in info["episode"] (gymnasium's RecordEpisodeStatistics): log those instead.
        self._game_stats = bool((getattr(venv, "metadata", None) or {}).get("ding_dist.episode_statistics"))
        self._info: dict = {}
        import torch  # acting runs in inference mode (the policy's own no_grad stays inside it)

        self._inference_mode = torch.inference_mode
        self.groups = len(venv.group_slices) if isinstance(venv, GroupedVectorEnv) else 1
        recurrent = getattr(policy, "recurrent", False) or hasattr(policy, "reset_state")
        if self.groups > 1 and (recurrent or not isinstance(self.obs, np.ndarray)):
            why = "a recurrent policy" if recurrent else "non-array observations"
            logger.info("env.sample_groups=%d: %s acts on all envs at once (one group)", self.groups, why)
            self.groups = 1

    def collect(
        self, n_steps: int, env_step: int, preemption: RolloutPreemption | None = None
    ) -> dict[str, np.ndarray]:
        """Run ``n_steps`` vector steps (``n_steps * num_envs`` transitions).

        ``env_step`` is the global env-step counter at the start (drives exploration schedules). With
        ``preemption``, a straggler may stop early (at least ``min_share`` of ``n_steps``): the rollout is
        then shorter, and ``last_obs`` is the observation at the cut (GAE bootstraps from its value).
        """
        if n_steps < 1:
            raise ValueError(f"n_steps must be >= 1, got {n_steps}")
        if preemption is not None:
            preemption.begin()
        if self.groups > 1:
            return self._collect_grouped(n_steps, env_step, preemption)
        out: dict[str, np.ndarray] = {}  # [n_steps, num_envs, ...] each, made at the first step
        stop = n_steps
        for t in range(n_steps):
            if preemption is not None and preemption.preempted(t, n_steps):
                stop = t
                break
            action, extras = self._act(self.obs, env_step)
            next_obs, reward, terminated, truncated, info = self.venv.step(self.policy.to_env_action(action))
            real_next = next_obs
            if "_final_obs" in info and info["_final_obs"].any():
                real_next = next_obs.copy()
                for i in np.flatnonzero(info["_final_obs"]):
                    real_next[i] = info["final_obs"][i]
            if "_env_restart" in info and info["_env_restart"].any():
                self.obs, (action, extras, next_obs, reward, terminated, truncated, real_next) = self._replace_broken(
                    np.flatnonzero(info["_env_restart"]), self._row(out, t - 1), env_step, self.obs,
                    [action, extras, next_obs, reward, terminated, truncated, real_next],
                )  # fmt: skip
            terminated, truncated = np.asarray(terminated, dtype=bool), np.asarray(truncated, dtype=bool)
            self._record(out, t, n_steps, slice(None), self.obs, action, reward, real_next, terminated, truncated,
                         extras)  # fmt: skip
            self._info = info
            self._track_episodes(reward, terminated | truncated)
            if hasattr(self.policy, "reset_state"):  # a recurrent policy (R2D2): keep its state, zero ended slots
                self.policy.reset_state(np.asarray(terminated | truncated))
            self.obs = next_obs
        else:
            if preemption is not None:
                preemption.finished()
        if stop < n_steps:
            out = {key: value[:stop] for key, value in out.items()}
        out["last_obs"] = self.obs.copy()
        return out

    def _act(self, obs: Any, env_step: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """The policy's exploratory actions for ``obs``, without autograd's bookkeeping (inference mode)."""
        with self._inference_mode():
            return self.policy.collect_action(obs, env_step)

    def _record(self, out: dict[str, np.ndarray], t: int, n_steps: int, sl: slice, obs: Any, action: Any,
                reward: Any, next_obs: Any, terminated: np.ndarray, truncated: np.ndarray,
                extras: dict[str, Any]) -> None:  # fmt: skip
        """Write step ``t`` of envs ``sl`` into the rollout ``out``; each field's ``[n_steps, num_envs, ...]`` array
        is made at its first write, with the dtype of what is written (rewards: float32), and promoted as
        ``np.stack`` would if a later step writes a wider dtype."""
        step = {"obs": obs, "action": action, "reward": np.asarray(reward, dtype=np.float32), "next_obs": next_obs,
                "terminated": terminated, "truncated": truncated, **extras}  # fmt: skip
        for key, value in step.items():
            value = np.asarray(value)
            field = out.get(key)
            if field is None:
                field = out[key] = np.empty((n_steps, self.num_envs, *value.shape[1:]), dtype=value.dtype)
            elif field.dtype != value.dtype and np.result_type(field, value) != field.dtype:
                field = out[key] = field.astype(np.result_type(field, value))
            field[t, sl] = value

    def _replace_broken(self, broken: np.ndarray, prev: dict[str, np.ndarray] | None, env_step: int,
                        obs: np.ndarray, step: list[Any], lo: int = 0) -> tuple[np.ndarray, list[Any]]:  # fmt: skip
        """Drop the episodes of the ``broken`` envs (recreated by a
        :class:`~ding_dist.envs.restarting.RestartingVectorEnv` this step): their returns are not counted, their
        last real step of this rollout (``prev``: the previous step's ``terminated``/``truncated`` of all envs) ends
        as truncated (bootstrapped like a time limit), and the crashed step's slot holds the new episode's first real
        transition instead (the policy acts on the reset observation). ``obs`` and ``step`` are the envs from ``lo``
        on (a group of a :class:`~ding_dist.envs.grouped.GroupedVectorEnv`; ``broken`` counts from ``lo``); returns
        the new ``obs`` and ``step``."""
        action, extras, next_obs, reward, terminated, truncated, real_next = step
        action, next_obs, real_next = np.array(action), np.array(next_obs), np.array(real_next)
        reward, terminated, truncated = np.array(reward), np.array(terminated), np.array(truncated)
        extras = {k: np.array(v) for k, v in extras.items()}
        obs = np.array(obs)
        for i in broken:
            self._ep_return[lo + i], self._ep_length[lo + i] = 0.0, 0
            if prev is not None and not (prev["terminated"][lo + i] or prev["truncated"][lo + i]):
                prev["truncated"][lo + i] = True
            restarted = True
            while restarted:  # the new env may crash at once too: the venv's restart limit ends this loop
                obs[i] = next_obs[i]
                a, ex = self._act(obs[i : i + 1], env_step)
                o, r, te, tr, inf = self.venv.step_one(lo + int(i), self.policy.to_env_action(a))
                restarted = bool(inf.get("_env_restart", [False])[0])
                action[i], reward[i], terminated[i], truncated[i], next_obs[i] = a[0], r[0], te[0], tr[0], o[0]
                for k, v in ex.items():
                    extras[k][i] = v[0]
                real_next[i] = inf["final_obs"][0] if inf.get("_final_obs", [False])[0] else o[0]
        return obs, [action, extras, next_obs, reward, terminated, truncated, real_next]

    def _collect_grouped(
        self, n_steps: int, env_step: int, preemption: RolloutPreemption | None
    ) -> dict[str, np.ndarray]:
        """:meth:`collect` with double-buffered sampling: group ``g``'s step is in flight while the policy computes
        group ``g + 1``'s actions. Every group's step ``t`` is waited for before step ``t + 1`` of any group is
        recorded, and nothing is in flight when this returns (new weights apply from the next call on)."""
        venv: GroupedVectorEnv = self.venv  # type: ignore[assignment]
        slices = venv.group_slices
        obs = [self.obs[sl] for sl in slices]  # each group's current observations
        acted: list[Any] = [None] * len(slices)
        if preemption is not None and preemption.preempted(0, n_steps):  # as the one-group loop asks (never true)
            return {"last_obs": self.obs.copy()}

        def launch(g: int) -> None:  # the policy acts for group g, whose envs start stepping
            action, extras = self._act(obs[g], env_step)
            venv.step_async(g, self.policy.to_env_action(action))
            acted[g] = (obs[g], action, extras)

        for g in range(len(slices)):
            launch(g)
        out: dict[str, np.ndarray] = {}  # [n_steps, num_envs, ...] each, made at the first group's first step
        stop = n_steps
        for t in range(n_steps):
            for g, sl in enumerate(slices):
                group_obs, action, extras = acted[g]
                next_obs, reward, terminated, truncated, info = venv.step_wait(g)
                real_next = next_obs
                if "_final_obs" in info and info["_final_obs"].any():
                    real_next = next_obs.copy()
                    for i in np.flatnonzero(info["_final_obs"]):
                        real_next[i] = info["final_obs"][i]
                if "_env_restart" in info and info["_env_restart"].any():
                    group_obs, (action, extras, next_obs, reward, terminated, truncated, real_next) = (
                        self._replace_broken(
                            np.flatnonzero(info["_env_restart"]), self._row(out, t - 1), env_step, group_obs,
                            [action, extras, next_obs, reward, terminated, truncated, real_next], lo=sl.start,
                        )
                    )  # fmt: skip
                terminated, truncated = np.asarray(terminated, dtype=bool), np.asarray(truncated, dtype=bool)
                self._record(out, t, n_steps, sl, group_obs, action, reward, real_next, terminated, truncated, extras)
                self._track(reward, terminated | truncated, info, sl.start)
                obs[g] = next_obs
                if g == 0 and t + 1 < n_steps and preemption is not None and preemption.preempted(t + 1, n_steps):
                    stop = t + 1
                if t + 1 < stop:
                    launch(g)
            if t + 1 == stop:
                break
        if stop == n_steps and preemption is not None:
            preemption.finished()
        out = {key: value[:stop] for key, value in out.items()}
        self.obs = np.concatenate(obs)
        out["last_obs"] = self.obs.copy()
        return out

    @staticmethod
    def _row(out: dict[str, np.ndarray], t: int) -> dict[str, np.ndarray] | None:
        """Step ``t``'s ``terminated`` and ``truncated`` of all envs (views into ``out``); None before step 0."""
        return {k: out[k][t] for k in ("terminated", "truncated")} if t >= 0 else None

    def _track_episodes(self, reward: np.ndarray, done: np.ndarray) -> None:
        self._track(reward, done, self._info, 0)

    def _track(self, reward: np.ndarray, done: np.ndarray, info: dict, lo: int) -> None:
        """Count the episodes that ended in envs ``lo`` to ``lo + len(done) - 1`` (``info``: their vector info)."""
        ep_return, ep_length = self._ep_return[lo : lo + len(done)], self._ep_length[lo : lo + len(done)]  # views
        ep_return += reward
        ep_length += 1
        if self._game_stats:  # whole games, unclipped, as the env's statistics wrapper counted them
            # SAME_STEP autoreset: the finished game's info is in info["final_info"] (info is the reset's)
            info = info.get("final_info", info)
            if "episode" in info:
                for i in np.flatnonzero(info["_episode"]):
                    self.episode_returns.append(float(info["episode"]["r"][i]))
                    self.episode_lengths.append(int(info["episode"]["l"][i]))
        else:
            for i in np.flatnonzero(done):
                self.episode_returns.append(float(ep_return[i]))
                self.episode_lengths.append(int(ep_length[i]))
        ep_return[done] = 0.0
        ep_length[done] = 0

    @property
    def restarts(self) -> int:
        """Collector envs recreated after a crash so far (logged as ``env/restarts``)."""
        return int(getattr(self.venv, "restarts", 0))

    def pop_episodes(self) -> tuple[list[float], list[int]]:
        """Returns and lengths of episodes finished since the last call (and forget them)."""
        out = (self.episode_returns, self.episode_lengths)
        self.episode_returns, self.episode_lengths = [], []
        return out

    def close(self) -> None:
        """Close the vector env."""
        close_vec_env(self.venv)
