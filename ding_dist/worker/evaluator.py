"""The evaluator: greedy episodes on rank 0 only; the stop decision is broadcast to every rank."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from ding_dist.comm import broadcast, comm_device, get_global_rank, get_rank
from ding_dist.envs.env import close_vec_env, reset_one, resets_one
from ding_dist.envs.seeding import episode_seed
from ding_dist.policy.base import Policy

__all__ = ["Evaluator"]

logger = logging.getLogger(__name__)


def _put_row(batch: Any, i: int, one: Any) -> None:
    """Write a batch of one (arrays, dicts and tuples of them) into row ``i`` of ``batch``."""
    if isinstance(batch, dict):
        for k in batch:
            _put_row(batch[k], i, one[k])
    elif isinstance(batch, tuple):
        for b, o in zip(batch, one):
            _put_row(b, i, o)
    else:
        batch[i] = one[0]


class Evaluator:
    """Run ``n_episode`` greedy episodes over a vector env and compare the mean return with ``stop_value``.

    Acting uses :meth:`Policy.eval_action`, which runs the raw (unwrapped) networks: evaluating
    never enters a collective, so the other ranks only wait in :meth:`evaluate_and_share`'s broadcast.
    Episodes are split evenly over the envs (env ``i`` runs ``n_episode // N`` episodes, one more for
    the first ``n_episode % N``), so short episodes are not over-represented. Episode ``k`` of env ``i`` starts
    from ``episode_seed(seeds[i], k)`` (counting over the evaluator's life, so each evaluation sees new episodes). An
    env that crashed and was recreated (a :class:`~ding_dist.envs.restarting.RestartingVectorEnv`,
    ``make_vec_env(..., restarting=True)``) runs the episode the crash cut short again from its seed, so the
    counted episodes are the ones a run without crashes counts (a warning says how many were run again). The result
    lists the episodes in their planned order (each env's first episode, env by env, then each env's second, ...),
    not in the order they ended, with each one's reset seed (``seeds``), so an episode can be played again from its
    seed (``ding-dist eval --video`` records the evaluated episodes so). Construct it with ``venv=None`` on ranks
    other than 0.

    Example::

        venv = make_vec_env({"id": "CartPole-v1"}, 5)
        ev = Evaluator(venv, policy, n_episode=5, seeds=env_seeds(0, 0, "evaluator", 5))
        result = ev.evaluate()  # {"mean_return": ..., "std_return": ..., "returns": [...], ...}
    """

    def __init__(
        self,
        venv: gym.vector.VectorEnv | None,
        policy: Policy,
        n_episode: int,
        seeds: Sequence[int] | None = None,
        stop_value: float | None = None,
    ) -> None:
        if n_episode < 1:
            raise ValueError(f"n_episode must be >= 1, got {n_episode}")
        self.venv = venv
        self.policy = policy
        self.n_episode = int(n_episode)
        self.stop_value = stop_value
        self._seeds = list(seeds) if seeds is not None else None
        #: Rank 0: the last :meth:`evaluate_and_share` result (``evaluate``'s dict); None elsewhere.
        self.last_result: dict[str, Any] | None = None
        #: Evaluation envs recreated after a crash so far (a guarded venv; 0 otherwise).
        self.restarts = 0
        self._started: list[int] | None = None  # per env: episodes started before the one it runs now

    def evaluate(self) -> dict[str, Any]:
        """Greedy episodes on this process; returns ``mean_return, std_return, returns, lengths, seeds``: the
        episodes in their planned order, ``seeds`` their reset seeds (None each when the vector env cannot reset one
        env from a seed of its own, e.g. envpool: it runs its own stream)."""
        if self.venv is None:
            raise RuntimeError("this evaluator has no env (it was built for a rank other than 0)")
        n = self.venv.num_envs
        quota = np.array([self.n_episode // n + (i < self.n_episode % n) for i in range(n)])
        if self._started is None:
            self._started = [0] * n
        # Each episode starts from a seed of its own (episode_seed), so one that an env crash cut short runs again
        # from its start: crashes never change which episodes are counted (dropping them would favour episodes
        # short enough to escape a crash). A vector env that cannot reset one env (envpool) runs its own stream.
        seeded = self._seeds is not None and resets_one(self.venv)
        obs, info = self.venv.reset(seed=[self._episode_seed(i) for i in range(n)] if seeded else self._seeds)
        reset_state = getattr(self.policy, "reset_state", None)  # a recurrent policy (R2D2): its state per env
        if reset_state is not None:
            reset_state(None, eval=True)
        if not seeded:
            self._seeds = None  # later evaluations continue each env's RNG stream
        ep_return, ep_length = np.zeros(n), np.zeros(n, dtype=np.int64)
        episodes: list[tuple[int, int, float, int, int | None]] = []  # (k-th of its env, env, return, length, seed)
        done_count = np.zeros(n, dtype=np.int64)
        reruns = 0
        restarted = self._restarted(info, n)
        while (done_count < quota).any():
            if seeded and restarted.any():  # crashed (also in a reset): the same episode again, from its seed
                reruns += int(restarted.sum())
                obs = self._restart_episodes(obs, restarted)
            obs, reward, terminated, truncated, info = self.venv.step(self.policy.eval_action(obs))
            restarted = self._restarted(info, n)
            if reset_state is not None:
                reset_state(terminated | truncated | restarted, eval=True)
            ep_return += reward
            ep_length += 1
            ep_return[restarted], ep_length[restarted] = 0.0, 0  # the broken episode is not counted
            ended = terminated | truncated
            for i in np.flatnonzero(ended):
                if done_count[i] < quota[i]:
                    seed = self._episode_seed(i) if seeded else None
                    episodes.append((int(done_count[i]), int(i), float(ep_return[i]), int(ep_length[i]), seed))
                    done_count[i] += 1
                    self._started[i] += 1  # its next episode, in this evaluation or the next one
                ep_return[i], ep_length[i] = 0.0, 0
            if seeded and ended.any():
                obs = self._restart_episodes(obs, ended & (done_count < quota))
        self.restarts = int(getattr(self.venv, "restarts", 0))
        if reruns:
            logger.warning("evaluation: %d episode(s) cut short by an env crash were run again from their start "
                           "(same seed): the mean counts the %d planned episodes", reruns, self.n_episode)  # fmt: skip
        episodes.sort(key=lambda e: e[:2])  # planned order: not the shortest episodes first
        returns = [e[2] for e in episodes]
        return {
            "mean_return": float(np.mean(returns)),
            "std_return": float(np.std(returns)),
            "returns": returns,
            "lengths": [e[3] for e in episodes],
            "seeds": [e[4] for e in episodes],
        }

    def _episode_seed(self, i: int) -> int | None:
        """The seed of the episode env ``i`` runs now."""
        return episode_seed(None if self._seeds is None else self._seeds[i], self._started[i])

    @staticmethod
    def _restarted(info: dict, n: int) -> np.ndarray:
        return np.asarray(info.get("_env_restart", np.zeros(n, dtype=bool)), dtype=bool)

    def _restart_episodes(self, obs: Any, envs: np.ndarray) -> Any:
        """Reset each env of ``envs`` from the seed of the episode it runs now."""
        for i in np.flatnonzero(envs):
            _put_row(obs, i, reset_one(self.venv, int(i), self._episode_seed(i)))
        return obs

    def evaluate_and_share(self, group: Any = None) -> tuple[float, bool]:
        """Collective: the first rank of ``group`` (default: the world) evaluates, then broadcasts
        ``(mean_return, stop)`` to every rank of ``group``."""
        packed = torch.zeros(2, dtype=torch.float64, device=comm_device(group))
        if get_rank(group) == 0:
            self.last_result = self.evaluate()  # rank 0 keeps the details (std, lengths) for its logs
            mean = self.last_result["mean_return"]
            stop = self.stop_value is not None and mean >= self.stop_value
            packed.copy_(torch.tensor([mean, float(stop)], dtype=torch.float64))
        broadcast(packed, src=get_global_rank(group, 0), group=group)
        mean, stop = packed.tolist()
        return float(mean), bool(stop)

    def close(self) -> None:
        """Close the vector env (if any)."""
        if self.venv is not None:
            close_vec_env(self.venv)
