"""Translating a DI-engine file: detect the dialect, run the sections and the policy's translator, apply ``--set``.

:func:`translate_ding_config` runs the shared sections (:mod:`~ding_dist.config.ding.sections`), the env suite
(:mod:`~ding_dist.config.ding.envs`) and the translator registered for the file's policy type (one module per
family), then refuses any key nothing read, naming the closest key the translation knows.

Example:
    >>> m = {"policy": {"cuda": False, "collect": {"n_sample": 96}}}
    >>> c = {"env": {"type": "cartpole"}, "policy": {"type": "a2c"}}
    >>> ours, _, _, report = translate_ding_config(m, c)
    >>> ours["policy"]["collect"]["discount_factor"], report.policy
    (0.9, 'a2c')
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping, Sequence
from typing import Any

from easydict import EasyDict

from ding_dist.config.compile import apply_overrides, parse_override, to_plain
from ding_dist.config.ding import actor_critic, continuous, episodes, q_learning, sequences  # noqa: F401 (register)
from ding_dist.config.ding.core import TRANSLATORS, Translator, flatten, nest
from ding_dist.config.ding.envs import translate_env
from ding_dist.config.ding.marks import looks_like_ding
from ding_dist.config.ding.report import TranslationReport, emit
from ding_dist.config.ding.sections import common_policy, create_section
from ding_dist.config.errors import ConfigError
from ding_dist.config.rules import short_repr

__all__ = ["looks_like_ding", "translate_ding_config", "translate_if_ding"]


def _translate(t: Translator) -> None:
    policy, env_type = create_section(t)
    t.report.policy = policy
    if t.has("exp_name"):
        t.same("exp_name")
    if t.has("seed"):
        t.same("seed")
    env_id = translate_env(t, env_type, policy)
    t.report.env_id = env_id
    common_policy(t, policy)
    TRANSLATORS[policy].translate(t)
    _integral_counts(t)


#: Counts DI-engine's files may write as floats (``decay=1e5``): Python takes them there, ours are ints.
_COUNT_KEYS = ("policy.other.eps.decay", "policy.other.replay_buffer.replay_buffer_size", "policy.collect.n_sample",
               "policy.learn.batch_size", "policy.learn.learning_starts")  # fmt: skip


def _integral_counts(t: Translator) -> None:
    for key in _COUNT_KEYS:
        value = t.out.get(key)
        if isinstance(value, float) and value.is_integer():
            t.out[key] = int(value)
            t.report.add("converted", f"{key}={value!r} -> {int(value)} (a count)")


def _known_keys(policy: str) -> set[str]:
    """Every DI-engine key the translation of a ``policy`` config reads (from a dry run on an empty config)."""
    probe = Translator({}, {"env": {"type": "cartpole"}, "policy": {"type": policy}}, "probe")
    probe.main["policy.collect.n_sample"] = 8  # PPO requires it
    _translate(probe)
    return probe.known


def _split_overrides(
    overrides: Sequence[str], main: Mapping, policy: str | None
) -> tuple[list[str], list[str], list[str]]:
    """``--set`` items: (DI-engine keys, applied before translation; create_config ones; ours, applied after)."""
    raw = flatten(main)
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
    t = Translator(main, create, source)
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
    out = nest(t.out)
    return EasyDict(out), EasyDict(nest(t.create_out)), ours, t.report


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
    emit(report)
    return ours, our_create, rest
