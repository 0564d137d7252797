"""The evaluator: greedy episodes on rank 0 only; the stop decision is broadcast to every rank."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from ding_dist.comm import broadcast, comm_device, get_rank
from ding_dist.envs.env import close_vec_env
from ding_dist.policy.base import Policy

__all__ = ["Evaluator"]


class Evaluator:
    """Run ``n_episode`` greedy episodes over a vector env and compare the mean return with ``stop_value``.

    Acting uses :meth:`Policy.eval_action`, which runs the raw (unwrapped) networks: evaluating
    never enters a collective, so the other ranks only wait in :meth:`evaluate_and_share`'s broadcast.
    Episodes are split evenly over the envs (env ``i`` runs ``n_episode // N`` episodes, one more for
    the first ``n_episode % N``), so short episodes are not over-represented. An env that crashed and was
    recreated (a :class:`~ding_dist.envs.restarting.RestartingVectorEnv`, ``make_vec_env(..., restarting=True)``)
    has its broken episode dropped, not counted; it runs a new one. Construct it with ``venv=None`` on ranks
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

    def evaluate(self) -> dict[str, Any]:
        """Greedy episodes on this process; returns ``mean_return, std_return, returns, lengths``."""
        if self.venv is None:
            raise RuntimeError("this evaluator has no env (it was built for a rank other than 0)")
        n = self.venv.num_envs
        quota = np.array([self.n_episode // n + (i < self.n_episode % n) for i in range(n)])
        obs, _ = self.venv.reset(seed=self._seeds)
        reset_state = getattr(self.policy, "reset_state", None)  # a recurrent policy (R2D2): its state per env
        if reset_state is not None:
            reset_state(None, eval=True)
        self._seeds = None  # later evaluations continue each env's RNG stream
        ep_return, ep_length = np.zeros(n), np.zeros(n, dtype=np.int64)
        returns: list[float] = []
        lengths: list[int] = []
        done_count = np.zeros(n, dtype=np.int64)
        while (done_count < quota).any():
            obs, reward, terminated, truncated, info = self.venv.step(self.policy.eval_action(obs))
            restarted = np.asarray(info.get("_env_restart", np.zeros(n, dtype=bool)), dtype=bool)
            if reset_state is not None:
                reset_state(terminated | truncated | restarted, eval=True)
            ep_return += reward
            ep_length += 1
            ep_return[restarted], ep_length[restarted] = 0.0, 0  # the broken episode is dropped: a new one runs
            for i in np.flatnonzero(terminated | truncated):
                if done_count[i] < quota[i]:
                    returns.append(float(ep_return[i]))
                    lengths.append(int(ep_length[i]))
                    done_count[i] += 1
                ep_return[i], ep_length[i] = 0.0, 0
        self.restarts = int(getattr(self.venv, "restarts", 0))
        return {
            "mean_return": float(np.mean(returns)),
            "std_return": float(np.std(returns)),
            "returns": returns,
            "lengths": lengths,
        }

    def evaluate_and_share(self, group: Any = None) -> tuple[float, bool]:
        """Collective: rank 0 evaluates, then broadcasts ``(mean_return, stop)`` to every rank of ``group``
        (default: the world; ``group`` must contain rank 0)."""
        packed = torch.zeros(2, dtype=torch.float64, device=comm_device(group))
        if get_rank() == 0:
            self.last_result = self.evaluate()  # rank 0 keeps the details (std, lengths) for its logs
            mean = self.last_result["mean_return"]
            stop = self.stop_value is not None and mean >= self.stop_value
            packed.copy_(torch.tensor([mean, float(stop)], dtype=torch.float64))
        broadcast(packed, src=0, group=group)
        mean, stop = packed.tolist()
        return float(mean), bool(stop)

    def close(self) -> None:
        """Close the vector env (if any)."""
        if self.venv is not None:
            close_vec_env(self.venv)
