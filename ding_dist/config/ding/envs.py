"""DI-engine's env suites onto ding_dist's ``env`` section, with what DI-engine's env classes do with each key.

One function per suite of DI-engine's model zoo (``create_config.env.type``): classic control (``cartpole``,
``pendulum``, ``acrobot``, ``mountain_car``, ``lunarlander``), ``atari`` (dizoo's ``AtariEnv``: DeepMind's
preprocessing, ``wrap_deepmind``), ``mujoco`` (dizoo's ``MujocoEnv``: ``wrap_mujoco``), ``bipedalwalker`` and
``carracing`` (Box2D), plus DI-engine's ``env_pool`` manager. Each reads the DI-engine keys of its env class
through the translation's :class:`~ding_dist.config.ding.core.Translator` (``take``/``put``/report) and
returns the gymnasium id the run uses; :func:`translate_env` is the entry point the dialect calls.

DI-engine's ids are mapped onto what this machine's gymnasium registers: Atari ids (``PongNoFrameskip-v4``,
``SpaceInvadersNoFrameskip-v0``) are ale-py's own registrations, the same emulator settings; MuJoCo's ``-v2``/``-v3``
(mujoco-py) become the newest version gymnasium has (``Hopper-v5``); Box2D's ``LunarLander-v2`` and
``CarRacing-v2`` became ``-v3`` in gymnasium 1.x. The report names every such mapping.

Example:
    >>> from ding_dist.config.ding import Translator
    >>> t = Translator({"env": {"env_id": "PongNoFrameskip-v4", "frame_stack": 4}}, {}, "demo")
    >>> translate_env(t, "atari", "dqn")
    'PongNoFrameskip-v4'
    >>> t.out["env.atari"]["frame_stack"], t.out["env.atari"]["fire_reset"], t.image_obs
    (4, True, True)
"""

from __future__ import annotations

import difflib
import importlib.util
import re
from typing import Any, Protocol

from ding_dist.config.errors import ConfigError
from ding_dist.config.rules import short_repr


class _Translator(Protocol):
    """What the suites use of :class:`ding_dist.config.ding.core.Translator` (whose translation imports this module)."""

    main: dict[str, Any]
    out: dict[str, Any]
    create_out: dict[str, Any]
    report: Any
    image_obs: bool
    env_action_bins: Any

    def has(self, path: str) -> bool: ...
    def take(self, path: str, default: Any = ...) -> Any: ...
    def under(self, prefix: str) -> list[str]: ...
    def put(self, path: str, value: Any) -> None: ...
    def same(self, path: str, ours: str | None = None) -> Any: ...
    def ignore(self, path: str, why: str) -> None: ...
    def ignore_under(self, prefix: str, why: str) -> None: ...
    def require(self, path: str, ok: Any, why: str) -> Any: ...


__all__ = ["DING_ENV_IDS", "ENV_MANAGERS", "translate_env", "install_hint"]

