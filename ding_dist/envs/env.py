"""Environment creation: gymnasium envs, vector envs with per-rank seeds, and an old-gym adapter.

Autoreset: every vector env built here uses gymnasium's ``SAME_STEP`` autoreset mode. When a
sub-env finishes (terminated or truncated), the step that finished it returns the *reset*
observation, and the real last observation is in ``info["final_obs"][i]`` (mask ``info["_final_obs"]``).
So every step is a real transition: the collector stores ``next_obs = final_obs`` for finished slots
and never has to skip a step (the ``NEXT_STEP`` default of gymnasium 1.x would return a dummy
transition after each episode end).
"""

from __future__ import annotations

import difflib
import functools
import importlib
import logging
import numbers
import re
import time
import warnings
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from ding_dist.envs.atari import EPISODE_STATS_KEY, is_atari_id, register_ale, wrap_atari
from ding_dist.envs.grouped import GroupedVectorEnv, sample_groups_error
from ding_dist.envs.minatar import GridChannelsFirst, is_minatar_id, register_minatar
from ding_dist.envs.restarting import RestartingVectorEnv, async_in_workers
from ding_dist.envs.seeding import env_seeds

__all__ = [
    "make_env",
    "make_vec_env",
    "env_seeds",
    "OldGymAdapter",
    "ensure_gymnasium",
    "ENV_MANAGERS",
    "reset_one",
    "resets_one",
]

logger = logging.getLogger(__name__)

#: ``create_config.env_manager.type`` values and the gymnasium vectorization they select.
ENV_MANAGERS = {"sync": "sync", "async": "async", "base": "sync", "subprocess": "async", "envpool": "envpool"}


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _import(module_name: str, what: str) -> Any:
    """Import ``module_name``; any failure is one ValueError line naming ``what`` and the module."""
    try:
        return importlib.import_module(module_name)
    except Exception as e:  # ModuleNotFoundError, or whatever the module raises while importing
        raise ValueError(f"{what}: cannot import module {module_name!r} ({type(e).__name__}: {e})") from e


def _import_attr(path: str) -> Any:
    module_name, sep, attr = path.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"entry_point must look like 'package.module:callable', got {path!r}")
    module = _import(module_name, f"entry_point {path!r}")
    try:
        return getattr(module, attr)
    except AttributeError:
        raise ValueError(f"entry_point {path!r}: module {module_name!r} has no attribute {attr!r}") from None


def _check_env_id(env_id: str) -> None:
    """Raise a ValueError naming ``env_id`` and close registered ids when it is not registered."""
    name = env_id
    if ":" in env_id:  # gymnasium's "module:EnvId" form: importing the module registers the env
        module_name, _, name = env_id.partition(":")
        if not module_name or not name:
            raise ValueError(f"env.id {env_id!r} must be 'EnvId' or 'package.module:EnvId'")
        _import(module_name, f"env.id {env_id!r}")
    if name in gym.registry:
        return
    ids = list(gym.registry)
    lower = {i.lower(): i for i in ids}
    close = [lower[m] for m in difflib.get_close_matches(name.lower(), list(lower), n=5, cutoff=0.5)]
    hint = f"close registered ids: {close}" if close else f"{len(ids)} ids are registered, e.g. {ids[:5]}"
    raise ValueError(f"unknown environment id {env_id!r}; {hint}")


