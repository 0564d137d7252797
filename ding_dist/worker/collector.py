"""The collector (actor): steps one rank's vector env with the policy's exploratory actions."""

from __future__ import annotations

from collections.abc import Sequence

import gymnasium as gym
import numpy as np

from ding_dist.policy.base import Policy

__all__ = ["Collector"]


class Collector:
    """Collect fixed-length rollouts from a SAME_STEP-autoreset vector env (see :mod:`ding_dist.envs`).

    Each :meth:`collect` call returns a dict of arrays shaped ``[T, num_envs, ...]``:
    ``obs, action, reward, next_obs, terminated, truncated`` plus the policy's extras (PPO: ``logp``,
    ``value``), and ``last_obs`` ``[num_envs, ...]`` (the observation the next call starts from).
    ``next_obs`` is the real successor observation: for a finished episode, the final observation
    from ``info["final_obs"]`` rather than the reset one. Finished episodes are counted in
    :attr:`episode_returns` / :attr:`episode_lengths` until :meth:`pop_episodes` takes them.

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

    def collect(self, n_steps: int, env_step: int) -> dict[str, np.ndarray]:
        """Run ``n_steps`` vector steps (``n_steps * num_envs`` transitions).

        ``env_step`` is the global env-step counter at the start (drives exploration schedules).
        """
        if n_steps < 1:
            raise ValueError(f"n_steps must be >= 1, got {n_steps}")
        rows: dict[str, list[np.ndarray]] = {}
        for _ in range(n_steps):
            action, extras = self.policy.collect_action(self.obs, env_step)
            next_obs, reward, terminated, truncated, info = self.venv.step(self.policy.to_env_action(action))
            real_next = next_obs
            if "_final_obs" in info and info["_final_obs"].any():
                real_next = next_obs.copy()
                for i in np.flatnonzero(info["_final_obs"]):
                    real_next[i] = info["final_obs"][i]
            step = {
                "obs": self.obs,
                "action": action,
                "reward": np.asarray(reward, dtype=np.float32),
                "next_obs": real_next,
                "terminated": np.asarray(terminated, dtype=bool),
                "truncated": np.asarray(truncated, dtype=bool),
                **extras,
            }
            for key, value in step.items():
                rows.setdefault(key, []).append(value)
            self._info = info
            self._track_episodes(reward, terminated | truncated)
            self.obs = next_obs
        out = {key: np.stack(values) for key, values in rows.items()}
        out["last_obs"] = self.obs.copy()
        return out

    def _track_episodes(self, reward: np.ndarray, done: np.ndarray) -> None:
        self._ep_return += reward
        self._ep_length += 1
        if self._game_stats:  # whole games, unclipped, as the env's statistics wrapper counted them
            # SAME_STEP autoreset: the finished game's info is in info["final_info"] (info is the reset's)
            info = self._info.get("final_info", self._info)
            if "episode" in info:
                for i in np.flatnonzero(info["_episode"]):
                    self.episode_returns.append(float(info["episode"]["r"][i]))
                    self.episode_lengths.append(int(info["episode"]["l"][i]))
        else:
            for i in np.flatnonzero(done):
                self.episode_returns.append(float(self._ep_return[i]))
                self.episode_lengths.append(int(self._ep_length[i]))
        self._ep_return[done] = 0.0
        self._ep_length[done] = 0

    def pop_episodes(self) -> tuple[list[float], list[int]]:
        """Returns and lengths of episodes finished since the last call (and forget them)."""
        out = (self.episode_returns, self.episode_lengths)
        self.episode_returns, self.episode_lengths = [], []
        return out

    def close(self) -> None:
        """Close the vector env."""
        self.venv.close()
