"""A vector env whose sub-envs are recreated when they crash (collector envs, and evaluation envs).

:class:`RestartingVectorEnv` keeps each env in its own one-env gymnasium vector env (``SyncVectorEnv``, or an
``AsyncVectorEnv`` with one worker process), stepped together. When one raises in ``step``/``reset``, or its
worker process dies (SIGKILL, segfault: a broken pipe), only that env is closed and built afresh, reset with a
new seed derived from its own, and the step reports it in ``info["env_restart"]`` (mask ``info["_env_restart"]``)
with that env's reset observation, reward 0 and no episode end (a crash in ``reset`` is reported in its info the same
way). The collector then drops the broken episode (:class:`~ding_dist.worker.collector.Collector`); the evaluator
runs it again from its seed (:meth:`RestartingVectorEnv.reset_one`, :class:`~ding_dist.worker.evaluator.Evaluator`).
More than ``max_restarts`` restarts of one env within ``restart_window_s`` seconds is an :class:`EnvCrashError`
naming the env and its last exception.

Example::

    venv = RestartingVectorEnv([lambda: gym.make("CartPole-v1")] * 4, "async", max_restarts=5, restart_window_s=300)
    obs, info = venv.reset(seed=[0, 1, 2, 3])
"""

from __future__ import annotations

import atexit
import collections
import logging
import multiprocessing.util  # noqa: F401 (its exit hook is registered first, so ours below runs before it)
import os
import signal
import time
import warnings
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array, iterate

from ding_dist.comm import get_rank

__all__ = ["EnvCrashError", "InWorker", "RestartingVectorEnv", "adopt_spaces", "async_in_workers", "env_info"]

logger = logging.getLogger(__name__)

#: seconds a crashed async worker gets to exit before it is terminated
_CLOSE_TIMEOUT_S = 1.0

#: action spaces whose batch is one array, iterated by its rows (gymnasium's ``iterate``)
_ARRAY_SPACES = (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)


#: the async envs of :func:`async_in_workers`: their workers ignore SIGTERM (:class:`InWorker`), so multiprocessing's
#: own exit hook (terminate, then join) would wait forever for those of an env an exception left unclosed
_IN_WORKERS: weakref.WeakSet[gym.vector.AsyncVectorEnv] = weakref.WeakSet()


@atexit.register
def _kill_unclosed_workers() -> None:
    """At interpreter exit, SIGKILL the workers still alive (an env not closed; runs before multiprocessing's hook)."""
    for venv in list(_IN_WORKERS):
        for process in venv.processes:
            if process.is_alive():
                process.kill()
                process.join(_CLOSE_TIMEOUT_S)


class EnvCrashError(RuntimeError):
    """An env crashed more often than ``env.max_restarts`` within ``env.restart_window_s``."""


class InWorker:
    """An env factory for an async worker process: called in a process other than the one that made it (the worker),
    it first ignores the stop signals (SIGINT, SIGTERM, SIGUSR1). A signal to the job's whole process group (a
    terminal's Ctrl-C, SLURM, a container stop) then stops the rank, which finishes its iteration with these envs,
    checkpoints and closes them, instead of killing its envs under it. A worker whose rank is gone exits on its closed
    pipe.

    Example::

        gym.vector.AsyncVectorEnv([InWorker(lambda: gym.make("CartPole-v1"))] * 2)
    """

    def __init__(self, fn: Callable[[], gym.Env]) -> None:
        self.fn, self.parent = fn, os.getpid()

    def __call__(self) -> gym.Env:
        if os.getpid() != self.parent:
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1):
                signal.signal(sig, signal.SIG_IGN)
        return self.fn()


def async_in_workers(env_fns: Sequence[Callable[[], gym.Env]], **kwargs: Any) -> gym.vector.AsyncVectorEnv:
    """An ``AsyncVectorEnv`` of ``env_fns`` whose workers are :class:`InWorker`; one left unclosed when the
    interpreter exits has its workers killed, so the exit does not wait for them. ``kwargs`` go to AsyncVectorEnv.

    Example::

        venv = async_in_workers([lambda: gym.make("CartPole-v1")] * 2, shared_memory=True)
        venv.close()
    """
    venv = gym.vector.AsyncVectorEnv([InWorker(fn) for fn in env_fns], **kwargs)
    _IN_WORKERS.add(venv)
    return venv


def env_info(info: dict, j: int = 0) -> dict:
    """The plain info dict of env ``j`` of a vector info (masks ``_key`` applied, nested dicts too)."""
    out = {}
    for key, value in info.items():
        if key.startswith("_"):
            continue
        mask = info.get("_" + key)
        if mask is not None and not mask[j]:
            continue
        out[key] = env_info(value, j) if isinstance(value, dict) else value[j]
    return out