#: DI-engine's classic env types (``create_config.env.type``) -> gymnasium ids. DI-engine's CartPole is gym's v0
#: (200-step limit, solved at 195); its LunarLander is v2, which gymnasium 1.x replaced by v3.
DING_ENV_IDS = {
    "cartpole": "CartPole-v0",
    "pendulum": "Pendulum-v1",
    "lunarlander": "LunarLander-v3",
    "acrobot": "Acrobot-v1",
    "mountain_car": "MountainCar-v0",
}
#: DI-engine env manager types -> ours (sync: all envs in the process; async: one subprocess per env; envpool:
#: EnvPool's C++ threads, Atari only).
ENV_MANAGERS = {"base": "sync", "subprocess": "async", "async_subprocess": "async", "env_pool": "envpool"}
#: Ids gymnasium 1.x renamed: what DI-engine 0.5.3's files name -> what gymnasium registers now, and why.
_RENAMED_IDS = {
    "LunarLander-v2": ("LunarLander-v3", "gymnasium 1.x renamed it"),
    "LunarLanderContinuous-v2": ("LunarLanderContinuous-v3", "gymnasium 1.x renamed it"),
    "CarRacing-v2": ("CarRacing-v3", "gymnasium 1.x renamed it; v3 ends an episode by termination at the lap's end"),
}
_BOX2D_IDS = re.compile(r"(LunarLander|LunarLanderContinuous|BipedalWalker|BipedalWalkerHardcore|CarRacing)-v\d+")
_MUJOCO_TYPES = ("mujoco", "mbmujoco")
#: The extras that bring each suite's simulator (pyproject.toml).
_EXTRAS = {"Box2D": "box2d", "ale_py": "atari", "mujoco": "mujoco", "envpool": "envpool"}
#: What changed between the MuJoCo versions DI-engine 0.5.3 names (mujoco-py's v2/v3) and gymnasium's v5.
_MUJOCO_V5_NOTES = {
    "Hopper": "the healthy reward only while healthy",
    "Walker2d": "both feet with friction 1.9 (v2/v3: the right one 0.9), the healthy reward only while healthy",
    "HalfCheetah": "the same model and reward",
    "Ant": "105-dim observations (v3's 111 held the world body's always-zero contact forces), the healthy reward "
    "only while healthy",
    "Humanoid": "the healthy reward only while healthy",
}
#: Policies whose actions live in [-1, 1] and are mapped onto the env's Box bounds (DI-engine's ``act_scale=True``).
_BOUNDS_MAPPED = ("sac", "td3", "ddpg", "bdq", "d4pg")
#: Policies whose translation can normalize observations (``policy.model.obs_norm``, running statistics).
_OBS_NORM_POLICIES = ("ppo", "a2c", "ppo_offpolicy")


def install_hint(module: str) -> str:
    """The install line for a suite's missing simulator module (``Box2D``, ``ale_py``, ``mujoco``, ``envpool``).

    Example:
        >>> install_hint("Box2D")
        "pip install 'ding_dist[box2d]' (from a checkout: pip install -e '.[box2d]')"
    """
    extra = _EXTRAS[module]
    return f"pip install 'ding_dist[{extra}]' (from a checkout: pip install -e '.[{extra}]')"


def _need(module: str, what: str) -> None:
    if importlib.util.find_spec(module) is None:
        raise ConfigError(f"{what} needs {module}, which is not installed: {install_hint(module)}")


# ------------------------------------------------------------------------------------------------ shared keys
def _shared(t: _Translator) -> None:
    """The keys every DI-engine env config has, whatever the suite."""
    for key in ("collector_env_num", "evaluator_env_num", "n_evaluator_episode", "stop_value"):
        t.same(f"env.{key}")
    if "env.collector_env_num" in t.main:  # DI-engine's DDP keeps envs per process and splits n_sample
        t.report.add(
            "differs",
            f"env.collector_env_num={short_repr(t.main['env.collector_env_num'])}: DI-engine steps that many envs in "
            "every process and splits n_sample over the processes, so on N processes each env's rollout is N times "
            "shorter; here it is the run's total, split over the processes (learners), so each env's rollout keeps "
            "n_sample / collector_env_num steps on any number of processes",
        )
    t.ignore("env.replay_path", "ding_dist records no videos of evaluation episodes")
    manager = t.under("env.manager")
    if manager:
        t.ignore_under(
            "env.manager",
            "DI-engine env-manager tuning (shared_memory, reset_inplace, ...); the manager is "
            f"create_config.env_manager.type (here {t.create_out.get('env_manager.type', 'sync')!r}: the async one "
            "always passes observations through shared memory, and every manager resets finished envs in place)",
        )
    t.ignore("env.type", "the env comes from create_config.env.type")
    t.ignore("env.import_names", "DI-engine module imports; envs come from gymnasium")
    t.ignore("env.exp_name", "DI-engine's env classes do not read it; the run's folder is the top-level exp_name")
    t.ignore("env.cfg_type", "DI-engine's compiled-config marker")


def _act_scale(t: _Translator, policy: str) -> None:
    """DI-engine's ``act_scale`` (its env maps [-1, 1] actions onto the Box bounds) for each policy family."""
    act_scale = t.take("env.act_scale", None)
    if act_scale is None:
        return
    name = policy.upper()
    if policy in _BOUNDS_MAPPED and act_scale is True:
        t.report.add("mapped", f"env.act_scale=True: {name} maps its [-1, 1] actions onto the env's bounds, as here")
    elif policy in _BOUNDS_MAPPED:
        raise ConfigError(
            f"DI-engine config key 'env.act_scale' = False cannot be honoured: ding_dist's {name} always maps its "
            "[-1, 1] actions onto the env's bounds"
        )
    else:
        t.report.add("differs", f"env.act_scale={act_scale!r}: Gaussian samples are clipped to the env's bounds here")


