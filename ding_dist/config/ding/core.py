"""The shared core of DI-engine's dialect: the translation's reads and writes, its refusals, the registry.

A :class:`Translator` holds one DI-engine config as flat ``a.b.c`` leaves: a family's translator reads them
(``take``, marking each used), writes ours (``put``) and says why in the :class:`TranslationReport`
(``same``/``default``/``ignore`` do both), and refuses what ding_dist cannot honour with one line
(``require``, ``refuse``). A translator is a function of the translator, registered for DI-engine's policy
type name with :func:`translates`; the helpers every family shares (the encoder, train-iteration counts)
live here too.

Example:
    >>> t = Translator({"policy": {"learn": {"batch_size": 32}}}, {}, "demo")
    >>> t.same("policy.learn.batch_size")
    32
    >>> t.default("policy.nstep", "policy.nstep", 1, "DI-engine's default")
    1
    >>> t.report.lines
    [('same', 'policy.learn.batch_size'), ('default', "policy.nstep=1 (DI-engine's default)")]
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ding_dist.config.ding.report import TranslationReport
from ding_dist.config.errors import ConfigError
from ding_dist.config.rules import short_repr

__all__ = [
    "DING_CKPT_FREQ",
    "DING_EVAL_FREQ",
    "MISSING",
    "NO_CLIP",
    "TRANSLATORS",
    "Translation",
    "Translator",
    "encoder_sizes",
    "flatten",
    "int_at_least",
    "iteration_counts",
    "nest",
    "translates",
]

#: DI-engine's evaluator default: evaluate every 1000 train iterations.
DING_EVAL_FREQ = 1000
#: DI-engine's learner default (``save_ckpt_after_iter``): a checkpoint every 10000 train iterations.
DING_CKPT_FREQ = 10000
MISSING = object()
#: A gradient-norm bound no gradient reaches: "no clipping" where the key's default is a float.
NO_CLIP = 1e9


def flatten(cfg: Mapping, prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``; an empty dict is a leaf (it says nothing).

    Example:
        >>> flatten({"a": {"b": 1, "c": {}}})
        {'a.b': 1}
    """
    out: dict[str, Any] = {}
    for key, value in cfg.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flatten(value, path + "."))
        elif not (isinstance(value, Mapping) and not value):
            out[path] = value
    return out


def nest(flat: Mapping[str, Any]) -> dict:
    """The inverse of :func:`flatten`.

    Example:
        >>> nest({"a.b": 1, "a.c": 2})
        {'a': {'b': 1, 'c': 2}}
    """
    out: dict = {}
    for path, value in flat.items():
        node = out
        *parents, leaf = path.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    return out


