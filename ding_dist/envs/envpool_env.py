"""EnvPool as a vector-env backend for Atari (``create_config.env_manager.type="envpool"``).

EnvPool steps its envs in C++ threads and does the Atari preprocessing itself (no-op reset, frame skip
with max-pool, 84x84 grayscale, frame stack, life loss, reward clipping), with the options of
:func:`~ding_dist.envs.atari.atari_default_config`. :class:`EnvPoolVectorEnv` presents it as a gymnasium
vector env with the ``SAME_STEP`` autoreset of :mod:`ding_dist.envs.env`: a finished env is reset within
the same ``step`` (EnvPool's own autoreset would spend the next step on it), its last observation goes to
``info["final_obs"]``, and a finished game's true score to ``info["final_info"]["episode"]``, as
gymnasium's ``RecordEpisodeStatistics`` reports it. Install with ``pip install -e '.[envpool]'``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from ding_dist.envs.atari import EPISODE_STATS_KEY, atari_default_config

__all__ = ["EnvPoolVectorEnv", "envpool_task"]

#: ``env.env_kwargs`` keys passed on to EnvPool (the others have no EnvPool counterpart).
_KWARGS = ("repeat_action_probability", "full_action_space", "mode", "difficulty")


def envpool_task(env_id: str) -> tuple[str, float]:
    """EnvPool's task name for a gymnasium Atari id and that id's default sticky-action probability.

    Example::

        envpool_task("ALE/Pong-v5")  # ("Pong-v5", 0.25); "PongNoFrameskip-v4" -> ("Pong-v5", 0.0)
    """
    name = env_id.partition(":")[2] or env_id
    v5, v4 = re.fullmatch(r"ALE/([A-Za-z]+)-v5", name), re.fullmatch(r"([A-Za-z]+)NoFrameskip-v4", name)
    if v5 is None and v4 is None:
        raise ValueError(f"env_manager 'envpool' runs Atari ids such as 'ALE/Pong-v5', got env.id {env_id!r}")
    return (f"{v5.group(1)}-v5", 0.25) if v5 else (f"{v4.group(1)}-v5", 0.0)


class EnvPoolVectorEnv(gym.vector.VectorEnv):
    """``num_envs`` Atari envs of ``env_cfg`` in one EnvPool, as a SAME_STEP-autoreset gymnasium vector env.

    ``training=True``: life-loss termination and reward clipping (per ``env.atari``); the logged game score
    stays unclipped. ``reset(seed=[s0, s1, ...])`` rebuilds the pool with those per-env seeds.

    Example::

        venv = EnvPoolVectorEnv({"id": "ALE/Pong-v5"}, num_envs=8, training=True)
        obs, info = venv.reset(seed=list(range(8)))  # obs (8, 4, 84, 84) uint8
    """

    def __init__(self, env_cfg: Mapping[str, Any], num_envs: int, *, training: bool = False) -> None:
        try:
            import envpool
        except ImportError as e:
            raise ValueError("env_manager 'envpool' needs EnvPool: pip install -e '.[envpool]'") from e
        self._envpool = envpool
        if env_cfg.get("entry_point") is not None:
            raise ValueError("env_manager 'envpool' builds envs from env.id, not env.entry_point")
        task, sticky = envpool_task(str(env_cfg.get("id")))
        if task not in envpool.list_all_envs():
            raise ValueError(f"EnvPool has no task {task!r} for env.id {env_cfg.get('id')!r}")
        kwargs = dict(env_cfg.get("env_kwargs") or {})
        unknown = sorted(set(kwargs) - set(_KWARGS))
        if unknown:
            raise ValueError(f"env_manager 'envpool' does not take env.env_kwargs {unknown}; it takes {list(_KWARGS)}")
        atari = env_cfg.get("atari")
        if atari is False:
            raise ValueError("env_manager 'envpool' always preprocesses Atari frames: env.atari=False needs sync/async")
        opts = atari_default_config()
        unknown = sorted(set(atari or {}) - set(opts))
        if unknown:
            raise ValueError(f"unknown env.atari keys {unknown}; valid: {sorted(opts)}")
        opts.update(atari or {})
        if float(env_cfg.get("step_cost_ms") or 0.0):
            raise ValueError("env.step_cost_ms needs env_manager sync or async")
        self._options: dict[str, Any] = {
            "num_envs": int(num_envs),
            "repeat_action_probability": float(kwargs.pop("repeat_action_probability", sticky)),
            **kwargs,
            "noop_max": int(opts["noop_max"]),
            "frame_skip": int(opts["frame_skip"]),
            "img_height": int(opts["screen_size"]),
            "img_width": int(opts["screen_size"]),
            "stack_num": int(opts["frame_stack"]),
            "episodic_life": bool(training and opts["terminal_on_life_loss"]),
            "reward_clip": bool(training and opts["clip_reward"]),
            "use_fire_reset": bool(opts["fire_reset"]),  # as the gymnasium wrappers of ding_dist.envs.atari
            "gray_scale": True,
        }
        if env_cfg.get("max_episode_steps") is not None:
            self._options["max_episode_steps"] = int(env_cfg["max_episode_steps"])
        self._task = task
        self._seeds = list(range(int(num_envs)))
        self._pool = self._make()
        self.num_envs = int(num_envs)
        self.single_observation_space = self._pool.observation_space
        self.single_action_space = self._pool.action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, EPISODE_STATS_KEY: True}
        self._returns = np.zeros(self.num_envs, dtype=np.float64)  # unclipped game score so far
        self._lengths = np.zeros(self.num_envs, dtype=np.int64)

    def _make(self) -> Any:
        return self._envpool.make(self._task, env_type="gymnasium", env_seed=self._seeds, **self._options)

    def reset(self, *, seed: int | Sequence[int] | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        """Reset every env; new seeds (an int: ``seed + i`` for env ``i``) rebuild the pool."""
        if seed is not None:
            seeds = [int(seed) + i for i in range(self.num_envs)] if isinstance(seed, int) else [int(s) for s in seed]
            if len(seeds) != self.num_envs:
                raise ValueError(f"need {self.num_envs} seeds, got {len(seeds)}")
            if seeds != self._seeds:
                self._pool.close()
                self._seeds = seeds
                self._pool = self._make()
        obs, _ = self._pool.reset()
        self._returns[:] = 0.0
        self._lengths[:] = 0
        return obs, {}

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict]:
        """One step of every env; finished envs come back already reset (SAME_STEP), see the module docstring."""
        obs, reward, terminated, truncated, raw = self._pool.step(np.asarray(actions))
        self._returns += raw["reward"]  # EnvPool's unclipped reward
        self._lengths += 1
        done = terminated | truncated
        info: dict[str, Any] = {}
        if done.any():
            ids = np.flatnonzero(done)
            final_obs = np.empty(self.num_envs, dtype=object)
            for i in ids:
                final_obs[i] = obs[i].copy()
            reset_obs, *_ = self._pool.step(np.zeros(len(ids), dtype=np.int64), env_id=ids)  # EnvPool resets them
            obs = obs.copy()
            obs[ids] = reset_obs
            game_over = (raw["terminated"].astype(bool) | truncated) & done  # a game, not only a life, ended
            final_info: dict[str, Any] = {}
            if game_over.any():
                final_info = {
                    "episode": {"r": self._returns.copy(), "l": self._lengths.copy()},
                    "_episode": game_over.copy(),
                }
                self._returns[game_over] = 0.0
                self._lengths[game_over] = 0
            info = {"final_obs": final_obs, "_final_obs": done.copy(), "final_info": final_info}
        return obs, reward.astype(np.float32), terminated.astype(bool), truncated.astype(bool), info

    def close_extras(self, **kwargs: Any) -> None:
        self._pool.close()