def _gymnasium_id(t: _Translator, env_id: str, key: str = "env.env_id") -> str:
    """A DI-engine id as gymnasium registers it now (renamed ids mapped), reported."""
    if env_id in _RENAMED_IDS:
        new, why = _RENAMED_IDS[env_id]
        t.report.add("mapped", f"{key}={env_id!r} -> env.id={new!r} ({why})")
        return new
    t.report.add("mapped", f"{key}={env_id!r} -> env.id")
    return env_id


def _check_box2d(env_id: str, env_type: str | None) -> None:
    if _BOX2D_IDS.fullmatch(env_id) and importlib.util.find_spec("Box2D") is None:
        raise ConfigError(
            f"DI-engine env {env_type or env_id!r} is gymnasium's {env_id}, which needs Box2D and it is not "
            f"installed: {install_hint('Box2D')}"
        )


# ------------------------------------------------------------------------------------------------ suites
def _classic(t: _Translator, env_type: str | None, policy: str) -> str:
    """Classic control and LunarLander: ``create_config.env.type`` names the env, ``env.env_id`` wins."""
    env_id = t.take("env.env_id", None)
    continuous = t.take("env.continuous", False)
    if env_id is not None:
        env_id = _gymnasium_id(t, str(env_id))
    else:
        if env_type not in DING_ENV_IDS:
            known = sorted([*DING_ENV_IDS, *_SUITES])
            close = difflib.get_close_matches(str(env_type), known, n=1, cutoff=0.5)
            hint = f" (closest: {close[0]!r})" if close else ""
            raise ConfigError(
                f"DI-engine config key 'create_config.env.type' = {env_type!r} cannot be honoured: known DI-engine "
                f"envs are {known}{hint}; or give a gymnasium id with --set env.id=..."
            )
        env_id = DING_ENV_IDS[env_type]
        if env_type == "lunarlander" and continuous:
            env_id = "LunarLanderContinuous-v3"
        if env_type == "pendulum" and t.has("env.continuous") and not continuous and policy != "bdq":
            raise ConfigError(
                "DI-engine config key 'env.continuous' = False cannot be honoured by ding_dist: DI-engine's pendulum "
                "env then offers 11 discrete torques; here Pendulum-v1 keeps its Box action space (a policy for Box "
                "actions, e.g. bdq, discretizes it itself)"
            )
        note = {"cartpole": " (DI-engine's CartPole: v0, 200-step episodes)"}.get(env_type, "")
        t.report.add("mapped", f"create_config.env.type={env_type!r} -> env.id={env_id!r}{note}")
    _check_box2d(env_id, env_type)
    return env_id


#: ale-py ids DI-engine's AtariEnv takes: ``{Game}NoFrameskip-v4`` / ``-v0`` (old gym's, registered by ale-py too)
#: and ``ALE/{Game}-v5``.
_ATARI_ID = re.compile(r"(?:(?P<game>[A-Za-z]+)NoFrameskip-v(?P<v>[04])|ALE/(?P<game5>[A-Za-z]+)-v5)")