def adopt_spaces(venv: gym.vector.VectorEnv, first: gym.vector.VectorEnv, num_envs: int) -> None:
    """Give ``venv`` (a vector env of ``num_envs`` made of vector envs like ``first``) ``first``'s single spaces,
    their batched spaces, its metadata with SAME_STEP autoreset, and its render mode."""
    venv.num_envs = num_envs
    venv.single_observation_space = first.single_observation_space
    venv.single_action_space = first.single_action_space
    venv.observation_space = batch_space(venv.single_observation_space, num_envs)
    venv.action_space = batch_space(venv.single_action_space, num_envs)
    venv.metadata = dict(first.metadata or {})
    venv.metadata["autoreset_mode"] = AutoresetMode.SAME_STEP
    venv.render_mode = first.render_mode


class RestartingVectorEnv(gym.vector.VectorEnv):
    """``len(env_fns)`` envs, each recreated by its ``env_fn`` when it crashes (see the module docstring).

    ``manager``: ``"sync"`` (every env in this process) or ``"async"`` (one worker process per env); ``role`` names
    the envs in messages (``"collector"``, ``"evaluator"``: evaluation envs are guarded alike). Autoreset is
    gymnasium's ``SAME_STEP``. :attr:`restarts` counts every restart so far; :meth:`step_one` steps one env alone
    (the collector's first step of an env's new episode after a restart).

    Example::

        venv = RestartingVectorEnv([make] * 2, "sync", max_restarts=5, restart_window_s=300)
        obs, info = venv.reset(seed=[0, 1])
        obs, reward, terminated, truncated, info = venv.step(np.array([0, 1]))
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        manager: str = "sync",
        *,
        max_restarts: int = 5,
        restart_window_s: float = 300.0,
        role: str = "collector",
    ) -> None:
        if manager not in ("sync", "async"):
            raise ValueError(f"manager must be 'sync' or 'async', got {manager!r}")
        if isinstance(max_restarts, bool) or not isinstance(max_restarts, int) or max_restarts < 0:
            raise ValueError(f"env.max_restarts must be an int >= 0, got {max_restarts!r}")
        if (
            isinstance(restart_window_s, bool)
            or not isinstance(restart_window_s, (int, float))
            or restart_window_s <= 0
        ):
            raise ValueError(f"env.restart_window_s must be a number of seconds > 0, got {restart_window_s!r}")
        self.env_fns, self.manager, self.role = list(env_fns), manager, role
        self.max_restarts, self.restart_window_s = max_restarts, float(restart_window_s)
        self.num_envs = len(self.env_fns)
        self.subs: list[gym.vector.VectorEnv] = [self._make_sub(i) for i in range(self.num_envs)]
        adopt_spaces(self, self.subs[0], self.num_envs)
        self.restarts = 0
        # (actions, None) with the sync manager; (each env's batch of one, results so far) with the async one
        self._pending_step: tuple[Any, list[Any] | None] | None = None
        self._seeds: list[int | None] = [None] * self.num_envs
        self._crashes: list[collections.deque[float]] = [collections.deque() for _ in range(self.num_envs)]

    def _make_sub(self, i: int) -> gym.vector.VectorEnv:
        # copy=False: the batch of one is copied into this env's batch at once (np.concatenate), never kept
        fns, mode = [self.env_fns[i]], AutoresetMode.SAME_STEP
        if self.manager == "sync":
            return gym.vector.SyncVectorEnv(fns, copy=False, autoreset_mode=mode)
        return async_in_workers(fns, shared_memory=True, copy=False, autoreset_mode=mode)

    # --- restarts ------------------------------------------------------------------------------------
    def _close_sub(self, sub: gym.vector.VectorEnv) -> None:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if isinstance(sub, gym.vector.AsyncVectorEnv):
                    sub.close(terminate=True)
                else:
                    sub.close()
        except Exception:  # a broken env may fail to close: it is dropped either way
            pass

    def _restart(self, i: int, error: BaseException) -> tuple[Any, dict]:
        """Close env ``i`` after ``error``, build and reset it again; its reset observation (batch of one)."""
        while True:
            now = time.monotonic()
            crashes = self._crashes[i]
            crashes.append(now)
            while crashes and crashes[0] < now - self.restart_window_s:
                crashes.popleft()
            if len(crashes) > self.max_restarts:
                raise EnvCrashError(
                    f"{self.role} env {i} of rank {get_rank()} crashed {len(crashes)} times within "
                    f"{self.restart_window_s:g} s (more than env.max_restarts={self.max_restarts} in "
                    "env.restart_window_s); last exception: "
                    f"{type(error).__name__}: {error}"
                ) from error
            self._close_sub(self.subs[i])
            self.restarts += 1
            what = f"{type(error).__name__}: {error}"
            after = "dropping its episode" if self.role == "collector" else "its episode runs again from its start"
            logger.warning("%s env %d crashed (%s); recreated it, %s", self.role, i, what, after)
            seed = self._seeds[i]
            if seed is not None:  # a fresh stream: the new env never replays the broken episode
                seed = int(np.random.SeedSequence([seed, self.restarts]).generate_state(1)[0])
            try:
                self.subs[i] = self._make_sub(i)
                return self.subs[i].reset(seed=None if seed is None else [seed])
            except Exception as e:
                error = e

    def _call(self, i: int, name: str, *args: Any, **kwargs: Any) -> Any:
        """``subs[i].name(*args, **kwargs)``, gymnasium's worker-error warnings silenced (a restart logs one line)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return getattr(self.subs[i], name)(*args, **kwargs)

    # --- the vector env ------------------------------------------------------------------------------
    def reset(self, *, seed: int | Sequence[int] | None = None, options: dict | None = None) -> tuple[Any, dict]:
        if seed is None or isinstance(seed, int):
            seeds = [None if seed is None else seed + i for i in range(self.num_envs)]
        else:
            seeds = list(seed)
        self._seeds = seeds
        results: list[Any] = [None] * self.num_envs
        for i in range(self.num_envs):
            try:
                results[i] = self._call(i, "reset", seed=None if seeds[i] is None else [seeds[i]], options=options)
            except Exception as e:
                obs, info = self._restart(i, e)
                crashed = np.ones(1, dtype=bool)
                results[i] = obs, {**info, "env_restart": crashed, "_env_restart": crashed}
        obs = self._obs([r[0] for r in results])
        infos: dict = {}
        for i, (_, info) in enumerate(results):
            infos = self._add_info(infos, env_info(info), i)
        return obs, infos

    def reset_one(self, i: int, seed: int | None) -> Any:
        """Reset env ``i`` alone from ``seed``; its observation (a batch of one). An env that crashes meanwhile is
        recreated (within the same limit) and reset from ``seed`` again: the evaluator runs an episode that a
        crash cut short again from its start."""
        seeds = None if seed is None else [seed]
        while True:
            try:
                obs, _ = self._call(i, "reset", seed=seeds)
                break
            except Exception as e:
                self._restart(i, e)
        self._seeds[i] = seed
        return obs

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]:
        self.step_async(actions)
        return self.step_wait()

    def step_async(self, actions: Any) -> None:
        """Start a step: with the async manager every worker starts stepping now (sync: the step runs in
        :meth:`step_wait`). Double-buffered sampling (:mod:`ding_dist.envs.grouped`) overlaps the two."""
        if self.manager == "sync":
            self._pending_step = (actions, None)
            return
        acts = self._split_actions(actions)
        results: list[Any] = [None] * self.num_envs
        with warnings.catch_warnings():  # gymnasium's worker-error warnings: a restart logs one line instead
            warnings.simplefilter("ignore")
            for i, sub in enumerate(self.subs):  # every worker steps at once
                try:
                    sub.step_async(acts[i])
                except Exception as e:
                    results[i] = e
        self._pending_step = (acts, results)

    def step_wait(self) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]:
        """Finish the step :meth:`step_async` started (crashed envs restarted, as :meth:`step` does)."""
        if self._pending_step is None:
            raise RuntimeError("step_wait() without a step_async() in flight")
        acts, results = self._pending_step
        self._pending_step = None
        if results is None:
            return self._step_sync(acts)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for i, sub in enumerate(self.subs):
                if results[i] is None:
                    try:
                        results[i] = sub.step_wait()
                    except Exception as e:
                        results[i] = e
        for i, r in enumerate(results):
            if isinstance(r, BaseException):
                results[i] = self._restarted_step(i, r)
        obs = self._obs([r[0] for r in results])
        reward = np.concatenate([r[1] for r in results]).astype(np.float64)
        terminated = np.concatenate([r[2] for r in results]).astype(bool)
        truncated = np.concatenate([r[3] for r in results]).astype(bool)
        infos: dict = {}
        for i, r in enumerate(results):
            if r[4]:
                infos = self._add_info(infos, env_info(r[4]), i)
        return obs, reward, terminated, truncated, infos

    def _step_sync(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]:
        """One step of every env of the sync manager, each env called directly (its one-env ``SyncVectorEnv`` only
        makes its info): the results of stepping each one-env vector env, SAME_STEP autoreset included, without
        its per-step batching of one."""
        n = self.num_envs
        singles = self._single_actions(actions)
        items: list[Any] = [None] * n
        reward = np.zeros(n, dtype=np.float64)
        terminated = np.zeros(n, dtype=np.bool_)
        truncated = np.zeros(n, dtype=np.bool_)
        env_infos: list[dict | None] = [None] * n  # the one-env vector infos that are not empty
        crashed: dict[int, Exception] = {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for i, sub in enumerate(self.subs):
                env = sub.envs[0]
                try:
                    obs, reward[i], terminated[i], truncated[i], info = env.step(singles[i])
                    final = None
                    if terminated[i] or truncated[i]:  # SAME_STEP: the final step's observation and info go in info
                        final = {"final_obs": obs, "final_info": info}
                        obs, info = env.reset()
                except Exception as e:
                    crashed[i] = e
                    continue
                items[i] = obs
                if final is not None or info:
                    env_infos[i] = sub._add_info({} if final is None else sub._add_info({}, final, 0), info, 0)
        for i, error in crashed.items():  # after every env stepped, in env order, as the one-env vector envs did
            batch, _ = self._restart(i, error)
            items[i] = next(iter(iterate(self.subs[i].observation_space, batch)))
            reward[i], terminated[i], truncated[i] = 0.0, False, False
            env_infos[i] = {"env_restart": np.ones(1, dtype=bool), "_env_restart": np.ones(1, dtype=bool)}
        infos: dict = {}
        for i, one in enumerate(env_infos):
            if one is not None:
                infos = self._add_info(infos, env_info(one), i)
        return self._batch(items), reward, terminated, truncated, infos

    def _batch(self, items: list[Any]) -> Any:
        """Every env's observation as one batch, as gymnasium's ``concatenate`` makes it (``np.stack`` alone when
        each is an array of the Box space's own dtype and shape: then nothing needs a cast)."""
        space = self.single_observation_space
        if isinstance(space, gym.spaces.Box):
            dtype, shape = space.dtype, space.shape
            if all(type(o) is np.ndarray and o.dtype == dtype and o.shape == shape for o in items):
                return np.stack(items)
        return concatenate(space, items, create_empty_array(space, len(items), fn=np.empty))

    def _single_actions(self, actions: Any) -> Any:
        """Each env's action, as its one-env vector env takes it from its batch of one (``actions[i]`` for arrays)."""
        if isinstance(actions, np.ndarray) and isinstance(self.single_action_space, _ARRAY_SPACES):
            return actions
        return [next(iter(iterate(sub.action_space, a))) for sub, a in zip(self.subs, self._split_actions(actions))]

    def step_one(self, i: int, action: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]:
        """Step env ``i`` alone with ``action`` (a batch of one); results are batches of one, as its own
        one-env vector env returns them (a crash restarts it as :meth:`step` does)."""
        try:
            return self._call(i, "step", action)
        except Exception as e:
            return self._restarted_step(i, e)

    def _restarted_step(self, i: int, error: BaseException) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]:
        obs, _ = self._restart(i, error)
        no = np.zeros(1, dtype=bool)
        info = {"env_restart": np.ones(1, dtype=bool), "_env_restart": np.ones(1, dtype=bool)}
        return obs, np.zeros(1), no, no.copy(), info

    def _split_actions(self, actions: Any) -> list[Any]:
        if isinstance(actions, np.ndarray):
            return [actions[i : i + 1] for i in range(self.num_envs)]
        space = self.single_action_space
        return [concatenate(space, [a], create_empty_array(space, 1)) for a in iterate(self.action_space, actions)]

    def _obs(self, batches: list[Any]) -> Any:
        if all(isinstance(b, np.ndarray) for b in batches):
            return np.concatenate(batches)
        items = [next(iter(iterate(sub.observation_space, b))) for sub, b in zip(self.subs, batches)]
        space = self.single_observation_space
        return concatenate(space, items, create_empty_array(space, self.num_envs))

    def close_extras(self, **kwargs: Any) -> None:
        for sub in self.subs:
            if isinstance(sub, gym.vector.AsyncVectorEnv):
                sub.close(timeout=kwargs.get("timeout"), terminate=kwargs.get("terminate", False))
            else:
                sub.close()
