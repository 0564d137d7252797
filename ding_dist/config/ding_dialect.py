"""DI-engine config files, unchanged: detect DI-engine's dialect and translate it with DI-engine's meaning.

A DI-engine config file (``main_config`` + ``create_config``, as in DI-engine's model zoo) is recognized by
its marks (``create_config.env.type`` naming a DI-engine env such as ``cartpole``, ``import_names``,
``policy.cuda``, ``policy.model.obs_shape``, ``policy.eval.evaluator``) and translated into ding_dist's
keys before the usual strict compilation. The translation follows what DI-engine *does* with each key,
not only its name; where a value's unit differs it is converted (DI-engine counts ``eval_freq`` in train
iterations, ding_dist in env steps), where DI-engine's default differs from ours the file gets DI-engine's
(a DI-engine DQN file gets ``discount_factor=0.97``, MSE loss, no gradient clipping, ...). Keys that do
not change training (``replay_path``, ``import_names``, env-manager tuning) are accepted and ignored with
the reason; keys that would need a feature ding_dist lacks for that policy (prioritized replay outside the
Q-learning family, ``n_episode`` collection outside ``pg``, ``unroll_len > 1``) are refused with a
:class:`~ding_dist.config.errors.ConfigError` naming the key, as is any key this module does not know (with the
closest key it does). Every decision goes into a :class:`TranslationReport`, printed once per job on rank 0.

Conversion of counts kept in train iterations (``eval_freq``, checkpoint and log hooks): DI-engine's serial
pipelines run ``update_per_collect`` train iterations per collect of ``n_sample`` env steps (off-policy;
its on-policy PPO runs one iteration, all epochs, per collect) and evaluate once ``eval_freq`` iterations
have passed since the last evaluation, i.e. every ``ceil(eval_freq / iterations_per_collect)`` collects.
The equivalent ding_dist frequency is that many collects in env steps:
``ceil(eval_freq / iterations_per_collect) * n_sample``.

Example:
    >>> main = {"env": {"stop_value": 195}, "policy": {"cuda": False, "eval": {"evaluator": {"eval_freq": 40}}}}
    >>> create = {"env": {"type": "cartpole"}, "policy": {"type": "dqn"}}
    >>> looks_like_ding(main, create)
    True
    >>> ours, our_create, _, report = translate_ding_config(main, create)
    >>> ours["env"]["id"], ours["policy"]["eval"]["eval_freq"], ours["policy"]["discount_factor"]
    ('CartPole-v0', 112, 0.97)
"""

from __future__ import annotations

import difflib
import hashlib
import importlib.util
import math
import os
import sys
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from easydict import EasyDict

from ding_dist.config.compile import apply_overrides, parse_override, to_plain
from ding_dist.config.errors import ConfigError
from ding_dist.config.rules import short_repr

__all__ = [
    "DING_ENV_IDS",
    "TranslationReport",
    "looks_like_ding",
    "translate_ding_config",
    "translate_if_ding",
]

#: DI-engine env types (``create_config.env.type``) -> gymnasium ids. DI-engine's CartPole is gym's v0
#: (200-step limit, solved at 195); its LunarLander is v2, which gymnasium 1.x replaced by v3.
DING_ENV_IDS = {
    "cartpole": "CartPole-v0",
    "pendulum": "Pendulum-v1",
    "lunarlander": "LunarLander-v3",
    "acrobot": "Acrobot-v1",
    "mountain_car": "MountainCar-v0",
}
_RENAMED_IDS = {"LunarLander-v2": "LunarLander-v3", "LunarLanderContinuous-v2": "LunarLanderContinuous-v3"}
_BOX2D_IDS = ("LunarLander-v3", "LunarLanderContinuous-v3")
#: DI-engine env manager types -> ours (sync: all envs in the process; async: one subprocess per env).
_ENV_MANAGERS = {"base": "sync", "subprocess": "async", "async_subprocess": "async"}
#: DI-engine policy type -> (the translator of its policy section, whether it learns on-policy); a translator is
#: added with :func:`translates`.
TRANSLATORS: dict[str, tuple[Callable[[_Translator], None], bool]] = {}
#: DI-engine's evaluator default: evaluate every 1000 train iterations.
_DING_EVAL_FREQ = 1000
_REPORTED_ENV = "DING_DIST_DING_REPORTED"  # inherited by the ranks a launcher starts: one report per job
_reported: set[str] = set()
_MISSING = object()
#: A gradient-norm bound no gradient reaches: "no clipping" where the key's default is a float.
NO_CLIP = 1e9
#: Policies whose actions live in [-1, 1] and are mapped onto the env's Box bounds (DI-engine's ``act_scale=True``).
_BOUNDS_MAPPED = ("sac", "td3", "ddpg", "bdq", "d4pg")
#: Policies that learn from whole episodes (``collect.n_episode``, DI-engine's episode collector).
_EPISODE_POLICIES = ("pg", "ppo_pg")


@dataclass
class TranslationReport:
    """What the translation of one DI-engine config did, key by key.

    ``lines`` holds ``(kind, text)`` pairs; kinds: ``mapped`` (same meaning, maybe renamed), ``converted``
    (value changed to keep DI-engine's meaning), ``default`` (DI-engine's default where ours differs),
    ``ignored`` (accepted, no effect here, with why), ``differs`` (DI-engine behaviour ding_dist does not
    reproduce exactly), ``set`` (a ``--set`` override).

    Example:
        >>> r = TranslationReport("cartpole_dqn_config.py", "dqn", "CartPole-v0")
        >>> r.add("ignored", "env.replay_path: no video recorder")
        >>> print(r.render())  # doctest: +NORMALIZE_WHITESPACE
        ding-dist: cartpole_dqn_config.py is a DI-engine config (policy dqn, env CartPole-v0); translated:
          ignored    env.replay_path: no video recorder
    """

    source: str
    policy: str
    env_id: str
    lines: list[tuple[str, str]] = field(default_factory=list)

    def add(self, kind: str, text: str) -> None:
        self.lines.append((kind, text))

    def of(self, kind: str) -> list[str]:
        """The texts of one kind, in order."""
        return [text for k, text in self.lines if k == kind]

    def render(self) -> str:
        """The report as printed: a header, then one line per decision (same-name mappings on one line)."""
        head = f"ding-dist: {self.source} is a DI-engine config (policy {self.policy}, env {self.env_id}); translated:"
        same = [text for kind, text in self.lines if kind == "same"]
        out = [head]
        if same:
            out += textwrap.wrap(", ".join(same), 116, initial_indent=f"  {'same':<10} ", subsequent_indent=" " * 13)
        out += [f"  {kind:<10} {text}" for kind, text in self.lines if kind != "same"]
        return "\n".join(out)