def make_env(
    env_id: str | None = None,
    *,
    entry_point: str | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
    max_episode_steps: int | None = None,
    atari: bool | Mapping[str, Any] | None = None,
    training: bool = False,
    channels_first: bool = False,
    reward_clip: Any = None,
    checked: bool = True,
) -> gym.Env:
    """Build one gymnasium env from a registered id, or from ``entry_point`` (adapting old-gym envs).

    MinAtar ids (``"MinAtar/Breakout-v1"``, the ``minatar`` extra) are registered on first use and observe
    ``(C, 10, 10)`` uint8 grids (:mod:`ding_dist.envs.minatar`). ale-py ids (``"ALE/Pong-v5"``,
    ``"PongNoFrameskip-v4"``) get the Atari preprocessing of
    :func:`~ding_dist.envs.atari.wrap_atari` unless ``atari=False`` (a dict gives its options);
    ``training=True`` adds its life-loss termination and reward clipping (collector envs only). There
    ``max_episode_steps`` counts agent steps of a whole game (not emulator frames, not one life).
    ``channels_first`` turns uint8 ``(H, W, C)`` images into ``(C, H, W)``; ``reward_clip`` (``[low, high]``) clips
    the rewards of ``training`` envs, below a :class:`gymnasium.wrappers.RecordEpisodeStatistics` that keeps the
    true returns for the logs. ``checked=False`` leaves out the two wrappers ``gym.make`` adds around a registered
    env that only check how it is called (its passive env checker and its order enforcing): the vector envs of
    :func:`make_vec_env` build their envs so, except the first, which gymnasium's checker still checks once.

    Example::

        env = make_env("CartPole-v1")
        env = make_env("CartPole-v1", checked=False)  # TimeLimit<CartPoleEnv>: no per-call check wrappers
        env = make_env("ALE/Pong-v5", training=True)  # observation (4, 84, 84) uint8
        env = make_env(entry_point="my_pkg.envs:make_legacy_env", env_kwargs={"size": 3})
    """
    if env_kwargs is not None and not isinstance(env_kwargs, Mapping):
        raise TypeError(f"env.env_kwargs must be a dict of constructor arguments, got {env_kwargs!r:.80}")
    kwargs = dict(env_kwargs or {})
    if max_episode_steps is not None:
        if not _is_int(max_episode_steps) or max_episode_steps < 1:
            raise ValueError(f"env.max_episode_steps must be an int >= 1 or None, got {max_episode_steps!r:.80}")
        max_episode_steps = int(max_episode_steps)
    bounds = _reward_bounds(reward_clip)
    if entry_point is not None:
        if isinstance(entry_point, str):
            factory = _import_attr(entry_point)
        elif callable(entry_point):
            factory = entry_point
        else:
            raise TypeError(f"entry_point must be 'package.module:callable' or a callable, got {entry_point!r:.80}")
        env = ensure_gymnasium(_construct(factory, kwargs, f"entry_point {entry_point!r}"))
        if max_episode_steps is not None:
            env = gym.wrappers.TimeLimit(env, max_episode_steps=max_episode_steps)
    else:
        env = _make_raw(env_id, kwargs, max_episode_steps, atari, training, checked)
    if channels_first:
        env = ChannelsFirst(env)
    if training and bounds is not None:
        if not env.metadata.get(EPISODE_STATS_KEY):
            env = gym.wrappers.RecordEpisodeStatistics(env)
        low, high = bounds
        env = gym.wrappers.TransformReward(env, lambda r: float(np.clip(r, low, high)))
        env.metadata = {**env.metadata, EPISODE_STATS_KEY: True}
    return env


def _reward_bounds(reward_clip: Any) -> tuple[float, float] | None:
    """``env.reward_clip`` as ``(low, high)`` (None bounds: +-inf), None for no clipping; a clear error otherwise."""
    if reward_clip is None:
        return None
    ok = isinstance(reward_clip, (list, tuple)) and len(reward_clip) == 2
    ok = ok and all(b is None or (isinstance(b, numbers.Real) and not isinstance(b, bool)) for b in reward_clip)
    if not ok:
        raise ValueError(f"env.reward_clip must be [low, high] (numbers or None) or None, got {reward_clip!r:.80}")
    low = -np.inf if reward_clip[0] is None else float(reward_clip[0])
    high = np.inf if reward_clip[1] is None else float(reward_clip[1])
    if not low <= high:
        raise ValueError(f"env.reward_clip must have low <= high, got {reward_clip!r}")
    return low, high