class Translator:
    """One translation: reads DI-engine leaves (marking each one used), writes ours, and reports."""

    def __init__(self, main: Mapping, create: Mapping, source: str) -> None:
        self.main = flatten(main)
        self.create = flatten(create)
        self.used: set[str] = set()
        self.known: set[str] = set()  # every DI-engine key this translation knows (for suggestions)
        self.out: dict[str, Any] = {}
        self.create_out: dict[str, Any] = {}
        self.report = TranslationReport(source, "?", "?")
        self.image_obs = False  # set by the env suite (Atari, CarRacing): the model translators map conv encoders
        self.env_action_bins: Any = None  # MuJoCo's env.action_bins_per_branch, for BDQ's translator

    # --- reading -------------------------------------------------------------------------------------------
    def has(self, path: str) -> bool:
        self.known.add(path)
        return path in self.main

    def take(self, path: str, default: Any = MISSING) -> Any:
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
        if value is not MISSING:
            target = ours or path
            self.put(target, value)
            self.report.add("same" if target == path else "mapped", path if target == path else f"{path} -> {target}")
        return value

    def default(self, path: str, ours: str, value: Any, why: str) -> Any:
        """``path`` from the file, else DI-engine's default ``value`` (reported as such); written to ``ours``."""
        given = self.take(path)
        if given is MISSING:
            self.put(ours, value)
            self.report.add("default", f"{ours}={short_repr(value)} ({why})")
            return value
        self.put(ours, given)
        if ours == path:
            self.report.add("same", path)
        else:
            self.report.add("mapped", f"{path}={short_repr(given)} -> {ours}")
        return given

    def defaults(self, prefix: str, values: Mapping[str, Any], why: str) -> None:
        """:meth:`default` for each ``key: value``, at ``prefix.key`` in the file and here."""
        for key, value in values.items():
            self.default(f"{prefix}.{key}", f"{prefix}.{key}", value, why)

    def ignore(self, path: str, why: str) -> None:
        if self.take(path) is not MISSING:
            self.report.add("ignored", f"{path}: {why}")

    def ignore_under(self, prefix: str, why: str) -> None:
        self.known.add(prefix)
        paths = self.under(prefix) + ([prefix] if prefix in self.main else [])
        for path in paths:
            self.used.add(path)
        if paths:
            self.report.add("ignored", f"{prefix}.*: {why}" if prefix not in paths else f"{prefix}: {why}")

    # --- refusing ------------------------------------------------------------------------------------------
    def require(self, path: str, ok: Any, why: str) -> Any:
        """Accept ``path`` only with a value in ``ok`` (a tuple of allowed values); refuse it otherwise."""
        value = self.take(path)
        if value is not MISSING and value not in ok:
            raise ConfigError(f"DI-engine config key {path!r} = {short_repr(value)} cannot be honoured: {why}")
        return value

    def n_sample_required(self, what: str) -> int:
        """``policy.collect.n_sample``, which DI-engine's on-policy files must give (``what``: ``for PPO ...``)."""
        n_sample = self.take("policy.collect.n_sample", MISSING)
        if n_sample is MISSING:
            raise ConfigError(f"DI-engine config key 'policy.collect.n_sample' is required {what}")
        self.put("policy.collect.n_sample", int_at_least("policy.collect.n_sample", n_sample, 1))
        self.report.add("same", "policy.collect.n_sample")
        return n_sample