def _flatten(cfg: Mapping, prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``; an empty dict is a leaf (it says nothing)."""
    out: dict[str, Any] = {}
    for key, value in cfg.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(_flatten(value, path + "."))
        elif not (isinstance(value, Mapping) and not value):
            out[path] = value
    return out


def _nest(flat: Mapping[str, Any]) -> dict:
    out: dict = {}
    for path, value in flat.items():
        node = out
        *parents, leaf = path.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    return out


def looks_like_ding(main: Mapping, create: Mapping | None) -> bool:
    """True when ``(main_config, create_config)`` is written in DI-engine's dialect rather than ours.

    Marks: a ``create_config.env.type`` other than ``'gymnasium'``, any ``import_names`` in
    ``create_config``, ``policy.cuda`` / ``policy.multi_gpu``, ``policy.model.obs_shape`` /
    ``action_shape`` / ``encoder_hidden_size_list``, ``policy.eval.evaluator``.

    Example:
        >>> looks_like_ding({"env": {"id": "CartPole-v1"}}, {"env": {"type": "gymnasium"}})
        False
    """
    create = create or {}
    for section in create.values():
        if isinstance(section, Mapping) and "import_names" in section:
            return True
    env_type = (create.get("env") or {}).get("type") if isinstance(create.get("env"), Mapping) else None
    if env_type is not None and env_type != "gymnasium":
        return True
    policy = main.get("policy") if isinstance(main.get("policy"), Mapping) else {}
    if "cuda" in policy or "multi_gpu" in policy:
        return True
    model = policy.get("model") if isinstance(policy.get("model"), Mapping) else {}
    if any(k in model for k in ("obs_shape", "action_shape", "encoder_hidden_size_list")):
        return True
    evaluate = policy.get("eval") if isinstance(policy.get("eval"), Mapping) else {}
    return "evaluator" in evaluate


class _Translator:
    """One translation: reads DI-engine leaves (marking each one used), writes ours, and reports."""

    def __init__(self, main: Mapping, create: Mapping, source: str) -> None:
        self.main = _flatten(main)
        self.create = _flatten(create)
        self.used: set[str] = set()
        self.known: set[str] = set()  # every DI-engine key this translation knows (for suggestions)
        self.out: dict[str, Any] = {}
        self.create_out: dict[str, Any] = {}
        self.report = TranslationReport(source, "?", "?")

    # --- reading -------------------------------------------------------------------------------------------
    def has(self, path: str) -> bool:
        self.known.add(path)
        return path in self.main

    def take(self, path: str, default: Any = _MISSING) -> Any:
        """The file's value at ``path`` (marked used), else ``default``."""
        self.known.add(path)
        if path in self.main:
            self.used.add(path)
            return self.main[path]
        return default

    def under(self, prefix: str) -> list[str]:
        return [p for p in self.main if p.startswith(prefix + ".")]

    # --- writing -------------------------------------------------------------------------------------------
    def put(self, path: str, value: Any) -> None:
        self.out[path] = value

    def same(self, path: str, ours: str | None = None) -> Any:
        """A key with the same meaning: copied (renamed to ``ours`` when given)."""
        value = self.take(path)
        if value is not _MISSING:
            target = ours or path
            self.put(target, value)
            self.report.add("same" if target == path else "mapped", path if target == path else f"{path} -> {target}")
        return value

    def default(self, path: str, ours: str, value: Any, why: str) -> Any:
        """``path`` from the file, else DI-engine's default ``value`` (reported as such); written to ``ours``."""
        given = self.take(path)
        if given is _MISSING:
            self.put(ours, value)
            self.report.add("default", f"{ours}={short_repr(value)} ({why})")
            return value
        self.put(ours, given)
        if ours == path:
            self.report.add("same", path)
        else:
            self.report.add("mapped", f"{path}={short_repr(given)} -> {ours}")
        return given

    def ignore(self, path: str, why: str) -> None:
        if self.take(path) is not _MISSING:
            self.report.add("ignored", f"{path}: {why}")

    def ignore_under(self, prefix: str, why: str) -> None:
        self.known.add(prefix)
        paths = self.under(prefix) + ([prefix] if prefix in self.main else [])
        for path in paths:
            self.used.add(path)
        if paths:
            self.report.add("ignored", f"{prefix}.*: {why}" if prefix not in paths else f"{prefix}: {why}")

    def require(self, path: str, ok: Any, why: str) -> Any:
        """Accept ``path`` only with a value in ``ok`` (a tuple of allowed values); refuse it otherwise."""
        value = self.take(path)
        if value is not _MISSING and value not in ok:
            raise ConfigError(f"DI-engine config key {path!r} = {short_repr(value)} cannot be honoured: {why}")
        return value


def _int_at_least(t: _Translator, path: str, value: Any, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(f"DI-engine config key {path!r} must be an int >= {low}, got {short_repr(value)}")
    return value


def translates(policy_type: str, *, on_policy: bool) -> Callable[[Callable[[_Translator], None]], Callable]:
    """Decorator: ``fn(t)`` translates the policy section of DI-engine configs of ``policy_type``.

    Example::

        @translates("dqn", on_policy=False)
        def _dqn(t): ...
    """

    def add(fn: Callable[[_Translator], None]) -> Callable[[_Translator], None]:
        if policy_type in TRANSLATORS:
            raise ValueError(f"DI-engine policy type {policy_type!r} already has a translator")
        TRANSLATORS[policy_type] = (fn, on_policy)
        return fn

    return add


def _per_collect(iters: int, iters_per_collect: float, n_sample: int) -> int:
    """DI-engine's ``iters`` train iterations, as env steps: whole collects of ``n_sample`` env steps."""
    return max(1, math.ceil(iters / iters_per_collect)) * n_sample


# ------------------------------------------------------------------------------------------------ sections
#: How alike two names must be (difflib's ratio) for one to be suggested for the other: a typo, not a neighbour.
_CLOSE = 0.75
#: DI-engine policy types of kinds ding_dist has none of (it trains single-agent, model-free, online policies).
_OTHER_KINDS = {
    "offline or imitation learning (from a dataset or demonstrations)": (
        "bc", "bco", "bcq", "cql", "discrete_cql", "td3_bc", "iql", "edac", "dt", "ibc", "IL", "dqfd", "sqil_sac",
        "r2d3", "qgpo", "pd",
    ),
    "multi-agent RL": ("qmix", "wqmix", "qtran", "coma", "collaq", "atoc", "madqn", "happo", "mappo", "masac"),
    "model-based RL": ("dreamer", "mbsac", "stevesac"),
}  # fmt: skip


def _refuse_reward_model(t: _Translator, policy: str) -> None:
    """DI-engine's reward models (RND, ICM, TREX, GAIL, ...: ``reward_model`` in either config) are one line."""
    kind = t.create.get("reward_model.type") or t.main.get("reward_model.type")
    if kind is None and not any(k.startswith("reward_model.") for k in (*t.create, *t.main)):
        return
    where = "create_config.reward_model" if any(k.startswith("reward_model.") for k in t.create) else "reward_model"
    name = f"reward model {kind!r}" if kind else "reward model"
    raise ConfigError(
        f"DI-engine config key {where!r} cannot be honoured: ding_dist has no reward models (DI-engine's RND, ICM, "
        f"TREX, GAIL, ...), so its {name} would be left out; remove reward_model from the file (and from "
        f"create_config) to train the plain {policy!r} policy on the env's reward"
    )


def _create_section(t: _Translator) -> tuple[str, str | None]:
    c = t.create
    for path in list(c):
        if path.endswith("import_names"):
            t.report.add("ignored", f"create_config.{path}: imports for DI-engine's registries, not needed here")
    policy = c.get("policy.type")
    if policy is None:
        raise ConfigError("create_config.policy.type is missing; DI-engine configs name the policy there")
    _refuse_reward_model(t, policy)
    if policy not in TRANSLATORS:
        kind = next((kind for kind, names in _OTHER_KINDS.items() if policy in names), None)
        close = difflib.get_close_matches(str(policy), list(TRANSLATORS), n=1, cutoff=_CLOSE)
        hint = f" (closest: {close[0]!r})" if close and kind is None else ""
        what = f": {policy!r} is DI-engine's {kind}, which ding_dist does not have;" if kind else ":"
        raise ConfigError(
            f"DI-engine config key 'create_config.policy.type' = {policy!r} cannot be honoured{what} ding_dist has "
            f"the policies {sorted(TRANSLATORS)}{hint}"
        )
    manager = c.get("env_manager.type", "base")
    if manager not in _ENV_MANAGERS:
        raise ConfigError(
            f"DI-engine config key 'create_config.env_manager.type' = {manager!r} cannot be honoured; "
            f"known: {sorted(_ENV_MANAGERS)}"
        )
    t.create_out.update({"env.type": "gymnasium", "env_manager.type": _ENV_MANAGERS[manager], "policy.type": policy})
    if "env_manager.type" in c:
        t.report.add("mapped", f"create_config.env_manager.type={manager!r} -> {_ENV_MANAGERS[manager]!r}")
    rb = c.get("replay_buffer.type")
    if rb is not None:
        if rb not in ("naive", "deque", "advanced", "replay"):
            raise ConfigError(
                f"DI-engine config key 'create_config.replay_buffer.type' = {rb!r} cannot be honoured: ding_dist "
                "has a uniform replay buffer ('naive', 'deque' or 'advanced' without priority)"
            )
        t.create_out["replay_buffer.type"] = "replay"
        t.report.add("mapped", f"create_config.replay_buffer.type={rb!r} -> replay buffer (by policy.priority)")
    allowed = {"env.type", "env.import_names", "env_manager.type", "policy.type", "policy.import_names"}
    allowed |= {"replay_buffer.type", "replay_buffer.import_names"}
    for ring in ("policy", "value") if policy == "ppg_offpolicy" else ():  # PPG's two buffers, a type each
        kind = c.get(f"replay_buffer.{ring}.type")
        if kind is not None:
            if kind not in ("naive", "deque", "advanced"):
                raise ConfigError(f"DI-engine config key 'create_config.replay_buffer.{ring}.type' = {kind!r} cannot "
                                  "be honoured: PPG's rings are uniform ('naive', 'deque' or 'advanced')")  # fmt: skip
            allowed.add(f"replay_buffer.{ring}.type")
            t.report.add("mapped", f"create_config.replay_buffer.{ring}.type={kind!r} -> PPG's {ring} ring (uniform)")
    collector = c.get("collector.type")
    if collector is not None:  # DI-engine's sample collector, or its episode collector for whole-episode policies
        if collector not in ("sample", *(("episode",) if policy in _EPISODE_POLICIES else ())):
            raise ConfigError(
                f"DI-engine config key 'create_config.collector.type' = {collector!r} cannot be honoured: ding_dist "
                "collects n_sample env steps per iteration ('episode' only for policies that learn from whole "
                f"episodes: {sorted(_EPISODE_POLICIES)})"
            )
        allowed |= {"collector.type", "collector.import_names"}
        t.report.add("mapped", f"create_config.collector.type={collector!r} -> rollouts of n_sample env steps")
    for path in c:
        if path not in allowed:
            close = difflib.get_close_matches(path, sorted(allowed), n=1, cutoff=_CLOSE)
            hint = f" (did you mean 'create_config.{close[0]}'?)" if close else ""
            raise ConfigError(f"DI-engine config key 'create_config.{path}' cannot be honoured by ding_dist{hint}")
    return policy, c.get("env.type")


def _env_section(t: _Translator, env_type: str | None, policy: str) -> str:
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
    t.ignore_under("env.manager", "DI-engine env-manager tuning; the manager is create_config.env_manager.type")
    t.ignore("env.type", "the env comes from create_config.env.type")
    t.ignore("env.import_names", "DI-engine module imports; envs come from gymnasium")
    env_id = t.take("env.env_id", None)
    continuous = t.take("env.continuous", False)
    if env_id is None:
        if env_type not in DING_ENV_IDS:
            close = difflib.get_close_matches(str(env_type), list(DING_ENV_IDS), n=1, cutoff=0.5)
            hint = f" (closest: {close[0]!r})" if close else ""
            raise ConfigError(
                f"DI-engine config key 'create_config.env.type' = {env_type!r} cannot be honoured: known DI-engine "
                f"envs are {sorted(DING_ENV_IDS)}{hint}; or give a gymnasium id with --set env.id=..."
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
    elif env_id in _RENAMED_IDS:
        t.report.add("mapped", f"env.env_id={env_id!r} -> env.id={_RENAMED_IDS[env_id]!r} (gymnasium 1.x renamed it)")
        env_id = _RENAMED_IDS[env_id]
    else:
        t.report.add("mapped", f"env.env_id={env_id!r} -> env.id")
    if env_id in _BOX2D_IDS and importlib.util.find_spec("Box2D") is None:
        raise ConfigError(
            f"DI-engine env {env_type or env_id!r} is gymnasium's {env_id}, which needs Box2D and it is not "
            "installed: pip install swig 'gymnasium[box2d]'"
        )
    act_scale = t.take("env.act_scale", _MISSING)
    if act_scale is not _MISSING:
        name = policy.upper()
        if policy in _BOUNDS_MAPPED and act_scale is True:
            t.report.add(
                "mapped", f"env.act_scale=True: {name} maps its [-1, 1] actions onto the env's bounds, as here"
            )
        elif policy in _BOUNDS_MAPPED:
            raise ConfigError(
                f"DI-engine config key 'env.act_scale' = False cannot be honoured: ding_dist's {name} always maps its "
                "[-1, 1] actions onto the env's bounds"
            )
        else:
            t.report.add("differs", f"env.act_scale={act_scale!r}: PPO's Gaussian samples are clipped to the bounds")
    t.put("env.id", env_id)
    return env_id


def _common_policy(t: _Translator, policy: str) -> None:
    cuda = t.take("policy.cuda", False)
    device = "auto" if cuda else "cpu"
    t.put("policy.device", device)
    why = "the rank's GPU when there is one, else the CPU" if cuda else "DI-engine's default: no GPU"
    t.report.add(
        "mapped" if t.has("policy.cuda") else "default", f"policy.cuda={cuda!r} -> policy.device={device!r} ({why})"
    )
    for path in ("policy.multi_gpu", "policy.learn.multi_gpu"):
        if t.take(path, _MISSING) is not _MISSING:
            t.report.add("ignored", f"{path}: gradients are always synchronized when there is more than one process")
    on_policy = t.take("policy.on_policy", TRANSLATORS[policy][1])
    if on_policy != TRANSLATORS[policy][1]:
        raise ConfigError(f"DI-engine config key 'policy.on_policy' = {on_policy!r} cannot be honoured for {policy}")
    for path in ("policy.priority", "policy.priority_IS_weight"):
        if policy not in _PRIORITY_POLICIES:
            t.require(path, (False,), f"prioritized replay is implemented for {sorted(_PRIORITY_POLICIES)} only")
    t.require("policy.multi_agent", (False,), "ding_dist has no multi-agent policies")
    if policy not in _TRAJECTORY_POLICIES:  # IMPALA's unroll_len is its V-trace horizon (its translator)
        t.require("policy.collect.unroll_len", (1,), "ding_dist learns from single transitions (unroll_len=1)")
    if t.has("policy.collect.n_episode") and policy not in _EPISODE_POLICIES:
        raise ConfigError(
            "DI-engine config key 'policy.collect.n_episode' cannot be honoured: ding_dist collects a fixed number "
            "of env steps per iteration (did you mean 'policy.collect.n_sample'?)"
        )
    t.require("policy.learn.resume_training", (False,), "resume a ding_dist run with --resume EXP_DIR")
    t.require("policy.learn.learner.hook.load_ckpt_before_run", ("",), "continue a run with --resume EXP_DIR")
    t.require("policy.learn.lr_scheduler", (None,), "ding_dist uses a constant learning rate")
    t.ignore("policy.load_path", "used by DI-engine's eval entry; here: ding-dist eval CONFIG --ckpt PATH")
    t.ignore("policy.type", "the policy is create_config.policy.type")
    t.ignore("policy.model.obs_shape", "taken from the env's observation space")
    t.ignore("policy.model.action_shape", "taken from the env's action space")
    t.ignore("policy.learn.learner.hook.save_ckpt_after_run", "a checkpoint is always written at the end")
    t.ignore_under("policy.other.commander", "DI-engine's serial commander has nothing to do here")
    t.ignore_under("policy.eval.evaluator.render", "no rendering")
    t.ignore("policy.eval.evaluator.figure_path", "no rendering")
    t.require("policy.eval.evaluator.type", ("interaction",), "ding_dist evaluates by playing episodes")
    t.require("policy.collect.collector.type", ("sample",), "ding_dist collects samples (n_sample)")
    t.ignore("policy.collect.collector.collect_print_freq", "progress is logged every other.log_freq env steps")
    for key in ("monitor", "periodic_thruput_seconds", "deepcopy", "enable_track_used_data", "type"):
        t.ignore_under(f"policy.other.replay_buffer.{key}", "replay-buffer bookkeeping, not sampling")
    max_use = t.take("policy.other.replay_buffer.max_use", float("inf"))
    if max_use != float("inf"):  # DI-engine's pendulum DDPG file sets 16, which its sampling rate rarely reaches
        t.report.add(
            "differs",
            f"policy.other.replay_buffer.max_use={short_repr(max_use)}: no per-sample use limit here; a sample "
            "leaves the buffer when it is overwritten",
        )
    t.same("policy.learn.batch_size")
    if t.has("policy.eval.evaluator.n_episode"):
        t.same("policy.eval.evaluator.n_episode", "env.n_evaluator_episode")
    if t.has("policy.eval.evaluator.stop_value"):
        t.same("policy.eval.evaluator.stop_value", "env.stop_value")
    for path in list(t.main):  # DI-engine's compiled configs carry a cfg_type marker per section
        if path.endswith("cfg_type"):
            t.used.add(path)


def _iteration_counts(t: _Translator, iters_per_collect: int, n_sample: Any, what: str) -> None:
    """eval_freq and the learner's checkpoint/log hooks: DI-engine's train iterations -> our env steps."""
    n_sample = _int_at_least(t, "policy.collect.n_sample", n_sample, 1)
    explain = f"{what} and {n_sample} env steps per collect"
    given = t.take("policy.eval.evaluator.eval_freq")
    iters = _DING_EVAL_FREQ if given is _MISSING else _int_at_least(t, "policy.eval.evaluator.eval_freq", given, 0)
    steps = _per_collect(iters, iters_per_collect, n_sample)
    t.put("policy.eval.eval_freq", steps)
    where = "policy.eval.evaluator.eval_freq" if given is not _MISSING else "DI-engine's default eval_freq"
    t.report.add("converted", f"{where}={iters} train iters -> policy.eval.eval_freq={steps} env steps ({explain})")
    for di_key, ours in (
        ("policy.learn.learner.hook.save_ckpt_after_iter", "policy.other.checkpoint.freq"),
        ("policy.learn.learner.hook.log_show_after_iter", "policy.other.log_freq"),
    ):
        value = t.take(di_key)
        if value is not _MISSING:
            steps = _per_collect(_int_at_least(t, di_key, value, 1), iters_per_collect, n_sample)
            t.put(ours, steps)
            t.report.add("converted", f"{di_key}={value} train iters -> {ours}={steps} env steps")


@translates("dqn", on_policy=False)
def _dqn(t: _Translator) -> None:
    d = "DI-engine's DQN default"
    t.default("policy.discount_factor", "policy.discount_factor", 0.97, d)
    t.default("policy.nstep", "policy.nstep", 1, d)
    encoder = list(t.take("policy.model.encoder_hidden_size_list", [128, 128, 64]))
    dueling = t.take("policy.model.dueling", True)
    head = t.take("policy.model.head_hidden_size", None) or encoder[-1]
    layers = t.take("policy.model.head_layer_num", 1)
    t.require("policy.model.dropout", (None,), "ding_dist's Q-network has no dropout")
    t.require("policy.model.norm_type", (None,), "ding_dist's Q-network has no normalization layers")
    if dueling:
        if layers != 1 or head != encoder[-1]:
            raise ConfigError(
                "DI-engine config keys 'policy.model.head_hidden_size'/'head_layer_num' cannot be honoured with "
                f"dueling: ding_dist's dueling head has one hidden layer of the encoder's width ({encoder[-1]})"
            )
        hidden = encoder
    else:  # DI-engine's plain head adds head_layer_num hidden layers before the output
        hidden = encoder + [head] * _int_at_least(t, "policy.model.head_layer_num", layers, 0)
    t.put("policy.model.hidden_sizes", hidden)
    t.put("policy.model.dueling", bool(dueling))
    t.put("policy.model.activation", "relu")
    t.report.add(
        "mapped",
        f"policy.model encoder_hidden_size_list={encoder}, dueling={dueling!r} -> policy.model.hidden_sizes={hidden}, "
        f"dueling={bool(dueling)!r} (ReLU)",
    )
    t.default("policy.learn.learning_rate", "policy.learn.learning_rate", 1e-3, d)
    upc = t.default("policy.learn.update_per_collect", "policy.learn.update_per_collect", 3, d)
    t.default("policy.learn.target_update_freq", "policy.learn.target_update_freq", 100, d)
    t.ignore(
        "policy.learn.target_theta",
        "DI-engine's DQN uses target_update_freq (hard copies) whenever it is set, and its default sets it",
    )
    t.put("policy.learn.target_theta", None)
    ignore_done = t.take("policy.learn.ignore_done", False)
    if ignore_done:
        t.report.add("differs", "policy.learn.ignore_done=True: time-limit ends bootstrap here; terminations do not")
    t.put("policy.learn.loss", "mse")
    t.put("policy.learn.grad_clip_norm", NO_CLIP)
    t.put("policy.learn.double", True)
    t.report.add(
        "default", f"policy.learn.loss='mse', double=True, grad_clip_norm={NO_CLIP:g} (DI-engine's DQN: no clipping)"
    )
    n_sample = t.default("policy.collect.n_sample", "policy.collect.n_sample", 8, d)
    batch = t.out.get("policy.learn.batch_size", 64)
    t.put("policy.learn.batch_size", batch)
    random_collect = t.take("policy.random_collect_size", 0)
    starts = max(int(batch), int(random_collect))
    t.put("policy.learn.learning_starts", starts)
    t.report.add("converted", f"policy.learn.learning_starts={starts} (DI-engine trains once the buffer holds a batch)")
    for key, value in (("type", "exp"), ("start", 0.95), ("end", 0.1), ("decay", 10000)):
        t.default(f"policy.other.eps.{key}", f"policy.other.eps.{key}", value, d)
    t.default(
        "policy.other.replay_buffer.replay_buffer_size", "policy.other.replay_buffer.replay_buffer_size", 10000, d
    )
    _priority(t, d)
    _iteration_counts(t, _int_at_least(t, "policy.learn.update_per_collect", upc, 1), n_sample, f"{upc} train iters")


#: Policies whose translator maps DI-engine's prioritized replay (``policy.priority``, ``priority_IS_weight``).
_PRIORITY_POLICIES = ("dqn", "c51", "qrdqn", "mdqn", "iqn", "rainbow", "sql", "fqf", "bdq", "r2d2", "d4pg")


def _priority(t: _Translator, d: str, on: bool = False) -> None:
    """DI-engine's prioritized replay keys, same meaning (its advanced buffer's alpha, beta and anneal_step, counted
    in sample calls as ours); ``on``: the policy's DI-engine default for ``priority`` and ``priority_IS_weight``."""
    t.default("policy.priority", "policy.priority", on, d)
    t.default("policy.priority_IS_weight", "policy.priority_IS_weight", on, d)
    for key, value in (("alpha", 0.6), ("beta", 0.4), ("anneal_step", 100_000)):
        path = f"policy.other.replay_buffer.{key}"
        t.default(path, path, value, "DI-engine's prioritized buffer default")


@translates("ppo", on_policy=True)
def _ppo(t: _Translator) -> None:
    d = "DI-engine's PPO default"
    if t.has("policy.learn.update_per_collect"):
        raise ConfigError(
            "DI-engine config key 'policy.learn.update_per_collect' is not read by DI-engine's on-policy PPO "
            "(did you mean 'policy.learn.epoch_per_collect'?)"
        )
    _vac_model(t, "PPO")
    ppo_init = t.take("policy.learn.ppo_param_init", True)
    if ppo_init:
        t.put("policy.model.log_std_init", -0.5)
    for key, value in (
        ("epoch_per_collect", 10),
        ("learning_rate", 3e-4),
        ("value_weight", 0.5),
        ("entropy_weight", 0.0),
        ("clip_ratio", 0.2),
        ("adv_norm", True),
    ):
        t.default(f"policy.learn.{key}", f"policy.learn.{key}", value, d)
    clip = t.out["policy.learn.clip_ratio"]
    t.put("policy.learn.value_clip_ratio", clip)
    t.report.add(
        "default", f"policy.learn.value_clip_ratio={clip!r} (DI-engine's PPO clips the value loss by clip_ratio)"
    )
    clip_type = t.require("policy.learn.grad_clip_type", ("clip_norm", None), "only gradient-norm clipping")
    clip_value = t.take("policy.learn.grad_clip_value", 0.5)
    t.put("policy.learn.grad_clip_norm", NO_CLIP if clip_type is None else clip_value)
    t.report.add(
        "mapped", f"policy.learn.grad_clip_type/value -> grad_clip_norm={None if clip_type is None else clip_value!r}"
    )
    value_norm = t.take("policy.learn.value_norm", True)
    recompute = t.take("policy.recompute_adv", True)
    lacking = [name for name, on in (("value_norm", value_norm), ("recompute_adv", recompute)) if on]
    if lacking:
        t.report.add("differs", f"{', '.join(lacking)}=True: not implemented here (advantages once per collect)")
    if t.take("policy.learn.ignore_done", False):
        t.report.add("differs", "policy.learn.ignore_done=True: time-limit ends bootstrap here; terminations do not")
    t.require("policy.nstep_return", (False,), "ding_dist's PPO uses GAE returns")
    t.ignore("policy.transition_with_policy_data", "rollouts always keep log-probs and values")
    for key, value in (("discount_factor", 0.99), ("gae_lambda", 0.95)):
        t.default(f"policy.collect.{key}", f"policy.collect.{key}", value, d)
    n_sample = t.take("policy.collect.n_sample", _MISSING)
    if n_sample is _MISSING:
        raise ConfigError(
            "DI-engine config key 'policy.collect.n_sample' is required for PPO (DI-engine has no default)"
        )
    t.put("policy.collect.n_sample", _int_at_least(t, "policy.collect.n_sample", n_sample, 1))
    t.report.add("same", "policy.collect.n_sample")
    if "policy.learn.batch_size" not in t.out:
        t.put("policy.learn.batch_size", 64)
    _iteration_counts(t, 1, n_sample, "1 train iter (all epochs)")


@translates("sac", on_policy=False)
def _sac(t: _Translator) -> None:
    d = "DI-engine's SAC default"
    t.require("policy.model.twin_critic", (True,), "ding_dist's SAC always has twin critics")
    t.require("policy.model.action_space", ("reparameterization",), "ding_dist's SAC samples reparameterized")
    t.require("policy.model.actor_head_type", ("reparameterization",), "ding_dist's SAC samples reparameterized")
    t.require("policy.model.value_network", (False,), "ding_dist's SAC has no separate value network")
    t.require("policy.learn.value_network", (False,), "ding_dist's SAC has no separate value network")
    t.require("policy.learn.reparameterization", (True,), "ding_dist's SAC samples reparameterized")
    t.require("policy.learn.log_space", (True,), "ding_dist tunes log(alpha)")
    actor = (t.take("policy.model.actor_head_hidden_size", 64), t.take("policy.model.actor_head_layer_num", 1))
    critic = (t.take("policy.model.critic_head_hidden_size", 64), t.take("policy.model.critic_head_layer_num", 1))
    actor_hidden, critic_hidden = [actor[0]] * (1 + actor[1]), [critic[0]] * (1 + critic[1])
    t.put("policy.model.actor_hidden_sizes", actor_hidden)
    t.put("policy.model.critic_hidden_sizes", critic_hidden)
    t.put("policy.model.activation", "relu")
    t.report.add(
        "mapped",
        f"policy.model head sizes -> actor_hidden_sizes={actor_hidden}, critic_hidden_sizes={critic_hidden}",
    )
    t.report.add("differs", "log-std bounds: squashed into [-5, 2] here, clamped to [-20, 2] in DI-engine")
    t.ignore("policy.learn.init_w", "the last layers keep torch's default initialization")
    t.ignore("policy.collect.noise_sigma", "SAC explores by sampling its policy")
    t.ignore("policy.collect.collector_logit", "SAC stores actions only")
    for key, value in (
        ("learning_rate_q", 3e-4),
        ("learning_rate_policy", 3e-4),
        ("learning_rate_alpha", 3e-4),
        ("target_theta", 0.005),
        ("alpha", 0.2),
        ("auto_alpha", True),
    ):
        t.default(f"policy.learn.{key}", f"policy.learn.{key}", value, d)
    if t.has("policy.learn.target_entropy"):
        t.same("policy.learn.target_entropy")
    t.default("policy.learn.discount_factor", "policy.discount_factor", 0.99, d)
    upc = t.default("policy.learn.update_per_collect", "policy.learn.update_per_collect", 1, d)
    n_sample = t.default("policy.collect.n_sample", "policy.collect.n_sample", 1, d)
    batch = t.out.get("policy.learn.batch_size", 256)
    t.put("policy.learn.batch_size", batch)
    random_collect = t.take("policy.random_collect_size", 10000)
    starts = max(int(batch), int(random_collect))
    t.put("policy.learn.learning_starts", starts)
    t.report.add(
        "converted",
        f"policy.random_collect_size={random_collect} -> policy.learn.learning_starts={starts} (random actions)",
    )
    if t.take("policy.learn.ignore_done", False):
        t.report.add("mapped", "policy.learn.ignore_done=True: time-limit ends bootstrap here (gymnasium truncation)")
    t.put("policy.learn.grad_clip_norm", None)
    t.default(
        "policy.other.replay_buffer.replay_buffer_size", "policy.other.replay_buffer.replay_buffer_size", 1_000_000, d
    )
    _iteration_counts(t, _int_at_least(t, "policy.learn.update_per_collect", upc, 1), n_sample, f"{upc} train iters")


def _deterministic_actor_critic(t: _Translator, name: str, twin: bool, actor_every: int, noise: bool) -> None:
    """TD3 and DDPG (DI-engine's DDPG policy with TD3's or DDPG's defaults): the same keys, different defaults."""
    d = f"DI-engine's {name} default"
    t.require("policy.action_space", ("continuous",), f"ding_dist's {name} acts on Box action spaces")
    for path in ("policy.model.action_space", "policy.model.actor_head_type"):
        t.require(path, ("regression",), f"ding_dist's {name} actor is deterministic (tanh regression)")
    for path in ("policy.use_reward_batch_norm", "policy.reward_batch_norm"):
        t.require(path, (False,), "rewards are not normalized here")
    t.default("policy.model.twin_critic", "policy.model.twin_critic", twin, d)
    actor = (t.take("policy.model.actor_head_hidden_size", 64), t.take("policy.model.actor_head_layer_num", 1))
    critic = (t.take("policy.model.critic_head_hidden_size", 64), t.take("policy.model.critic_head_layer_num", 1))
    actor_hidden, critic_hidden = [actor[0]] * (1 + actor[1]), [critic[0]] * (1 + critic[1])
    t.put("policy.model.actor_hidden_sizes", actor_hidden)
    t.put("policy.model.critic_hidden_sizes", critic_hidden)
    t.put("policy.model.activation", "relu")
    t.report.add(
        "mapped",
        f"policy.model head sizes -> actor_hidden_sizes={actor_hidden}, critic_hidden_sizes={critic_hidden} (ReLU)",
    )
    for key, value in (
        ("learning_rate_actor", 1e-3),
        ("learning_rate_critic", 1e-3),
        ("target_theta", 0.005),
        ("actor_update_freq", actor_every),
        ("noise", noise),
    ):
        t.default(f"policy.learn.{key}", f"policy.learn.{key}", value, d)
    if t.out["policy.learn.noise"]:  # target policy smoothing
        t.default("policy.learn.noise_sigma", "policy.learn.noise_sigma", 0.2, d)
        for key, value in (("min", -0.5), ("max", 0.5)):
            t.default(f"policy.learn.noise_range.{key}", f"policy.learn.noise_range.{key}", value, d)
    else:
        for key in ("noise_sigma", "noise_range.min", "noise_range.max"):
            t.ignore(f"policy.learn.{key}", "no target policy smoothing (learn.noise=False)")
    t.default("policy.collect.noise_sigma", "policy.collect.noise_sigma", 0.1, d)
    t.default("policy.learn.discount_factor", "policy.discount_factor", 0.99, d)
    upc = t.default("policy.learn.update_per_collect", "policy.learn.update_per_collect", 1, d)
    n_sample = t.default("policy.collect.n_sample", "policy.collect.n_sample", 1, d)
    batch = t.out.get("policy.learn.batch_size", 256)
    t.put("policy.learn.batch_size", batch)
    random_collect = t.take("policy.random_collect_size", 25000)
    starts = max(int(batch), int(random_collect))
    t.put("policy.learn.learning_starts", starts)
    t.report.add(
        "converted",
        f"policy.random_collect_size={random_collect} -> policy.learn.learning_starts={starts} (random actions)",
    )
    if t.take("policy.learn.ignore_done", False):
        t.report.add("mapped", "policy.learn.ignore_done=True: time-limit ends bootstrap here (gymnasium truncation)")
    t.put("policy.learn.grad_clip_norm", None)
    size = 100_000 if name == "TD3" else 1_000_000
    t.default("policy.other.replay_buffer.replay_buffer_size", "policy.other.replay_buffer.replay_buffer_size", size, d)
    _iteration_counts(t, _int_at_least(t, "policy.learn.update_per_collect", upc, 1), n_sample, f"{upc} train iters")


@translates("td3", on_policy=False)
def _td3(t: _Translator) -> None:
    _deterministic_actor_critic(t, "TD3", twin=True, actor_every=2, noise=True)


@translates("ddpg", on_policy=False)
def _ddpg(t: _Translator) -> None:
    _deterministic_actor_critic(t, "DDPG", twin=False, actor_every=1, noise=False)


def _q_family(
    t: _Translator,
    name: str,
    defaults: Mapping[str, Any],
    dueling: bool = False,
    split_head: bool = False,
    always_dueling: bool = False,
    lr_key: str = "policy.learn.learning_rate",
) -> None:
    """The keys DI-engine's value-based policies (C51, QR-DQN, MDQN, IQN) share with its DQN, with the policy's
    own ``defaults`` (``discount_factor``, ``nstep``, ``learning_rate``, ``update_per_collect``,
    ``target_update_freq``, ``replay_buffer_size``, ``n_sample``: None where DI-engine has none); ``dueling``:
    DI-engine's default for ``model.dueling`` (its DQN network), else the model has a plain head; ``split_head``:
    the head's hidden layers go to ``model.head_hidden_sizes`` (IQN: they follow the quantile embedding);
    ``always_dueling``: a dueling head with no ``model.dueling`` key (Rainbow); ``lr_key``: the DI-engine key of the
    learning rate (FQF's ``learning_rate_quantile``). ``defaults`` may also hold ``eps``
    (type, start, end, decay), ``batch_size`` and ``random_collect_size`` where they differ from DQN's."""
    d = f"DI-engine's {name} default"
    t.default("policy.discount_factor", "policy.discount_factor", defaults["discount_factor"], d)
    t.default("policy.nstep", "policy.nstep", defaults["nstep"], d)
    encoder = list(t.take("policy.model.encoder_hidden_size_list", [128, 128, 64]))
    head = t.take("policy.model.head_hidden_size", None) or encoder[-1]
    layers = _int_at_least(t, "policy.model.head_layer_num", t.take("policy.model.head_layer_num", 1), 0)
    t.require("policy.model.dropout", (None,), f"ding_dist's {name} network has no dropout")
    t.require("policy.model.norm_type", (None,), f"ding_dist's {name} network has no normalization layers")
    if always_dueling or (dueling and t.take("policy.model.dueling", True)):
        if layers != 1 or head != encoder[-1]:
            raise ConfigError(
                "DI-engine config keys 'policy.model.head_hidden_size'/'head_layer_num' cannot be honoured with "
                f"dueling: ding_dist's dueling head has one hidden layer of the encoder's width ({encoder[-1]})"
            )
        hidden, head_text = encoder, "a dueling head"
        if not always_dueling:
            t.put("policy.model.dueling", True)
    elif split_head:  # IQN: the encoder's features times the quantile embedding, then the head's layers
        if head != encoder[-1]:
            raise ConfigError(
                "DI-engine config key 'policy.model.head_hidden_size' cannot be honoured: the quantile embedding "
                f"multiplies the encoder's features, so the head has the encoder's width ({encoder[-1]})"
            )
        hidden, head_text = encoder, f"the quantile embedding, then {layers} hidden layer(s) of {head}"
        t.put("policy.model.head_hidden_sizes", [head] * layers)
    else:  # the head's hidden layers follow the encoder's
        hidden, head_text = encoder + [head] * layers, f"a plain head of {layers} hidden layer(s)"
        if dueling:
            t.put("policy.model.dueling", False)
    t.put("policy.model.hidden_sizes", hidden)
    t.put("policy.model.activation", "relu")
    t.report.add("mapped", f"policy.model encoder={encoder}, {head_text} -> policy.model.hidden_sizes={hidden} (ReLU)")
    t.default(lr_key, "policy.learn.learning_rate", defaults["learning_rate"], d)
    upc = t.default("policy.learn.update_per_collect", "policy.learn.update_per_collect", defaults["upc"], d)
    t.default("policy.learn.target_update_freq", "policy.learn.target_update_freq", defaults["target_update_freq"], d)
    t.put("policy.learn.target_theta", None)
    if t.take("policy.learn.ignore_done", False):
        t.report.add("differs", "policy.learn.ignore_done=True: time-limit ends bootstrap here; terminations do not")
    t.put("policy.learn.grad_clip_norm", NO_CLIP)
    t.report.add("default", f"policy.learn.grad_clip_norm={NO_CLIP:g} (DI-engine's {name}: no clipping)")
    if defaults["n_sample"] is None and not t.has("policy.collect.n_sample"):
        raise ConfigError(f"DI-engine config key 'policy.collect.n_sample' is required for {name} (no default)")
    n_sample = t.default("policy.collect.n_sample", "policy.collect.n_sample", defaults["n_sample"], d)
    batch = t.out.get("policy.learn.batch_size", defaults.get("batch_size", 64))
    t.put("policy.learn.batch_size", batch)
    starts = max(int(batch), int(t.take("policy.random_collect_size", defaults.get("random_collect_size", 0))))
    t.put("policy.learn.learning_starts", starts)
    t.report.add(
        "converted",
        f"policy.learn.learning_starts={starts} (DI-engine trains once the buffer holds a batch and "
        "its random_collect_size)",
    )
    for key, value in zip(("type", "start", "end", "decay"), defaults.get("eps", ("exp", 0.95, 0.1, 10000))):
        t.default(f"policy.other.eps.{key}", f"policy.other.eps.{key}", value, d)
    size = defaults["replay_buffer_size"]
    t.default("policy.other.replay_buffer.replay_buffer_size", "policy.other.replay_buffer.replay_buffer_size", size, d)
    _priority(t, d, defaults.get("priority", False))
    _iteration_counts(t, _int_at_least(t, "policy.learn.update_per_collect", upc, 1), n_sample, f"{upc} train iters")


#: DI-engine 0.5.3's defaults (its ding/policy/<name>.py) for the keys :func:`_q_family` reads.
_Q_DEFAULTS = dict(
    discount_factor=0.97, nstep=1, learning_rate=1e-3, upc=3, target_update_freq=100, replay_buffer_size=10000
)


@translates("c51", on_policy=False)
def _c51(t: _Translator) -> None:
    for key, value in (("v_min", -10), ("v_max", 10), ("n_atom", 51)):
        t.default(f"policy.model.{key}", f"policy.model.{key}", value, "DI-engine's C51 default")
    _q_family(t, "C51", {**_Q_DEFAULTS, "n_sample": None})


@translates("qrdqn", on_policy=False)
def _qrdqn(t: _Translator) -> None:
    t.default("policy.model.num_quantiles", "policy.model.num_quantiles", 32, "DI-engine's QR-DQN default")
    kappa = t.take("policy.learn.kappa", 1.0)
    t.put("policy.learn.kappa", 1.0)
    if kappa != 1.0:
        t.report.add("differs", f"policy.learn.kappa={short_repr(kappa)}: DI-engine's QR-DQN loss uses 1; so does this")
    _q_family(t, "QR-DQN", {**_Q_DEFAULTS, "n_sample": None})


@translates("mdqn", on_policy=False)
def _mdqn(t: _Translator) -> None:
    d = "DI-engine's MDQN default"
    t.default("policy.entropy_tau", "policy.entropy_tau", 0.03, d)
    t.default("policy.m_alpha", "policy.m_alpha", 0.9, d)
    t.require("policy.nstep", (1,), "Munchausen DQN learns from 1-step transitions (DI-engine's MDQN too)")
    if t.has("policy.learn.target_theta") and not t.has("policy.learn.target_update_freq"):
        raise ConfigError(
            "DI-engine config key 'policy.learn.target_theta' cannot be honoured: DI-engine's MDQN config always "
            "holds target_update_freq (default 100), which wins over target_theta; set target_update_freq instead"
        )
    t.ignore("policy.learn.target_theta", "DI-engine's MDQN uses target_update_freq (hard copies) whenever it is set")
    _q_family(t, "MDQN", {**_Q_DEFAULTS, "n_sample": 4}, dueling=True)


@translates("iqn", on_policy=False)
def _iqn(t: _Translator) -> None:
    d = "DI-engine's IQN default"
    t.default("policy.model.num_quantiles", "policy.model.num_quantiles", 32, d)
    t.default("policy.model.quantile_embedding_size", "policy.model.quantile_embedding_size", 128, d)
    t.require("policy.model.beta_function_type", ("uniform",), "ding_dist's IQN draws its fractions uniformly")
    t.default("policy.learn.kappa", "policy.learn.kappa", 1.0, d)
    t.report.add("differs", "acting: the mean over evenly spaced fractions here, over random ones in DI-engine")
    _q_family(t, "IQN", {**_Q_DEFAULTS, "n_sample": None}, split_head=True)


@translates("rainbow", on_policy=False)
def _rainbow(t: _Translator) -> None:
    d = "DI-engine's Rainbow default"
    for key, value in (("v_min", -10), ("v_max", 10), ("n_atom", 51)):
        t.default(f"policy.model.{key}", f"policy.model.{key}", value, d)
    t.report.add("differs", "noisy layers: acting and evaluation use their means, as DI-engine's collect/eval modes")
    defaults = dict(
        discount_factor=0.99,
        nstep=3,
        learning_rate=1e-3,
        upc=1,
        target_update_freq=100,
        replay_buffer_size=100000,
        n_sample=None,
        batch_size=32,
        random_collect_size=0,  # 0.5.3's RainbowDQNPolicy leaves it out (commented): no random collect
        eps=("exp", 0.05, 0.05, 100000),
        priority=True,
    )
    _q_family(t, "Rainbow", defaults, always_dueling=True)


@translates("sql", on_policy=False)
def _sql(t: _Translator) -> None:
    t.default("policy.learn.alpha", "policy.learn.alpha", 0.1, "DI-engine's SQL default")
    if t.has("policy.learn.target_theta") and not t.has("policy.learn.target_update_freq"):
        raise ConfigError(
            "DI-engine config key 'policy.learn.target_theta' cannot be honoured: DI-engine's SQL copies its target "
            "every target_update_freq updates (default 100); set target_update_freq instead"
        )
    t.ignore("policy.learn.target_theta", "DI-engine's SQL copies its target every target_update_freq updates")
    t.report.add("differs", "an overflowing soft value is not replaced by +-20 (DI-engine's guard against inf)")
    _q_family(t, "SQL", {**_Q_DEFAULTS, "n_sample": None}, dueling=True)


@translates("sac_discrete", on_policy=False)  # the name in older DI-engine files
@translates("discrete_sac", on_policy=False)
def _discrete_sac(t: _Translator) -> None:
    d = "DI-engine's discrete SAC default"
    t.require("policy.model.twin_critic", (True,), "ding_dist's discrete SAC always has twin critics")
    t.require("policy.learn.log_space", (True,), "ding_dist tunes log(alpha)")
    for path in ("policy.model.agent_obs_shape", "policy.model.global_obs_shape"):
        t.ignore(path, "multi-agent observation shapes; taken from the env's observation space")
    actor = (t.take("policy.model.actor_head_hidden_size", 64), t.take("policy.model.actor_head_layer_num", 1))
    critic = (t.take("policy.model.critic_head_hidden_size", 64), t.take("policy.model.critic_head_layer_num", 1))
    actor_hidden, critic_hidden = [actor[0]] * (1 + actor[1]), [critic[0]] * (1 + critic[1])
    t.put("policy.model.actor_hidden_sizes", actor_hidden)
    t.put("policy.model.critic_hidden_sizes", critic_hidden)
    t.put("policy.model.activation", "relu")
    t.report.add(
        "mapped",
        f"policy.model head sizes -> actor_hidden_sizes={actor_hidden}, critic_hidden_sizes={critic_hidden} (ReLU)",
    )
    t.ignore("policy.learn.init_w", "the last layers keep torch's default initialization")
    t.ignore("policy.transition_with_policy_data", "the learner recomputes the policy; the replay stores actions")
    t.ignore("policy.collect.env_num", "the collector's envs are env.collector_env_num")
    t.ignore("policy.eval.env_num", "the evaluator's envs are env.evaluator_env_num")
    t.ignore_under("policy.command", "DI-engine's serial commander has nothing to do here")
    for key, value in (
        ("learning_rate_q", 3e-4),
        ("learning_rate_policy", 3e-4),
        ("learning_rate_alpha", 3e-4),
        ("target_theta", 0.005),
        ("alpha", 0.2),
        ("auto_alpha", True),
    ):
        t.default(f"policy.learn.{key}", f"policy.learn.{key}", value, d)
    if t.has("policy.learn.target_entropy"):
        t.same("policy.learn.target_entropy")
    else:
        t.report.add("default", "policy.learn.target_entropy=None: -n_actions (DI-engine's discrete SAC default)")
    t.default("policy.learn.discount_factor", "policy.discount_factor", 0.99, d)
    upc = t.default("policy.learn.update_per_collect", "policy.learn.update_per_collect", 1, d)
    n_sample = t.default("policy.collect.n_sample", "policy.collect.n_sample", 1, d)
    batch = t.out.get("policy.learn.batch_size", 256)
    t.put("policy.learn.batch_size", batch)
    random_collect = t.take("policy.random_collect_size", 10000)
    starts = max(int(batch), int(random_collect))
    t.put("policy.learn.learning_starts", starts)
    t.report.add(
        "converted",
        f"policy.random_collect_size={random_collect} -> policy.learn.learning_starts={starts} (random actions)",
    )
    if t.take("policy.learn.ignore_done", False):
        t.report.add("mapped", "policy.learn.ignore_done=True: time-limit ends bootstrap here (gymnasium truncation)")
    t.put("policy.learn.grad_clip_norm", None)
    if t.under("policy.other.eps"):
        for key in ("type", "start", "end", "decay"):
            t.same(f"policy.other.eps.{key}")
    else:
        t.report.add("default", "policy.other.eps: none (actions sampled from the policy only)")
    t.default(
        "policy.other.replay_buffer.replay_buffer_size", "policy.other.replay_buffer.replay_buffer_size", 1_000_000, d
    )
    _iteration_counts(t, _int_at_least(t, "policy.learn.update_per_collect", upc, 1), n_sample, f"{upc} train iters")


#: DI-engine files give activations as torch modules (``nn.Tanh()``): their class names -> ours.
_ACTIVATION_NAMES = {"ReLU": "relu", "Tanh": "tanh", "ELU": "elu", "GELU": "gelu"}


def _activation_name(t: _Translator, value: Any) -> str:
    """``policy.model.activation`` of a DI-engine file (None: DI-engine's ReLU) as one of our activation names."""
    if value is None:
        return "relu"
    name = _ACTIVATION_NAMES.get(type(value).__name__) if type(value).__module__.startswith("torch.nn") else None
    if name is None:
        raise ConfigError(
            f"DI-engine config key 'policy.model.activation' = {short_repr(value)} cannot be honoured by ding_dist: "
            f"expected one of nn.{'(), nn.'.join(_ACTIVATION_NAMES)}()"
        )
    return name


def _vac_model(t: _Translator, name: str) -> None:
    """DI-engine's VAC network (a shared encoder, actor and critic heads) -> our separate actor and critic MLPs."""
    t.require(
        "policy.action_space", ("discrete", "continuous"), f"ding_dist's {name} has Categorical and Gaussian heads"
    )
    t.require("policy.model.action_space", ("discrete", "continuous"), "only discrete and continuous actions")
    t.ignore("policy.continuous", "taken from the env's action space")
    encoder = list(t.take("policy.model.encoder_hidden_size_list", [128, 128, 64]))
    actor = (t.take("policy.model.actor_head_hidden_size", 64), t.take("policy.model.actor_head_layer_num", 1))
    critic = (t.take("policy.model.critic_head_hidden_size", 64), t.take("policy.model.critic_head_layer_num", 1))
    share = t.take("policy.model.share_encoder", True)
    t.ignore("policy.model.sigma_type", "a learned state-independent log-std")
    t.ignore("policy.model.bound_type", "Gaussian samples are clipped to the env's bounds")
    hidden = encoder + [actor[0]] * actor[1]
    t.put("policy.model.hidden_sizes", hidden)
    activation = _activation_name(t, t.take("policy.model.activation", None))
    t.put("policy.model.activation", activation)
    t.report.add(
        "mapped",
        f"policy.model encoder={encoder} + actor head {actor[0]} x {actor[1]} -> hidden_sizes={hidden}, "
        f"activation={activation!r}",
    )
    if critic != actor:
        t.report.add("differs", f"critic head {critic[0]} x {critic[1]}: the critic uses hidden_sizes={hidden} too")
    if share:
        t.report.add("differs", "share_encoder=True: actor and critic are separate MLPs of hidden_sizes here")


@translates("a2c", on_policy=True)
def _a2c(t: _Translator) -> None:
    d = "DI-engine's A2C default"
    _vac_model(t, "A2C")
    t.require("policy.learn.update_per_collect", (1,), "DI-engine's A2C takes one step per collect")
    t.ignore("policy.learn.epoch_per_collect", "DI-engine's A2C never reads it (one pass over each collect)")
    if "policy.learn.batch_size" in t.out:  # DI-engine's on-policy pipeline trains once on the whole collect
        t.out.pop("policy.learn.batch_size")
        t.report.add("ignored", "policy.learn.batch_size: A2C takes one step on the whole rollout, as DI-engine's")
    for key, value in (("learning_rate", 1e-3), ("value_weight", 0.5), ("entropy_weight", 0.01)):
        t.default(f"policy.learn.{key}", f"policy.learn.{key}", value, d)
    t.default("policy.learn.normalize_advantage", "policy.learn.adv_norm", False, d)
    t.default("policy.learn.grad_norm", "policy.learn.grad_clip_norm", 0.5, d)
    betas = t.take("policy.learn.betas", (0.9, 0.999))
    if tuple(betas) != (0.9, 0.999):
        raise ConfigError(f"DI-engine config key 'policy.learn.betas' = {short_repr(betas)} cannot be honoured: Adam's")
    eps = t.take("policy.learn.eps", 1e-8)
    t.report.add("differs", f"policy.learn.eps={eps!r}: Adam's eps is 1e-5 here (PPO's network and optimizer)")
    if t.take("policy.learn.ignore_done", False):
        t.report.add("differs", "policy.learn.ignore_done=True: time-limit ends bootstrap here; terminations do not")
    t.require("policy.collect.nstep_return", (False,), "ding_dist's A2C uses GAE returns")
    t.ignore("policy.collect.nstep", "used only with nstep_return")
    t.ignore_under("policy.other.replay_buffer", "DI-engine's on-policy buffer; rollouts go straight to the learner")
    for key, value in (("discount_factor", 0.9), ("gae_lambda", 0.95)):
        t.default(f"policy.collect.{key}", f"policy.collect.{key}", value, d)
    n_sample = t.take("policy.collect.n_sample", _MISSING)
    if n_sample is _MISSING:
        raise ConfigError(
            "DI-engine config key 'policy.collect.n_sample' is required for A2C (DI-engine has no default)"
        )
    t.put("policy.collect.n_sample", _int_at_least(t, "policy.collect.n_sample", n_sample, 1))
    t.report.add("same", "policy.collect.n_sample")
    _iteration_counts(t, 1, n_sample, "1 train iter per collect")


def _pg_model(t: _Translator, name: str) -> None:
    """DI-engine's PG network (an encoder and a policy head) -> our policy MLP."""
    heads = f"ding_dist's {name} has Categorical and Gaussian heads"
    t.require("policy.action_space", ("discrete", "continuous"), heads)
    t.ignore("policy.model.action_space", "taken from the env's action space")
    encoder = list(t.take("policy.model.encoder_hidden_size_list", [128, 128, 64]))
    head = t.take("policy.model.head_hidden_size", None) or encoder[-1]
    layers = _int_at_least(t, "policy.model.head_layer_num", t.take("policy.model.head_layer_num", 1), 0)
    hidden = encoder + [head] * layers
    t.put("policy.model.hidden_sizes", hidden)
    t.put("policy.model.activation", "relu")
    t.report.add("mapped", f"policy.model encoder={encoder} + head {head} x {layers} -> hidden_sizes={hidden} (ReLU)")


def _episode_rollouts(t: _Translator, d: str, what: str) -> tuple[int, int]:
    """DI-engine's ``collect.n_episode`` (its episode collector) -> ours, collected in rollouts of ``n_sample``."""
    n_episode = t.default("policy.collect.n_episode", "policy.collect.n_episode", 8, f"{d} (in its comments)")
    _int_at_least(t, "policy.collect.n_episode", n_episode, 1)
    envs = int(t.out.get("env.collector_env_num", 8))
    n_sample = t.take("policy.collect.n_sample", 16 * envs)
    t.put("policy.collect.n_sample", _int_at_least(t, "policy.collect.n_sample", n_sample, 1))
    t.report.add(
        "converted",
        f"policy.collect.n_episode={n_episode}: {what} once that many episodes are complete, on all of them; "
        f"collected in rollouts of policy.collect.n_sample={n_sample} env steps",
    )
    return n_episode, n_sample


@translates("pg", on_policy=True)
def _pg(t: _Translator) -> None:
    d = "DI-engine's PG default"
    _pg_model(t, "PG")
    t.require("policy.deterministic_eval", (True,), "ding_dist evaluates greedy actions")
    if "policy.learn.batch_size" not in t.out:  # DI-engine's PG loops over minibatches of it (ding/policy/pg.py)
        t.put("policy.learn.batch_size", 64)
        t.report.add("default", f"policy.learn.batch_size=64 ({d})")
    t.report.add(
        "differs",
        f"policy.learn.batch_size={t.out['policy.learn.batch_size']}: one pass over the episodes in shuffled "
        "minibatches of it, the last one the order's final batch_size, as DI-engine's; with fewer samples than that, "
        "one step on all of them (DI-engine's loop would take only part)",
    )
    for key, value in (("learning_rate", 1e-3), ("entropy_weight", 0.01)):
        t.default(f"policy.learn.{key}", f"policy.learn.{key}", value, d)
    t.default("policy.learn.grad_norm", "policy.learn.grad_clip_norm", 5.0, d)
    t.require("policy.learn.ignore_done", (False,), "DI-engine's PG does not implement ignore_done")
    t.ignore("policy.collect.collector.get_train_sample", "complete episodes are always the training samples")
    t.default("policy.collect.discount_factor", "policy.collect.discount_factor", 0.99, d)
    n_episode, n_sample = _episode_rollouts(t, d, "a step")
    given = t.take("policy.eval.evaluator.eval_freq")
    iters = _DING_EVAL_FREQ if given is _MISSING else _int_at_least(t, "policy.eval.evaluator.eval_freq", given, 0)
    steps = max(1, iters) * n_sample
    t.put("policy.eval.eval_freq", steps)
    t.report.add(
        "differs",
        f"policy.eval.evaluator.eval_freq={iters} train iters (of {n_episode} episodes each in DI-engine) -> "
        f"policy.eval.eval_freq={steps} env steps ({iters} rollouts of {n_sample}): episode lengths vary",
    )


@translates("ppo_pg", on_policy=True)
def _ppo_pg(t: _Translator) -> None:
    """DI-engine's PPOPGPolicy: PG's network and whole episodes, PPO's clipped epochs on Monte-Carlo returns."""
    d = "DI-engine's PPO-PG default"
    _pg_model(t, "PPO-PG")
    if "policy.learn.batch_size" not in t.out:
        t.put("policy.learn.batch_size", 64)
        t.report.add("default", f"policy.learn.batch_size=64 ({d})")
    for key, value in (("epoch_per_collect", 10), ("learning_rate", 3e-4), ("entropy_weight", 0.0), ("clip_ratio", 0.2),
                       ("ppo_param_init", True)):  # fmt: skip
        t.default(f"policy.learn.{key}", f"policy.learn.{key}", value, d)
    clip_type = t.require("policy.learn.grad_clip_type", ("clip_norm", None), "only gradient-norm clipping")
    clip_value = t.take("policy.learn.grad_clip_value", 0.5)
    t.put("policy.learn.grad_clip_norm", NO_CLIP if clip_type is None else clip_value)
    t.report.add(
        "mapped", f"policy.learn.grad_clip_type/value -> grad_clip_norm={None if clip_type is None else clip_value!r}"
    )
    t.require("policy.learn.ignore_done", (False,), "DI-engine's PPO-PG does not implement ignore_done")
    t.ignore("policy.transition_with_policy_data", "rollouts always keep the actions' log-probs")
    t.ignore("policy.collect.collector.get_train_sample", "complete episodes are always the training samples")
    t.default("policy.collect.discount_factor", "policy.collect.discount_factor", 0.99, d)
    _, n_sample = _episode_rollouts(t, d, "PPO epochs")
    given = t.take("policy.eval.evaluator.eval_freq")
    iters = _DING_EVAL_FREQ if given is _MISSING else _int_at_least(t, "policy.eval.evaluator.eval_freq", given, 0)
    epochs, batch = int(t.out["policy.learn.epoch_per_collect"]), int(t.out["policy.learn.batch_size"])
    steps = max(1, math.ceil(iters * batch / max(1, epochs) / n_sample)) * n_sample
    t.put("policy.eval.eval_freq", steps)
    t.report.add(
        "converted",
        f"policy.eval.evaluator.eval_freq={iters} train iters (minibatches of {batch}, epoch_per_collect={epochs}) -> "
        f"policy.eval.eval_freq={steps} env steps (whole rollouts of {n_sample})",
    )


#: Policies whose DI-engine files collect trajectories of ``unroll_len`` steps (their translator reads it).
_TRAJECTORY_POLICIES = ("impala", "r2d2", "acer")


@translates("impala", on_policy=True)
def _impala(t: _Translator) -> None:
    """DI-engine's IMPALA (trajectories of ``unroll_len`` steps in a replay, ``update_per_collect`` V-trace updates
    on ``batch_size`` of them) onto ours (rollouts of ``unroll_len`` steps per env, learned ``epoch_per_collect``
    times): the same V-trace horizon and the same number of uses of each collected step."""
    d = "DI-engine's IMPALA default"
    _vac_model(t, "IMPALA")
    top = t.take("policy.unroll_len", 32)  # DI-engine 0.5.3's files name the trajectory length at the policy's top
    unroll = t.take("policy.collect.unroll_len", top)
    learn_unroll = t.take("policy.learn.unroll_len", unroll)
    if learn_unroll != unroll:
        raise ConfigError(
            f"DI-engine config keys 'policy.learn.unroll_len' = {short_repr(learn_unroll)} and "
            f"'policy.collect.unroll_len' = {short_repr(unroll)} cannot be honoured: one V-trace horizon here"
        )
    unroll = _int_at_least(t, "policy.collect.unroll_len", unroll, 1)
    envs = int(t.out.get("env.collector_env_num", 8))
    n_traj = _int_at_least(t, "policy.collect.n_sample", t.take("policy.collect.n_sample", 16), 1)
    upc = _int_at_least(t, "policy.learn.update_per_collect", t.take("policy.learn.update_per_collect", 4), 1)
    batch = _int_at_least(t, "policy.learn.batch_size", t.take("policy.learn.batch_size", 16), 1)
    n_sample = unroll * envs  # one rollout: unroll_len steps of every env
    epochs = max(1, round(upc * batch / n_traj))  # DI-engine: each trajectory used upc * batch / n_traj times
    minibatch = min(batch * unroll, n_sample)
    t.put("policy.collect.n_sample", n_sample)
    t.put("policy.learn.epoch_per_collect", epochs)
    t.put("policy.learn.batch_size", minibatch)
    t.report.add(
        "converted",
        f"policy.collect.unroll_len={unroll}, n_sample={n_traj} trajectories, learn.update_per_collect={upc}, "
        f"batch_size={batch} trajectories -> rollouts of {unroll} steps per env (policy.collect.n_sample={n_sample} "
        f"with {envs} envs), policy.learn.epoch_per_collect={epochs} passes (each step used {epochs} times, as "
        f"DI-engine's replay uses it on average), minibatches of policy.learn.batch_size={minibatch} steps",
    )
    t.report.add("differs", "DI-engine replays trajectories up to max_use times; here each rollout is learned "
                 "right after it is collected (with actors: V-trace corrects their lag)")  # fmt: skip
    t.ignore_under("policy.other.replay_buffer", "rollouts go straight to the learner (V-trace, no trajectory replay)")
    t.require("policy.nstep", (1,), "V-trace targets")
    gamma = t.take("policy.learn.discount_factor", t.take("policy.discount_factor", 0.99))
    collect_gamma = t.take("policy.collect.discount_factor", gamma)
    if collect_gamma != gamma:
        raise ConfigError(f"DI-engine config keys 'policy.learn.discount_factor' = {short_repr(gamma)} and "
                          f"'policy.collect.discount_factor' = {short_repr(collect_gamma)} cannot be honoured: one "
                          "discount here")  # fmt: skip
    t.put("policy.collect.discount_factor", gamma)
    t.report.add("same", f"policy.learn.discount_factor={gamma!r} -> policy.collect.discount_factor")
    t.ignore("policy.collect.gae_lambda", "IMPALA's targets are V-trace's (policy.learn.lambda_)")
    for key, ours, value in (("learning_rate", "learning_rate", 5e-4), ("entropy_weight", "entropy_weight", 1e-4),
                             ("lambda_", "vtrace_lambda", 0.95), ("rho_clip_ratio", "rho_bar", 1.0),
                             ("c_clip_ratio", "c_bar", 1.0)):  # fmt: skip
        t.default(f"policy.learn.{key}", f"policy.learn.{ours}", value, d)
    # DI-engine's critic loss is value_weight * MSE (ding/rl_utils/vtrace.py), ours value_weight * 0.5 * MSE
    # (DeepMind's): twice the weight here trains the critic as DI-engine does.
    given = t.has("policy.learn.value_weight")
    value_weight = t.take("policy.learn.value_weight", 0.5)
    if isinstance(value_weight, bool) or not isinstance(value_weight, (int, float)) or value_weight < 0:
        raise ConfigError(
            f"DI-engine config key 'policy.learn.value_weight' must be a number >= 0, got {short_repr(value_weight)}"
        )
    t.put("policy.learn.value_weight", 2 * value_weight)
    t.report.add(
        "converted",
        f"policy.learn.value_weight={short_repr(value_weight)}{'' if given else f' ({d})'} -> "
        f"policy.learn.value_weight={short_repr(2 * value_weight)} (DI-engine's critic loss is value_weight * MSE, "
        "ours value_weight * 0.5 * MSE: the same critic gradient)",
    )
    rho_pg = t.take("policy.learn.rho_pg_clip_ratio", 1.0)
    if rho_pg != t.out["policy.learn.rho_bar"]:
        raise ConfigError(
            f"DI-engine config key 'policy.learn.rho_pg_clip_ratio' = {short_repr(rho_pg)} cannot be honoured: the "
            "policy gradient's importance weights are clipped at rho_clip_ratio here"
        )
    if t.has("policy.learn.grad_clip_type"):
        t.require("policy.learn.grad_clip_type", ("clip_norm",), "gradients are clipped by their norm")
    if t.has("policy.learn.grad_clip_value"):
        t.same("policy.learn.grad_clip_value", "policy.learn.grad_clip_norm")
    t.put("policy.learn.adv_norm", False)
    _iteration_counts(t, upc, n_sample, f"{upc} train iters per collect")


@translates("fqf", on_policy=False)
def _fqf(t: _Translator) -> None:
    d = "DI-engine's FQF default"
    t.default("policy.model.num_quantiles", "policy.model.num_quantiles", 32, d)
    t.default("policy.model.quantile_embedding_size", "policy.model.quantile_embedding_size", 128, d)
    for key, value in (("learning_rate_fraction", 2.5e-9), ("ent_coef", 0.0), ("kappa", 1.0)):
        t.default(f"policy.learn.{key}", f"policy.learn.{key}", value, d)
    t.report.add("differs", "the fraction network steps with Adam here (a parameter group), RMSprop in DI-engine")
    t.report.add("differs", "Q-values weight each quantile by its fraction's width (the paper), DI-engine's average")
    _q_family(t, "FQF", {**_Q_DEFAULTS, "learning_rate": 5e-5, "n_sample": None}, split_head=True,
              lr_key="policy.learn.learning_rate_quantile")  # fmt: skip


@translates("ppo_offpolicy", on_policy=False)  # DI-engine's on_policy=False; ours hands it rollouts, it replays
def _ppo_offpolicy(t: _Translator) -> None:
    """DI-engine's ``PPOOffPolicy``: GAE at collection, ``update_per_collect`` clipped steps on replayed samples."""
    d = "DI-engine's PPOOffPolicy default"
    _vac_model(t, "off-policy PPO")
    t.ignore("policy.learn.ppo_param_init", "orthogonal initialization always (PPO's network)")
    for key, value in (("update_per_collect", 5), ("learning_rate", 1e-3), ("value_weight", 0.5),
                       ("entropy_weight", 0.01), ("clip_ratio", 0.2), ("adv_norm", False)):  # fmt: skip
        t.default(f"policy.learn.{key}", f"policy.learn.{key}", value, d)
    upc = _int_at_least(t, "policy.learn.update_per_collect", t.out["policy.learn.update_per_collect"], 1)
    clip = t.out["policy.learn.clip_ratio"]
    t.put("policy.learn.value_clip_ratio", clip)
    t.report.add("default", f"policy.learn.value_clip_ratio={clip!r} (DI-engine's ppo_error clips the value by it)")
    clip_type = t.require("policy.learn.grad_clip_type", ("clip_norm", None), "only gradient-norm clipping")
    clip_value = t.take("policy.learn.grad_clip_value", 0.5)
    t.put("policy.learn.grad_clip_norm", NO_CLIP if clip_type is None else clip_value)
    t.report.add(
        "mapped", f"policy.learn.grad_clip_type/value -> grad_clip_norm={None if clip_type is None else clip_value!r}"
    )
    t.require("policy.learn.weight_decay", (0, 0.0), "Adam without weight decay")
    if t.take("policy.learn.value_norm", True):
        t.report.add("differs", "value_norm=True (DI-engine's default): values are learned unnormalized here")
    if t.take("policy.learn.ignore_done", False):
        t.report.add("differs", "policy.learn.ignore_done=True: time-limit ends bootstrap here; terminations do not")
    t.require("policy.nstep_return", (False,), "ding_dist's off-policy PPO uses GAE returns")
    t.ignore("policy.nstep", "used only with nstep_return")
    t.ignore("policy.transition_with_policy_data", "rollouts always keep log-probs and values")
    for key, value in (("discount_factor", 0.99), ("gae_lambda", 0.95)):
        t.default(f"policy.collect.{key}", f"policy.collect.{key}", value, d)
    t.default("policy.other.replay_buffer.replay_buffer_size", "policy.other.replay_buffer.replay_buffer_size",
              10000, d)  # fmt: skip
    n_sample = t.take("policy.collect.n_sample", _MISSING)
    if n_sample is _MISSING:
        raise ConfigError("DI-engine config key 'policy.collect.n_sample' is required for off-policy PPO")
    t.put("policy.collect.n_sample", _int_at_least(t, "policy.collect.n_sample", n_sample, 1))
    t.report.add("same", "policy.collect.n_sample")
    if "policy.learn.batch_size" not in t.out:
        t.put("policy.learn.batch_size", 64)
    _iteration_counts(t, upc, n_sample, f"{upc} train iters per collect")


@translates("sqn", on_policy=False)
def _sqn(t: _Translator) -> None:
    d = "DI-engine's SQN default"
    encoder = list(t.take("policy.model.encoder_hidden_size_list", [128, 128, 64]))
    dueling = t.take("policy.model.dueling", True)
    head = t.take("policy.model.head_hidden_size", None) or encoder[-1]
    layers = _int_at_least(t, "policy.model.head_layer_num", t.take("policy.model.head_layer_num", 1), 0)
    t.require("policy.model.dropout", (None,), "ding_dist's SQN networks have no dropout")
    t.require("policy.model.norm_type", (None,), "ding_dist's SQN networks have no normalization layers")
    if dueling and (layers != 1 or head != encoder[-1]):
        raise ConfigError(
            "DI-engine config keys 'policy.model.head_hidden_size'/'head_layer_num' cannot be honoured with "
            f"dueling: ding_dist's dueling head has one hidden layer of the encoder's width ({encoder[-1]})"
        )
    hidden = encoder if dueling else encoder + [head] * layers
    t.put("policy.model.hidden_sizes", hidden)
    t.put("policy.model.dueling", bool(dueling))
    t.put("policy.model.activation", "relu")
    t.report.add(
        "mapped", f"policy.model encoder={encoder}, dueling={dueling!r} -> two Q-networks, hidden_sizes={hidden}"
    )
    t.default("policy.learn.learning_rate_q", "policy.learn.learning_rate", 1e-3, d)
    for key, value in (("learning_rate_alpha", 1e-3), ("alpha", 0.2), ("target_entropy", 0.2), ("target_theta", 0.005)):
        t.default(f"policy.learn.{key}", f"policy.learn.{key}", value, d)
    t.default("policy.learn.discount_factor", "policy.discount_factor", 0.99, d)
    t.require("policy.collect.nstep", (1,), "DI-engine's SQN learns from 1-step transitions")
    t.put("policy.nstep", 1)
    upc = t.default("policy.learn.update_per_collect", "policy.learn.update_per_collect", 16, d)
    if not t.has("policy.collect.n_sample"):
        raise ConfigError("DI-engine config key 'policy.collect.n_sample' is required for SQN (no default)")
    n_sample = t.same("policy.collect.n_sample")
    batch = t.out.get("policy.learn.batch_size", 64)
    t.put("policy.learn.batch_size", batch)
    starts = max(int(batch), int(t.take("policy.random_collect_size", 0)))
    t.put("policy.learn.learning_starts", starts)
    t.report.add("converted", f"policy.learn.learning_starts={starts} (DI-engine trains once the buffer holds a batch)")
    if t.take("policy.learn.ignore_done", False):
        t.report.add("differs", "policy.learn.ignore_done=True: time-limit ends bootstrap here; terminations do not")
    t.put("policy.learn.grad_clip_norm", None)
    t.default("policy.other.eps.decay", "policy.other.eps.decay", 2000, d)
    for key in ("type", "start", "end"):
        t.ignore(f"policy.other.eps.{key}", "DI-engine's SQN reads only eps.decay (its Boltzmann-or-uniform rule)")
    t.report.add("converted", "acting: DI-engine's rule on its update count, here counted from env steps")
    size = "policy.other.replay_buffer.replay_buffer_size"
    t.default(size, size, 100_000, d)
    _iteration_counts(t, _int_at_least(t, "policy.learn.update_per_collect", upc, 1), n_sample, f"{upc} train iters")


@translates("bdq", on_policy=False)
def _bdq(t: _Translator) -> None:
    d = "DI-engine's BDQ default"
    t.require("env.continuous", (False,), "DI-engine's BDQ acts on the discretized env (continuous=False)")
    t.default("policy.model.action_bins_per_branch", "policy.model.action_bins_per_branch", 2, d)
    t.same("policy.model.num_branches")
    layers = t.take("policy.model.layer_num", 3)
    for path in ("policy.model.a_layer_num", "policy.model.v_layer_num"):
        t.require(path, (None, layers), "the value stream and every branch have layer_num hidden layers here")
    t.put("policy.model.head_layer_num", _int_at_least(t, "policy.model.layer_num", layers, 0))
    t.report.add("mapped", f"policy.model.layer_num={layers} -> policy.model.head_layer_num (value and branches)")
    t.report.add("differs", "epsilon-greedy draws each branch's exploration separately")
    _q_family(t, "BDQ", {**_Q_DEFAULTS, "n_sample": None}, always_dueling=True)


@translates("ppg_offpolicy", on_policy=False)  # DI-engine's on_policy=False; ours hands it rollouts, it replays
def _ppg_offpolicy(t: _Translator) -> None:
    """DI-engine's ``PPGOffPolicy``: a policy ring and a value ring, a policy phase and a periodic auxiliary phase."""
    d = "DI-engine's PPGOffPolicy default"
    _vac_model(t, "PPG")
    for key, value in (("update_per_collect", 5), ("learning_rate", 1e-3), ("value_weight", 0.5),
                       ("entropy_weight", 0.01), ("clip_ratio", 0.2), ("adv_norm", False), ("aux_freq", 5),
                       ("aux_train_epoch", 6), ("aux_bc_weight", 1.0)):  # fmt: skip
        t.default(f"policy.learn.{key}", f"policy.learn.{key}", value, d)
    upc = _int_at_least(t, "policy.learn.update_per_collect", t.out["policy.learn.update_per_collect"], 1)
    t.report.add("default", "policy.learn.grad_clip_norm=None (DI-engine's PPG does not clip gradients)")
    t.report.add("differs", "the auxiliary phase's KL is the full KL(pi_old || pi) over the actions (the paper's); "
                 "DI-engine's ppg_joint_error takes kl_div of the taken action's log-probabilities")  # fmt: skip
    if t.take("policy.learn.ignore_done", False):
        t.report.add("differs", "policy.learn.ignore_done=True: time-limit ends bootstrap here; terminations do not")
    t.ignore("policy.transition_with_policy_data", "rollouts always keep log-probs and values")
    for key, value in (("discount_factor", 0.99), ("gae_lambda", 0.95)):
        t.default(f"policy.collect.{key}", f"policy.collect.{key}", value, d)
    t.ignore("policy.other.replay_buffer.multi_buffer", "PPG always keeps a policy ring and a value ring")
    for ring in ("policy", "value"):
        key = f"policy.other.replay_buffer.{ring}.replay_buffer_size"
        t.default(key, key, 1000, d)
        max_use = t.take(f"policy.other.replay_buffer.{ring}.max_use", float("inf"))
        if max_use != float("inf"):
            t.report.add("differs", f"policy.other.replay_buffer.{ring}.max_use={short_repr(max_use)}: no per-sample "
                         "use limit here; a sample leaves its ring when it is overwritten")  # fmt: skip
    n_sample = t.take("policy.collect.n_sample", _MISSING)
    if n_sample is _MISSING:
        raise ConfigError("DI-engine config key 'policy.collect.n_sample' is required for PPG")
    t.put("policy.collect.n_sample", _int_at_least(t, "policy.collect.n_sample", n_sample, 1))
    t.report.add("same", "policy.collect.n_sample")
    if "policy.learn.batch_size" not in t.out:
        t.put("policy.learn.batch_size", 64)
    _iteration_counts(t, upc, n_sample, f"{upc} train iters per collect")


@translates("r2d2", on_policy=False)
def _r2d2(t: _Translator) -> None:
    """DI-engine's R2D2 (a DRQN, sequences of ``burnin_step + learn_unroll_len`` steps, ``n_sample`` sequences per
    collect, a replay of ``replay_buffer_size`` sequences) onto ours, which counts env steps: the same sequences,
    the same env steps per collect and per replay."""
    d = "DI-engine's R2D2 default"
    t.default("policy.discount_factor", "policy.discount_factor", 0.997, d)
    t.default("policy.nstep", "policy.nstep", 5, d)
    burnin = _int_at_least(t, "policy.burnin_step", t.take("policy.burnin_step", 20), 0)
    unroll = _int_at_least(t, "policy.learn_unroll_len", t.take("policy.learn_unroll_len", 80), 1)
    seq_len = burnin + unroll
    t.put("policy.sequence.seq_len", seq_len)
    t.put("policy.sequence.burnin", burnin)
    t.put("policy.sequence.overlap", 0)
    t.report.add("converted", f"policy.burnin_step={burnin}, learn_unroll_len={unroll} -> policy.sequence.seq_len="
                 f"{seq_len}, burnin={burnin}, overlap=0 (DI-engine cuts each env's trajectory into consecutive "
                 "sequences)")  # fmt: skip
    t.report.add("differs", "a sequence that starts an episode learns from its first step (its zero state is exact) "
                 "and the last nstep steps of a sequence learn from shorter returns; DI-engine burns in every sequence "
                 "and leaves its last nstep steps out of the loss")  # fmt: skip
    given = t.take("policy.collect.unroll_len", seq_len)
    t.report.add("ignored", f"policy.collect.unroll_len={short_repr(given)}: DI-engine's R2D2 replaces it by "
                 f"burnin_step + learn_unroll_len = {seq_len}")  # fmt: skip
    t.ignore("policy.collect.traj_len_inf", "each env's stream is cut into sequences across rollouts")
    t.ignore("policy.collect.env_num", "the collector's envs are env.collector_env_num")
    t.ignore("policy.eval.env_num", "the evaluator's envs are env.evaluator_env_num")
    encoder = list(t.take("policy.model.encoder_hidden_size_list", [128, 128, 64]))
    dueling = bool(t.take("policy.model.dueling", True))
    head = t.take("policy.model.head_hidden_size", None) or encoder[-1]
    layers = t.take("policy.model.head_layer_num", 1)
    if head != encoder[-1] or layers != 1:
        raise ConfigError(
            "DI-engine config keys 'policy.model.head_hidden_size'/'head_layer_num' cannot be honoured: ding_dist's "
            f"DRQN head has the LSTM's width ({encoder[-1]}) and one hidden layer when dueling (else none)"
        )
    t.require("policy.model.lstm_type", ("normal",), "ding_dist's DRQN has torch's LSTM")
    t.require("policy.model.res_link", (False,), "ding_dist's DRQN has no residual link")
    t.require("policy.model.norm_type", (None,), "ding_dist's DRQN has no normalization layers")
    t.put("policy.model.hidden_sizes", encoder)
    t.put("policy.model.lstm_size", encoder[-1])
    t.put("policy.model.dueling", dueling)
    t.put("policy.model.activation", "relu")
    t.report.add("mapped", f"policy.model encoder_hidden_size_list={encoder}, dueling={dueling!r} -> policy.model."
                 f"hidden_sizes={encoder}, lstm_size={encoder[-1]}, dueling={dueling!r} (ReLU)")  # fmt: skip
    t.default("policy.learn.learning_rate", "policy.learn.learning_rate", 1e-4, d)
    upc = t.default("policy.learn.update_per_collect", "policy.learn.update_per_collect", 1, d)
    t.default("policy.learn.target_update_theta", "policy.learn.target_theta", 0.001, d)
    t.require("policy.learn.value_rescale", (True,), "ding_dist's R2D2 always rescales values")
    if t.take("policy.learn.ignore_done", False):
        t.report.add("differs", "policy.learn.ignore_done=True: time-limit ends bootstrap here; terminations do not")
    t.put("policy.value_rescale_eps", 0.01)
    t.put("policy.priority_eta", 0.9)
    t.put("policy.learn.loss", "mse")
    t.put("policy.learn.double", True)
    t.put("policy.learn.grad_clip_norm", NO_CLIP)
    t.report.add("default", f"policy.value_rescale_eps=0.01, priority_eta=0.9, learn.loss='mse', double=True, "
                 f"grad_clip_norm={NO_CLIP:g} (DI-engine's R2D2)")  # fmt: skip
    sequences = _int_at_least(t, "policy.collect.n_sample", t.take("policy.collect.n_sample", 32), 1)
    n_sample = sequences * seq_len
    t.put("policy.collect.n_sample", n_sample)
    batch = int(t.out.get("policy.learn.batch_size", 64))
    t.put("policy.learn.batch_size", batch)
    t.put("policy.learn.learning_starts", batch * seq_len)
    size = _int_at_least(t, "policy.other.replay_buffer.replay_buffer_size",
                         t.take("policy.other.replay_buffer.replay_buffer_size", 10000), 1)  # fmt: skip
    t.put("policy.other.replay_buffer.replay_buffer_size", size * seq_len)
    t.put("policy.other.replay_buffer.type", "sequence")
    t.report.add("converted", f"policy.collect.n_sample={sequences} sequences -> {n_sample} env steps, "
                 f"policy.other.replay_buffer.replay_buffer_size={size} sequences -> {size * seq_len} steps, "
                 f"policy.learn.learning_starts={batch * seq_len} (DI-engine trains once it holds a batch of "
                 "sequences); policy.learn.batch_size counts sequences, as DI-engine's")  # fmt: skip
    for key, value in (("type", "exp"), ("start", 0.95), ("end", 0.05), ("decay", 10000)):
        t.default(f"policy.other.eps.{key}", f"policy.other.eps.{key}", value, d)
    _priority(t, d, True)
    _iteration_counts(t, _int_at_least(t, "policy.learn.update_per_collect", upc, 1), n_sample, f"{upc} train iters")


@translates("d4pg", on_policy=False)
def _d4pg(t: _Translator) -> None:
    d = "DI-engine's D4PG default"
    for key, value in (("v_min", -10), ("v_max", 10), ("n_atom", 51)):
        t.default(f"policy.model.{key}", f"policy.model.{key}", value, d)
    t.require("policy.model.twin_critic", (False,), "D4PG has one distributional critic")
    t.default("policy.nstep", "policy.nstep", 3, d)
    t.ignore("policy.discount_factor", "DI-engine's D4PG reads policy.learn.discount_factor (default 0.99)")
    _priority(t, d, on=True)
    t.ignore("policy.transition_with_policy_data", "the replay stores actions; the learner recomputes the policy")
    _deterministic_actor_critic(t, "D4PG", twin=False, actor_every=1, noise=False)
    t.put("policy.model.twin_critic", False)


@translates("acer", on_policy=False)  # DI-engine's on_policy=False; ours hands it rollouts, it replays chunks
def _acer(t: _Translator) -> None:
    """DI-engine's ACER: trajectories of ``unroll_len`` steps in a replay, ``update_per_collect`` steps on
    ``batch_size`` of them; here each env's rollout is cut into chunks of ``unroll_len`` steps."""
    d = "DI-engine's ACER default"
    encoder = list(t.take("policy.model.encoder_hidden_size_list", [128, 128, 64]))
    actor = (t.take("policy.model.actor_head_hidden_size", 64), t.take("policy.model.actor_head_layer_num", 1))
    critic = (t.take("policy.model.critic_head_hidden_size", 64), t.take("policy.model.critic_head_layer_num", 1))
    hidden = encoder + [actor[0]] * actor[1]
    t.put("policy.model.hidden_sizes", hidden)
    t.put("policy.model.activation", "relu")
    t.report.add("mapped", f"policy.model encoder={encoder} + head {actor[0]} x {actor[1]} -> hidden_sizes={hidden}")
    if critic != actor:
        t.report.add("differs", f"critic head {critic[0]} x {critic[1]}: the critic uses hidden_sizes={hidden} too")
    unroll = t.take("policy.unroll_len", 32)
    for path in ("policy.learn.unroll_len", "policy.collect.unroll_len"):
        other = t.take(path, unroll)
        if other != unroll:
            raise ConfigError(f"DI-engine config keys 'policy.unroll_len' = {short_repr(unroll)} and {path!r} = "
                              f"{short_repr(other)} cannot be honoured: one trajectory length here")  # fmt: skip
    unroll = _int_at_least(t, "policy.unroll_len", unroll, 1)
    t.put("policy.learn.unroll_len", unroll)
    for key, value in (("update_per_collect", 4), ("learning_rate_actor", 5e-4), ("learning_rate_critic", 5e-4),
                       ("entropy_weight", 1e-4), ("c_clip_ratio", 10), ("trust_region", True),
                       ("trust_region_value", 1.0), ("target_theta", 0.01)):  # fmt: skip
        t.default(f"policy.learn.{key}", f"policy.learn.{key}", value, d)
    upc = _int_at_least(t, "policy.learn.update_per_collect", t.out["policy.learn.update_per_collect"], 1)
    gamma = t.default("policy.learn.discount_factor", "policy.learn.discount_factor", 0.9, d)
    collect_gamma = t.take("policy.collect.discount_factor", gamma)
    if collect_gamma != gamma:
        raise ConfigError(f"DI-engine config keys 'policy.learn.discount_factor' = {short_repr(gamma)} and "
                          f"'policy.collect.discount_factor' = {short_repr(collect_gamma)} cannot be honoured: one "
                          "discount here")  # fmt: skip
    t.ignore("policy.collect.gae_lambda", "ACER's targets are Retrace's")
    t.ignore("policy.learn.lambda_", "not read by DI-engine's ACER (Retrace's traces are min(1, rho))")
    t.ignore("policy.learn.value_weight", "not read by DI-engine's ACER (the critic has its own optimizer)")
    t.require("policy.learn.grad_clip_type", (None,), "DI-engine's ACER file clips no gradients; nor does ours")
    t.ignore("policy.learn.clip_value", "used only with grad_clip_type")
    if "policy.learn.batch_size" not in t.out:
        t.put("policy.learn.batch_size", 16)
    t.default("policy.other.replay_buffer.replay_buffer_size", "policy.other.replay_buffer.replay_buffer_size",
              1000, d)  # fmt: skip
    envs = int(t.out.get("env.collector_env_num", 8))
    n_traj = _int_at_least(t, "policy.collect.n_sample", t.take("policy.collect.n_sample", 16), 1)
    per_env = -(-n_traj // envs)  # whole chunks per env
    n_sample = per_env * envs * unroll
    t.put("policy.collect.n_sample", n_sample)
    t.report.add("converted", f"policy.collect.n_sample={n_traj} trajectories of {unroll} steps -> "
                 f"policy.collect.n_sample={n_sample} env steps ({per_env} chunk(s) of {unroll} steps per env, "
                 f"{envs} envs)")  # fmt: skip
    t.report.add("differs", "DI-engine's ACER masks only the step after an episode end inside a trajectory; here "
                 "Retrace restarts at every episode end and bootstraps truncations")  # fmt: skip
    _iteration_counts(t, upc, n_sample, f"{upc} train iters per collect")


def _translate(t: _Translator) -> None:
    policy, env_type = _create_section(t)
    t.report.policy = policy
    if t.has("exp_name"):
        t.same("exp_name")
    if t.has("seed"):
        t.same("seed")
    env_id = _env_section(t, env_type, policy)
    t.report.env_id = env_id
    _common_policy(t, policy)
    TRANSLATORS[policy][0](t)


def _known_keys(policy: str) -> set[str]:
    """Every DI-engine key the translation of a ``policy`` config reads (from a dry run on an empty config)."""
    probe = _Translator({}, {"env": {"type": "cartpole"}, "policy": {"type": policy}}, "probe")
    probe.main["policy.collect.n_sample"] = 8  # PPO requires it
    _translate(probe)
    return probe.known


def _split_overrides(
    overrides: Sequence[str], main: Mapping, policy: str | None
) -> tuple[list[str], list[str], list[str]]:
    """``--set`` items: (DI-engine keys, applied before translation; create_config ones; ours, applied after)."""
    raw = _flatten(main)
    known = _known_keys(policy) if policy in TRANSLATORS else set()
    ding, create, ours = [], [], []
    for text in overrides:
        if not isinstance(text, str):
            ours.append(text)  # compile_config reports the bad item
            continue
        parts, _ = parse_override(text)
        path = ".".join(parts)
        if parts[0] == "create_config":
            create.append(text.strip()[len("create_config.") :])
        elif path in raw or path in known or any(p.startswith(path + ".") for p in raw):
            ding.append(text)
        else:
            ours.append(text)
    return ding, create, ours


def translate_ding_config(
    main: Mapping, create: Mapping | None, overrides: Sequence[str] = (), source: str = "the config"
) -> tuple[EasyDict, EasyDict, list[str], TranslationReport]:
    """Translate a DI-engine ``(main_config, create_config)`` into ours; returns ``(main, create, overrides, report)``.

    ``overrides`` (``--set`` items) naming DI-engine keys (those in the file or known to the translation) are
    applied to the DI-engine config first, with DI-engine's meaning; ``create_config.*`` ones to its
    ``create_config``; the rest (ding_dist keys, e.g. ``policy.sync.algorithm``) are returned to be applied
    to the translated config. Raises :class:`ConfigError` for keys that cannot be honoured.

    Example:
        >>> m = {"policy": {"cuda": True, "collect": {"n_sample": 256}}}
        >>> c = {"env": {"type": "cartpole"}, "policy": {"type": "ppo"}}
        >>> sets = ["policy.learn.entropy_weight=0.01", "policy.sync.algorithm=bytegrad"]
        >>> ours, _, rest, _ = translate_ding_config(m, c, sets)
        >>> ours.policy.device, ours.policy.learn.entropy_weight, rest
        ('auto', 0.01, ['policy.sync.algorithm=bytegrad'])
    """
    main, create = to_plain(main), to_plain(create or {})
    policy = (create.get("policy") or {}).get("type") if isinstance(create.get("policy"), Mapping) else None
    ding, create_sets, ours = _split_overrides(list(overrides), main, policy)
    apply_overrides(main, ding)
    apply_overrides(create, create_sets)
    t = _Translator(main, create, source)
    _translate(t)
    left = sorted(p for p in t.main if p not in t.used)
    if left:
        path = left[0]
        close = difflib.get_close_matches(path, sorted(t.known), n=1, cutoff=0.6)
        leaf = path.rsplit(".", 1)[-1]
        if not close:
            by_leaf = {k.rsplit(".", 1)[-1]: k for k in sorted(t.known)}
            near = difflib.get_close_matches(leaf, list(by_leaf), n=1, cutoff=0.75)
            close = [by_leaf[near[0]]] if near else []
        hint = f" (closest key it knows: {close[0]!r})" if close else ""
        raise ConfigError(
            f"DI-engine config key {path!r} = {short_repr(t.main[path])} cannot be honoured by ding_dist{hint}"
        )
    for text in ding + [f"create_config.{c}" for c in create_sets]:
        t.report.add("set", f"{text} (DI-engine's meaning, before the translation)")
    for text in ours:
        t.report.add("set", f"{text} (ding_dist's key)")
    out = _nest(t.out)
    return EasyDict(out), EasyDict(_nest(t.create_out)), ours, t.report


def _is_rank0() -> bool:
    for name in ("RANK", "SLURM_PROCID"):
        if os.environ.get(name, "0") not in ("0", ""):
            return False
    from ding_dist.comm import get_rank

    return get_rank() == 0


def _emit(report: TranslationReport) -> None:
    """Print the report to stderr, once per job (per process, and not again in the ranks a launcher starts)."""
    text = report.render()
    key = hashlib.sha1(repr(report.lines).encode()).hexdigest()[:16]  # the same translation, whatever its source
    if key in _reported or os.environ.get(_REPORTED_ENV) == key:
        return
    _reported.add(key)
    if _is_rank0():
        print(text, file=sys.stderr, flush=True)
        os.environ[_REPORTED_ENV] = key


def translate_if_ding(
    main: Mapping, create: Mapping | None, overrides: Sequence[str] = (), source: Any = None
) -> tuple[Mapping, Mapping, Sequence[str]]:
    """The pipeline's hook: a DI-engine config comes back translated (report printed on rank 0), ours as it is.

    ``source`` names the config in the report: a path (its file name is shown), else "the config".

    Example:
        >>> translate_if_ding({"env": {"id": "CartPole-v1"}}, {"policy": {"type": "dqn"}}, ["seed=1"])
        ({'env': {'id': 'CartPole-v1'}}, {'policy': {'type': 'dqn'}}, ['seed=1'])
    """
    if not looks_like_ding(main, create):
        return main, create, overrides
    name = os.path.basename(os.fspath(source)) if isinstance(source, (str, os.PathLike)) else "the config"
    ours, our_create, rest, report = translate_ding_config(main, create, overrides, name)
    _emit(report)
    return ours, our_create, rest