class ChannelsFirst(gym.ObservationWrapper):
    """A uint8 image observation ``(H, W, C)`` as ``(C, H, W)``, the layout of the CNN encoders.

    Example::

        env = ChannelsFirst(gym.make("CarRacing-v3", continuous=False))
        env.observation_space.shape  # (3, 96, 96)
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        space = env.observation_space
        if not (isinstance(space, gym.spaces.Box) and space.dtype == np.uint8 and len(space.shape) == 3):
            raise ValueError(f"env.channels_first needs uint8 (H, W, C) image observations, got {space}")
        self.observation_space = gym.spaces.Box(
            low=np.transpose(space.low, (2, 0, 1)), high=np.transpose(space.high, (2, 0, 1)), dtype=np.uint8
        )

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(np.transpose(observation, (2, 0, 1)))


def _make_raw(
    env_id: str | None,
    kwargs: dict[str, Any],
    max_episode_steps: int | None,
    atari: bool | Mapping[str, Any] | None,
    training: bool,
    checked: bool = True,
) -> gym.Env:
    """A registered env (Atari ones with their preprocessing), before the generic wrappers of :func:`make_env`;
    ``checked=False``: without gymnasium's passive env checker and order enforcing."""
    if not isinstance(env_id, str) or not env_id.strip():
        raise ValueError(f"env.id must be a gymnasium environment id such as 'CartPole-v1', got {env_id!r:.80}")
    use_atari = atari is not False and (isinstance(atari, Mapping) or atari is True or _looks_like_ale(env_id))
    if use_atari:
        register_ale()
    if is_minatar_id(env_id):
        register_minatar()
    _check_env_id(env_id)
    # checked=False: no passive env checker (a make argument, which env_kwargs may still set) and no order enforcing
    make = functools.partial(gym.make, env_id, **({} if checked else {"disable_env_checker": True}))
    if use_atari and is_atari_id(env_id):
        kwargs.setdefault("frameskip", 1)  # AtariPreprocessing skips frames (with max-pooling)
        env = _construct(make, kwargs, f"env.id {env_id!r}")
        env = env if checked else _without_order_enforcing(env)
        options = atari if isinstance(atari, Mapping) else None
        return wrap_atari(env, options, training=training, max_episode_steps=max_episode_steps)
    if max_episode_steps is not None:
        kwargs["max_episode_steps"] = max_episode_steps
    env = _construct(make, kwargs, f"env.id {env_id!r}")
    env = env if checked else _without_order_enforcing(env)
    return GridChannelsFirst(env) if is_minatar_id(env_id) else env


def _without_order_enforcing(env: gym.Env) -> gym.Env:
    """``env`` without the :class:`gymnasium.wrappers.OrderEnforcing` layers of its wrapper chain (a vector env
    resets each env before it steps it, so the per-call check is not needed)."""
    while isinstance(env, gym.wrappers.OrderEnforcing):
        env = env.env
    outer = env
    while isinstance(outer, gym.Wrapper):
        inner = outer.env
        if isinstance(inner, gym.wrappers.OrderEnforcing):
            outer.env = inner.env
        else:
            outer = inner
    return env


def _looks_like_ale(env_id: str) -> bool:
    name = env_id.partition(":")[2] or env_id
    return name.startswith("ALE/") or "NoFrameskip" in name


_OUTDATED = r".*The environment (\S+) is out of date"
_told_outdated: set[str] = set()


def _construct(factory: Any, kwargs: dict[str, Any], what: str) -> Any:
    """``factory(**kwargs)``; a constructor rejecting the keyword arguments is one TypeError line naming them.

    gymnasium's "environment ... is out of date" DeprecationWarning (coloured, once per process and place) becomes
    one plain INFO line per id and process; the DI-engine translation report already names the version it maps to.
    """
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.filterwarnings("always", message=_OUTDATED, category=DeprecationWarning)
            env = factory(**kwargs)
        for w in caught:
            found = re.match(_OUTDATED, str(w.message))
            if found is None:  # someone else's warning: show it as it would have been
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)
            elif found.group(1) not in _told_outdated:
                _told_outdated.add(found.group(1))
                version = re.search(r"version `(\S+)`", str(w.message))
                newer = f" ({version.group(1)})" if version else ""
                logger.info("%s: gymnasium has a newer version%s of this env", what, newer)
        return env
    except TypeError as e:
        if kwargs and "argument" in str(e):  # unexpected/missing keyword: the caller's env_kwargs are wrong
            raise TypeError(f"{what} rejected env_kwargs {kwargs!r:.120}: {e}") from e
        raise