def _atari(t: _Translator, env_type: str | None, policy: str) -> str:
    """dizoo's ``AtariEnv``: ``wrap_deepmind(env_id, frame_stack, episode_life=is_train, clip_rewards=is_train)``.

    DI-engine's stack, innermost first: no-op reset (1 to 30 no-ops), 4 frames per step with the max of the last
    two, life loss as episode end (collector envs), FIRE at each reset in games that have it, 84x84 grayscale,
    scaled to [0, 1], sign-clipped rewards (collector envs), ``frame_stack`` frames; each maps onto
    ``env.atari``."""
    env_id = t.take("env.env_id", None)
    if env_id is None:
        raise ConfigError("DI-engine config key 'env.env_id' is required for create_config.env.type='atari' "
                          "(DI-engine's AtariEnv makes env_id, e.g. 'PongNoFrameskip-v4')")  # fmt: skip
    found = _ATARI_ID.fullmatch(str(env_id))
    if found is None:
        raise ConfigError(
            f"DI-engine config key 'env.env_id' = {env_id!r} cannot be honoured: DI-engine's AtariEnv skips frames "
            "itself, so it takes frame-skip-free ids ('PongNoFrameskip-v4', 'SpaceInvadersNoFrameskip-v0', "
            "'ALE/Pong-v5')"
        )
    _need("ale_py", f"DI-engine's Atari env {env_id!r}")
    sticky = "sticky actions (repeat_action_probability 0.25)" if found["v"] == "0" else "no sticky actions"
    if found["game5"]:
        sticky = "sticky actions (repeat_action_probability 0.25)"
    t.report.add("mapped", f"env.env_id={env_id!r} -> env.id={env_id!r} (ale-py's registration: {sticky}, a "
                 "108000-frame limit, the minimal action set)")  # fmt: skip
    stack = t.take("env.frame_stack", 4)
    if isinstance(stack, bool) or not isinstance(stack, int) or stack < 1:
        raise ConfigError(f"DI-engine config key 'env.frame_stack' must be an int >= 1, got {short_repr(stack)}")
    t.require("env.obs_plus_prev_action_reward", (False,), "observations are the stacked frames only here")
    atari = {
        "noop_max": 30,
        "frame_skip": 4,
        "screen_size": 84,
        "frame_stack": stack,
        "terminal_on_life_loss": True,
        "clip_reward": True,
        "fire_reset": True,
    }
    t.put("env.atari", atari)
    t.report.add("mapped", f"env.frame_stack={stack} -> env.atari.frame_stack={stack}")
    t.report.add(
        "default",
        "env.atari: DI-engine's wrap_deepmind: noop_max=30, frame_skip=4 (max of the last two frames), "
        "screen_size=84 (its warp_frame, grayscale), fire_reset=True (FIRE after each reset and lost life in games "
        "that have it); collector envs: terminal_on_life_loss=True (episode-life), clip_reward=True (sign); "
        "evaluator envs neither, as DI-engine's is_train=False",
    )
    t.report.add("differs", "grayscale: ALE's palette, max-pooled after conversion; DI-engine converts the max of two "
                 "RGB frames with OpenCV (pixel values differ by a few levels)")  # fmt: skip
    t.image_obs = True
    return str(env_id)


def _newest_mujoco(name: str) -> str | None:
    """The newest ``{name}-vN`` gymnasium registers with its own MuJoCo bindings (not mujoco-py's stubs)."""
    import gymnasium as gym

    versions = []
    for env_id, spec in gym.registry.items():
        found = re.fullmatch(rf"{re.escape(name)}-v(\d+)", env_id)
        if found and isinstance(spec.entry_point, str) and "gymnasium.envs.mujoco" in spec.entry_point:
            versions.append(int(found.group(1)))
    return f"{name}-v{max(versions)}" if versions else None