def int_at_least(path: str, value: Any, low: int) -> int:
    """``value`` of the DI-engine key ``path`` when it is an int >= ``low``; a :class:`ConfigError` otherwise.

    Example:
        >>> int_at_least("policy.nstep", 3, 1)
        3
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(f"DI-engine config key {path!r} must be an int >= {low}, got {short_repr(value)}")
    return value


# ------------------------------------------------------------------------------------------------ registry
@dataclass(frozen=True)
class Translation:
    """What the dialect knows of one DI-engine policy type: its translator and what its files may ask for."""

    translate: Callable[[Translator], None]
    on_policy: bool  # DI-engine's policy.on_policy for the type
    priority: bool = False  # the translator maps prioritized replay (policy.priority, priority_IS_weight)
    trajectories: bool = False  # its files collect trajectories of unroll_len steps (the translator reads it)
    episodes: bool = False  # it learns from whole episodes (collect.n_episode, DI-engine's episode collector)


#: DI-engine policy type name -> its :class:`Translation`; filled by :func:`translates` in the family modules.
TRANSLATORS: dict[str, Translation] = {}


def translates(
    policy_type: str, *, on_policy: bool, priority: bool = False, trajectories: bool = False, episodes: bool = False
) -> Callable[[Callable[[Translator], None]], Callable[[Translator], None]]:
    """Decorator: ``fn(t)`` translates the policy section of DI-engine configs whose policy type is ``policy_type``.

    Example::

        @translates("dqn", on_policy=False, priority=True)
        def _dqn(t): ...
    """

    def add(fn: Callable[[Translator], None]) -> Callable[[Translator], None]:
        if policy_type in TRANSLATORS:
            raise ValueError(f"DI-engine policy type {policy_type!r} already has a translator")
        TRANSLATORS[policy_type] = Translation(fn, on_policy, priority, trajectories, episodes)
        return fn

    return add


def policies_with(flag: str) -> list[str]:
    """The registered policy types whose :class:`Translation` has ``flag`` set, sorted.

    Example:
        >>> "pg" in policies_with("episodes")
        True
    """
    return sorted(name for name, entry in TRANSLATORS.items() if getattr(entry, flag))


# ------------------------------------------------------------------------------------------------ shared
def encoder_sizes(t: Translator) -> list[int]:
    """``policy.model.encoder_hidden_size_list`` (DI-engine's default [128, 128, 64]) as the layers our networks build.

    On images (Atari, CarRacing) DI-engine builds a ConvEncoder: convolutions of the first three sizes (kernels 8, 4,
    3, strides 4, 2, 1) and a linear layer of the last size; here that is ``policy.model.conv_channels`` and a CNN
    whose linear layer is the one hidden size returned (the head's layers follow, as on vectors)."""
    sizes = list(t.take("policy.model.encoder_hidden_size_list", [128, 128, 64]))
    if not t.image_obs:
        return sizes
    if len(sizes) not in (3, 4):
        raise ConfigError(
            f"DI-engine config key 'policy.model.encoder_hidden_size_list' = {sizes} cannot be honoured on images: "
            "DI-engine's ConvEncoder then adds residual blocks; ding_dist's CNN has three convolutions and a linear "
            "layer (3 or 4 sizes)"
        )
    t.put("policy.model.conv_channels", sizes[:3])
    t.report.add("mapped", f"policy.model.encoder_hidden_size_list={sizes} on images (DI-engine's ConvEncoder) -> "
                 f"policy.model.conv_channels={sizes[:3]} (kernels 8/4/3, strides 4/2/1, as here), then a "
                 f"{sizes[-1]}-unit layer")  # fmt: skip
    t.report.add("differs", "the CNN's linear layer has a ReLU here; DI-engine's ConvEncoder has none before the head")
    return [sizes[-1]]


def per_collect(iters: int, iters_per_collect: float, n_sample: int) -> int:
    """DI-engine's ``iters`` train iterations, as env steps: whole collects of ``n_sample`` env steps.

    Example:
        >>> per_collect(40, 3, 8)  # ceil(40 / 3) collects of 8 env steps
        112
    """
    return max(1, math.ceil(iters / iters_per_collect)) * n_sample


def iteration_counts(t: Translator, iters_per_collect: int, n_sample: Any, what: str) -> None:
    """eval_freq and the learner's checkpoint/log hooks: DI-engine's train iterations -> our env steps."""
    n_sample = int_at_least("policy.collect.n_sample", n_sample, 1)
    explain = f"{what} and {n_sample} env steps per collect"
    given = t.take("policy.eval.evaluator.eval_freq")
    iters = DING_EVAL_FREQ if given is MISSING else int_at_least("policy.eval.evaluator.eval_freq", given, 0)
    steps = per_collect(iters, iters_per_collect, n_sample)
    t.put("policy.eval.eval_freq", steps)
    where = "policy.eval.evaluator.eval_freq" if given is not MISSING else "DI-engine's default eval_freq"
    t.report.add("converted", f"{where}={iters} train iters -> policy.eval.eval_freq={steps} env steps ({explain})")
    for di_key, ours in (
        ("policy.learn.learner.hook.save_ckpt_after_iter", "policy.other.checkpoint.freq"),
        ("policy.learn.learner.hook.log_show_after_iter", "policy.other.log_freq"),
    ):
        value = t.take(di_key)
        if value is MISSING and ours == "policy.other.checkpoint.freq":  # DI-engine's learner saves by default
            steps = per_collect(DING_CKPT_FREQ, iters_per_collect, n_sample)
            t.put(ours, steps)
            t.report.add("default", f"{ours}={steps} env steps (DI-engine's default save_ckpt_after_iter="
                                    f"{DING_CKPT_FREQ} train iters, {explain})")  # fmt: skip
        elif value is not MISSING:
            steps = per_collect(int_at_least(di_key, value, 1), iters_per_collect, n_sample)
            t.put(ours, steps)
            t.report.add("converted", f"{di_key}={value} train iters -> {ours}={steps} env steps")


def ignore_done_differs(t: Translator) -> None:
    """DI-engine's ``learn.ignore_done`` where terminations still end bootstrapping here (reported, not refused)."""
    if t.take("policy.learn.ignore_done", False):
        t.report.add("differs", "policy.learn.ignore_done=True: time-limit ends bootstrap here; terminations do not")


def train_per_collect(t: Translator, upc: Any, n_sample: Any) -> None:
    """The counts of a policy that trains ``update_per_collect`` iterations per collect of ``n_sample`` env steps."""
    iteration_counts(t, int_at_least("policy.learn.update_per_collect", upc, 1), n_sample, f"{upc} train iters")