class StepCost(gym.Wrapper):
    """Spin the CPU for ``ms`` milliseconds in every ``step``: an env whose steps cost real compute (benchmarks).

    Example::

        env = StepCost(make_env("CartPole-v1"), ms=1.0)  # each step now takes >= 1 ms of this process's CPU
    """

    def __init__(self, env: gym.Env, ms: float) -> None:
        super().__init__(env)
        if isinstance(ms, bool) or not isinstance(ms, (int, float)) or not ms >= 0:
            raise ValueError(f"env.step_cost_ms must be a number of milliseconds >= 0, got {ms!r}")
        self.seconds = float(ms) / 1000.0

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict]:
        end = time.perf_counter() + self.seconds
        while time.perf_counter() < end:  # busy work, not sleep: it occupies a core as a real env would
            pass
        return self.env.step(action)


def _make_from_cfg(env_cfg: Mapping[str, Any], training: bool = False, checked: bool = True) -> gym.Env:
    # a module-level function: its partials pickle for AsyncVectorEnv's workers
    env = make_env(
        env_cfg.get("id"),
        entry_point=env_cfg.get("entry_point"),
        env_kwargs=env_cfg.get("env_kwargs"),
        max_episode_steps=env_cfg.get("max_episode_steps"),
        atari=env_cfg.get("atari"),
        training=training,
        channels_first=bool(env_cfg.get("channels_first", False)),
        reward_clip=env_cfg.get("reward_clip"),
        checked=checked,
    )
    cost = env_cfg.get("step_cost_ms") or 0.0
    return StepCost(env, cost) if cost else env