def _mujoco(t: _Translator, env_type: str | None, policy: str) -> str:
    """dizoo's ``MujocoEnv``: ``wrap_mujoco(env_id, norm_obs, norm_reward)``; ``env_wrapper`` is not read by it."""
    env_id = t.take("env.env_id", None)
    if env_id is None:
        raise ConfigError("DI-engine config key 'env.env_id' is required for create_config.env.type='mujoco' "
                          "(e.g. 'Hopper-v3')")  # fmt: skip
    _need("mujoco", f"DI-engine's MuJoCo env {env_id!r}")
    name, _, version = str(env_id).rpartition("-v")
    newest = _newest_mujoco(name) if name else None
    if newest is None:
        raise ConfigError(f"DI-engine config key 'env.env_id' = {env_id!r} cannot be honoured: gymnasium has no MuJoCo "
                          "env of that name (e.g. 'Hopper-v3', 'HalfCheetah-v3', 'Walker2d-v3', 'Ant-v3')")  # fmt: skip
    if newest == env_id:
        t.report.add("mapped", f"env.env_id={env_id!r} -> env.id")
    else:
        note = _MUJOCO_V5_NOTES.get(name, "see gymnasium's version history") if newest.endswith("-v5") else ""
        t.report.add("mapped", f"env.env_id={env_id!r} -> env.id={newest!r} (gymnasium's current version; v{version} "
                     f"needs mujoco-py{'; v5: ' + note if note else ''})")  # fmt: skip
    wrapper = t.take("env.env_wrapper", None)
    if wrapper is not None:
        if wrapper not in ("mujoco_default", "default"):
            raise ConfigError(f"DI-engine config key 'env.env_wrapper' = {short_repr(wrapper)} cannot be honoured: "
                              "MuJoCo envs take 'mujoco_default' (an episode-return recorder)")  # fmt: skip
        t.report.add("ignored", f"env.env_wrapper={wrapper!r}: read by DI-engine's DingEnvWrapper only (an episode-"
                     "return recorder); its MujocoEnv (create_config.env.type='mujoco') does not read it")  # fmt: skip
    _norm_obs(t, policy)
    _norm_reward(t)
    bins = t.take("env.action_bins_per_branch", None)
    if bins is not None:
        if policy != "bdq":
            raise ConfigError(f"DI-engine config key 'env.action_bins_per_branch' = {short_repr(bins)} cannot be "
                              f"honoured for {policy}: it discretizes actions for BDQ's branches")  # fmt: skip
        t.env_action_bins = bins  # BDQ's translator checks it against policy.model.action_bins_per_branch
    t.require("env.delay_reward_step", (0, 1), "rewards are given at each step here")
    t.require("env.action_clip", (False,), "actions are clipped to the env's bounds by the policy here")
    return newest


def _norm_obs(t: _Translator, policy: str) -> None:
    use = t.take("env.norm_obs.use_norm", False)
    if not use:
        if t.has("env.norm_obs.use_norm"):
            t.report.add("same", "env.norm_obs.use_norm=False (no observation normalization)")
        return
    if policy not in _OBS_NORM_POLICIES:
        raise ConfigError(
            f"DI-engine config key 'env.norm_obs.use_norm' = True cannot be honoured for {policy}: observation "
            f"normalization is a part of the policies {list(_OBS_NORM_POLICIES)} here (policy.model.obs_norm)"
        )
    t.put("policy.model.obs_norm", True)
    t.report.add(
        "mapped", "env.norm_obs.use_norm=True -> policy.model.obs_norm=True (running mean and variance, one set of "
        "statistics over every env and rank)",
    )  # fmt: skip
    t.report.add("differs", "observation normalization: DI-engine's ObsNormWrapper keeps statistics per env, restarts "
                 "them at each reset, starts after 30 steps and clips to [-3, 3]; here they run over the whole run "
                 "and clip to [-10, 10]")  # fmt: skip


def _norm_reward(t: _Translator) -> None:
    use = t.take("env.norm_reward.use_norm", False)
    if use:
        raise ConfigError("DI-engine config key 'env.norm_reward.use_norm' = True cannot be honoured: ding_dist does "
                          "not normalize rewards")  # fmt: skip
    if t.has("env.norm_reward.use_norm"):
        t.report.add("same", "env.norm_reward.use_norm=False (no reward normalization)")
    t.ignore("env.norm_reward.reward_discount", "used only with norm_reward.use_norm=True")


def _bipedalwalker(t: _Translator, env_type: str | None, policy: str) -> str:
    """dizoo's ``BipedalWalkerEnv``: always ``BipedalWalker-v3``; ``rew_clip`` raises rewards below -10 to -10."""
    given = t.take("env.env_id", None)
    env_id = "BipedalWalker-v3"
    why = "DI-engine's BipedalWalkerEnv makes BipedalWalker-v3 whatever env_id says"
    t.report.add("mapped", f"create_config.env.type='bipedalwalker' -> env.id={env_id!r} ({why})" if given is None
                 else f"env.env_id={given!r} -> env.id={env_id!r} ({why})")  # fmt: skip
    _check_box2d(env_id, env_type)
    if t.take("env.rew_clip", False):
        t.put("env.reward_clip", [-10.0, None])
        t.report.add("mapped", "env.rew_clip=True -> env.reward_clip=[-10.0, None] (a fall's -100 counts -10 in "
                     "collector envs, as DI-engine's max(-10, reward); logged and evaluated returns are the true "
                     "ones)")  # fmt: skip
    return env_id


def _carracing(t: _Translator, env_type: str | None, policy: str) -> str:
    """dizoo's ``CarRacingEnv``: ``gym.make(env_id, continuous=...)``, frames channels-first in [0, 1]."""
    given = t.take("env.env_id", "CarRacing-v2")
    env_id = _gymnasium_id(t, str(given))
    _check_box2d(env_id, env_type)
    continuous = bool(t.take("env.continuous", True))
    t.put("env.env_kwargs", {"continuous": continuous})
    t.report.add("mapped", f"env.continuous={continuous!r} -> env.env_kwargs.continuous={continuous!r}"
                 + (" (5 discrete actions)" if not continuous else ""))  # fmt: skip
    t.put("env.channels_first", True)
    t.report.add("mapped", "96x96 RGB frames -> env.channels_first=True ((3, 96, 96) uint8, scaled to [0, 1] in the "
                 "CNN encoder as DI-engine's env scales them)")  # fmt: skip
    t.require("env.action_clip", (False,), "actions are clipped to the env's bounds by the policy here")
    if _has_policy_key(policy, ("other", "replay_buffer", "frame_dedup")):
        t.put("policy.other.replay_buffer.frame_dedup", False)
        t.report.add("mapped", "RGB channels, not stacked frames: policy.other.replay_buffer.frame_dedup=False")
    t.image_obs = True
    return env_id


def _has_policy_key(policy: str, path: tuple[str, ...]) -> bool:
    """Whether ding_dist's ``policy`` has the config key ``policy.<path>``."""
    from ding_dist.policy import get_policy_cls  # torch: only for the suites that need to know

    node: Any = get_policy_cls(policy).default_config()
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
    return True


#: Suites by ``create_config.env.type`` (classic control: :func:`_classic`, the default).
_SUITES = {
    "atari": _atari,
    "mujoco": _mujoco,
    "mbmujoco": _mujoco,
    "bipedalwalker": _bipedalwalker,
    "carracing": _carracing,
}


def _envpool(t: _Translator) -> None:
    """DI-engine's ``env_pool`` manager (``PoolEnvManager``): EnvPool in sync mode when ``batch_size == env_num``."""
    _need("envpool", "DI-engine's env_pool manager (create_config.env_manager.type='env_pool')")
    for role in ("collector", "evaluator"):
        key = f"env.{role}_batch_size"
        size = t.take(key, None)
        if size is None:
            continue
        envs = t.out.get(f"env.{role}_env_num", t.main.get(f"env.{role}_env_num"))
        if size != envs:
            raise ConfigError(
                f"DI-engine config key {key!r} = {short_repr(size)} cannot be honoured: EnvPool steps all "
                f"{role} envs each step here (its sync mode, batch_size = env.{role}_env_num = {short_repr(envs)})"
            )
        t.report.add("mapped", f"{key}={size}: EnvPool's sync mode (every env each step), as here")
    t.report.add("mapped", "EnvPool preprocesses the frames with env.atari's options (FIRE at reset: EnvPool's "
                 "default, which DI-engine's PoolEnvManager keeps)")  # fmt: skip


def translate_env(t: _Translator, env_type: str | None, policy: str) -> str:
    """The ``env`` section of a DI-engine config as ours; returns the gymnasium id (also put at ``env.id``).

    Sets ``t.image_obs`` for suites whose observations are images (Atari, CarRacing): the policy translators then
    map DI-engine's conv encoder.
    """
    _shared(t)
    suite = _SUITES.get(str(env_type), _classic)
    env_id = suite(t, env_type, policy)
    if t.create_out.get("env_manager.type") == "envpool":
        if suite is not _atari:
            raise ConfigError("DI-engine config key 'create_config.env_manager.type' = 'env_pool' cannot be honoured "
                              f"for env type {env_type!r}: EnvPool runs Atari envs here")  # fmt: skip
        _envpool(t)
    _act_scale(t, policy)
    t.put("env.id", env_id)
    return env_id