def make_vec_env(
    env_cfg: Mapping[str, Any],
    num_envs: int,
    manager: str = "sync",
    *,
    training: bool = False,
    restarting: bool | None = None,
) -> gym.vector.VectorEnv:
    """A gymnasium vector env of ``num_envs`` copies of the env in ``env_cfg``, SAME_STEP autoreset.

    ``env_cfg`` is an ``env`` config section (its keys, defaults and meanings: ``ding_dist.config.sections.ENV_KEYS``,
    or ``ding-dist config show``); a key left out takes its default.

    ``manager``: ``"sync"`` (``SyncVectorEnv``, all envs in this process), ``"async"``
    (``AsyncVectorEnv``, one subprocess per env, observations through shared memory) or ``"envpool"``
    (Atari ids only: :class:`~ding_dist.envs.envpool_env.EnvPoolVectorEnv`, the ``envpool`` extra). Reset it with
    ``seed=env_seeds(...)``. ``training=True`` for collector envs: Atari life-loss termination and
    reward clipping (see :mod:`ding_dist.envs.atari`); evaluation envs keep the true game rewards. Collector envs
    (``training=True``) of the sync and async managers are a
    :class:`~ding_dist.envs.restarting.RestartingVectorEnv`: an env that crashes is recreated (``env.max_restarts``,
    ``env.restart_window_s``; ``env.max_restarts=0``: gymnasium's own vector env, and a crash ends the run). Collector
    envs with ``env.sample_groups`` G > 1 are a :class:`~ding_dist.envs.grouped.GroupedVectorEnv` of G such vector
    envs of ``num_envs / G`` envs each (G must divide ``num_envs``). ``restarting=True`` guards evaluation envs the
    same way (default: ``training``).

    Example::

        venv = make_vec_env({"id": "CartPole-v1"}, num_envs=4)
        obs, info = venv.reset(seed=env_seeds(0, rank=0, role="collector", num=4))
    """
    if manager not in ENV_MANAGERS:
        raise ValueError(f"env_manager.type must be one of {sorted(ENV_MANAGERS)}, got {manager!r}")
    if not _is_int(num_envs) or num_envs < 1:
        raise ValueError(f"number of envs must be an int >= 1, got {num_envs!r}")
    if not isinstance(env_cfg, Mapping):
        raise TypeError(f"env config must be a dict with 'id' or 'entry_point', got {env_cfg!r:.80}")
    env_cfg = dict(env_cfg)
    groups = env_cfg.get("sample_groups", 1) if training else 1
    error = sample_groups_error(groups, int(num_envs))
    if error:
        raise ValueError(error)
    if groups > 1:
        if ENV_MANAGERS[manager] == "envpool":
            raise ValueError("env.sample_groups > 1 needs env_manager sync or async (envpool steps its own threads)")
        one = {**env_cfg, "sample_groups": 1}
        part = functools.partial(make_vec_env, one, num_envs // groups, manager, training=True, restarting=restarting)
        return GroupedVectorEnv([part() for _ in range(groups)])
    if ENV_MANAGERS[manager] == "envpool":
        from ding_dist.envs.envpool_env import EnvPoolVectorEnv

        return EnvPoolVectorEnv(env_cfg, int(num_envs), training=training)
    # Build one env eagerly: a bad id or entry point fails here with a clear message, in this process.
    first = _make_from_cfg(env_cfg, training)
    # Env 0 keeps gymnasium's passive env checker (it checks the env's first reset and step); the others are built
    # without the checker and the order enforcing, wrappers that cost a call on every step (the vector env resets
    # every env before stepping it).
    fns = [functools.partial(_make_from_cfg, env_cfg, training, checked=i == 0) for i in range(int(num_envs))]
    guarded = training if restarting is None else restarting
    if guarded and int(env_cfg.get("max_restarts", 5)) > 0:  # 0: a crashing env ends the run (plain vector env)
        first.close()
        return RestartingVectorEnv(
            fns,
            ENV_MANAGERS[manager],
            max_restarts=env_cfg.get("max_restarts", 5),
            restart_window_s=env_cfg.get("restart_window_s", 300.0),
            role="collector" if training else "evaluator",
        )
    if ENV_MANAGERS[manager] == "sync":
        fns[0] = lambda: first
        return gym.vector.SyncVectorEnv(fns, autoreset_mode=AutoresetMode.SAME_STEP)
    first.close()
    # InWorker: a group's Ctrl-C/SIGTERM stops the rank, not its env workers
    return async_in_workers(fns, shared_memory=True, autoreset_mode=AutoresetMode.SAME_STEP)


def reset_one(venv: gym.vector.VectorEnv, i: int, seed: int | None) -> Any | None:
    """Reset env ``i`` of ``venv`` alone from ``seed``; its observation (a batch of one), or None when ``venv``
    cannot reset one env (envpool, grouped envs). A :class:`~ding_dist.envs.restarting.RestartingVectorEnv`
    recreates the env if it crashes meanwhile.

    Example::

        venv = make_vec_env({"id": "CartPole-v1"}, 2)
        venv.reset(seed=[0, 1])
        reset_one(venv, 1, seed=5)   # env 1 starts the episode of seed 5; env 0 goes on
    """
    if isinstance(venv, RestartingVectorEnv):
        return venv.reset_one(i, seed)
    if not resets_one(venv):
        return None
    mask = np.zeros(venv.num_envs, dtype=bool)
    mask[i] = True
    seeds = [seed if j == i else None for j in range(venv.num_envs)]
    obs, _ = venv.reset(seed=seeds, options={"reset_mask": mask})
    return _rows(obs, i)


def resets_one(venv: gym.vector.VectorEnv) -> bool:
    """True when :func:`reset_one` can reset one env of ``venv`` (gymnasium's sync and async vector envs, and
    :class:`~ding_dist.envs.restarting.RestartingVectorEnv`).

    Example::

        resets_one(make_vec_env({"id": "CartPole-v1"}, 2))  # True
    """
    return isinstance(venv, RestartingVectorEnv | gym.vector.SyncVectorEnv | gym.vector.AsyncVectorEnv)


def _rows(batch: Any, i: int) -> Any:
    """Row ``i`` of a batched observation, as a batch of one (arrays, dicts and tuples of them)."""
    if isinstance(batch, dict):
        return {k: _rows(v, i) for k, v in batch.items()}
    if isinstance(batch, tuple):
        return tuple(_rows(v, i) for v in batch)
    return np.asarray(batch)[i : i + 1].copy()


# --- old-gym adapter ----------------------------------------------------------------------------------


CLOSE_TIMEOUT_S = 2.0


def close_vec_env(venv: gym.vector.VectorEnv, timeout: float = CLOSE_TIMEOUT_S) -> None:
    """Close ``venv``; an ``AsyncVectorEnv`` call still pending waits at most ``timeout`` seconds, then its
    worker processes are terminated.

    A pending call is what an exception (SIGTERM) leaves when it lands inside ``step_wait`` after some
    workers answered: gymnasium's plain ``close()`` would wait for those answers again, forever.

    Example::

        venv = make_vec_env(cfg.env, 4, "async")
        close_vec_env(venv)
    """
    if isinstance(venv.unwrapped, gym.vector.AsyncVectorEnv | RestartingVectorEnv | GroupedVectorEnv):
        venv.close(timeout=timeout)
    else:
        venv.close()


def _convert_space(space: Any) -> gym.Space:
    """A gymnasium space equal to a duck-typed old-gym space (Discrete via ``.n``, Box via low/high)."""
    if isinstance(space, gym.Space):
        return space
    if hasattr(space, "n"):
        return gym.spaces.Discrete(int(space.n))
    if hasattr(space, "low") and hasattr(space, "high"):
        low, high = np.asarray(space.low), np.asarray(space.high)
        dtype = getattr(space, "dtype", None) or np.float32
        return gym.spaces.Box(low=low, high=high, shape=low.shape, dtype=dtype)
    raise TypeError(f"cannot convert space {space!r}: expected an object with .n or .low/.high")


class OldGymAdapter(gym.Env):
    """Present an old-gym-style env (``reset() -> obs``, ``step -> (obs, reward, done, info)``) as gymnasium.

    Duck-typed: it needs no ``gym`` package. ``done`` with ``info["TimeLimit.truncated"]`` becomes
    ``truncated``; any other ``done`` becomes ``terminated``. ``reset(seed=s)`` calls ``env.seed(s)``
    when the env has it, else passes ``seed=`` to ``env.reset``. Envs already on the 5-tuple API
    pass through unchanged.

    Example::

        env = OldGymAdapter(legacy_env)
        obs, info = env.reset(seed=0)
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
    """

    def __init__(self, env: Any) -> None:
        for attr in ("reset", "step", "observation_space", "action_space"):
            if not hasattr(env, attr):
                raise TypeError(f"{type(env).__name__} is not an environment: it has no {attr!r}")
        self.env = env
        self.observation_space = _convert_space(env.observation_space)
        self.action_space = _convert_space(env.action_space)
        self.metadata = dict(getattr(env, "metadata", None) or {})
        self.render_mode = getattr(env, "render_mode", None)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        if seed is not None and callable(getattr(self.env, "seed", None)):
            self.env.seed(seed)
            out = self.env.reset()
        elif seed is not None:
            out = self.env.reset(seed=seed)
        else:
            out = self.env.reset()
        if isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], dict):
            return out
        return out, {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        out = self.env.step(action)
        if len(out) == 5:
            return out
        if len(out) != 4:
            raise ValueError(f"env.step returned {len(out)} values; expected 4 (old gym) or 5 (gymnasium)")
        obs, reward, done, info = out
        info = dict(info or {})
        truncated = bool(done) and bool(info.pop("TimeLimit.truncated", False))
        return obs, float(reward), bool(done) and not truncated, truncated, info

    def render(self) -> Any:
        return self.env.render()

    def close(self) -> None:
        if callable(getattr(self.env, "close", None)):
            self.env.close()


def ensure_gymnasium(env: Any) -> gym.Env:
    """Return ``env`` if it is a gymnasium env, else wrap it in :class:`OldGymAdapter`.

    Example::

        env = ensure_gymnasium(maybe_legacy_env)
    """
    return env if isinstance(env, gym.Env) else OldGymAdapter(env)
