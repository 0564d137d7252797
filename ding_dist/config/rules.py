"""Value rules: the ranges config values must lie in (counts >= 1, rates > 0, probabilities in [0, 1]).

The defaults give every key its type (see :mod:`ding_dist.config.compile`); this table gives the range,
in one place for every component. A rule is matched by the key's full dotted path with shell-style
patterns (``*`` also crosses dots, so ``*.batch_size`` is any ``batch_size``); the first matching rule
decides. :func:`~ding_dist.config.compile_config` checks them after the types, so every entry point (the
pipelines, the CLI, a direct call) rejects ``batch_size=-1`` with one line naming the key. Keys inside an
open dict (a default of ``{}``, e.g. ``env.env_kwargs``) belong to someone else and are not checked.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any

from ding_dist.config.errors import raise_all

__all__ = ["VALUE_RULES", "check_values", "short_repr", "value_errors"]


def short_repr(value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters (huge ints and nested junk stay one short line).

    Example:
        >>> short_repr("x" * 100, limit=12)
        "'xxxxxxxx..."
    """
    try:
        text = repr(value)
    except Exception:  # e.g. an int too long for str()
        return f"<{type(value).__name__}>"
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ---- checks: (ok(value), what is expected) ---------------------------------------------------------------
Check = tuple[Callable[[Any], bool], str]


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _at_least(n: int) -> Check:
    return (lambda v: _is_int(v) and v >= n), f">= {n}"


def _positive() -> Check:
    return (lambda v: _is_number(v) and math.isfinite(v) and v > 0), "a finite number > 0"


def _unit(low_open: bool = False) -> Check:
    if low_open:
        return (lambda v: _is_number(v) and 0 < v <= 1), "in (0, 1]"
    return (lambda v: _is_number(v) and 0 <= v <= 1), "in [0, 1]"


def _optional(check: Check) -> Check:
    ok, what = check
    return (lambda v: v is None or ok(v)), f"{what} or None"


def _sizes() -> Check:
    def ok(v: Any) -> bool:
        return isinstance(v, (list, tuple)) and len(v) > 0 and all(_is_int(s) and s >= 1 for s in v)

    return ok, "a non-empty list of ints >= 1"


def _seed() -> Check:
    return (lambda v: _is_int(v) and 0 <= v < 2**32), "an int in [0, 2**32)"


def _device() -> Check:
    def ok(v: Any) -> bool:
        if not isinstance(v, str):
            return False
        if v == "auto":
            return True
        import torch  # only when a config names a device: the CLI's argument parsing stays light

        try:
            device = torch.device(v)
        except (RuntimeError, ValueError):
            return False
        if device.type == "cuda" and not torch.cuda.is_available():
            return False  # caught with the other config errors, not at the first tensor
        return device.type in ("cpu", "cuda")

    return ok, "'auto', 'cpu', or 'cuda'/'cuda:N' on a machine with CUDA"


def _env_id() -> Check:
    return (lambda v: v is None or (isinstance(v, str) and v.strip() != "")), "a gymnasium id such as 'CartPole-v1'"


def _entry_point() -> Check:
    def ok(v: Any) -> bool:
        if v is None:
            return True
        module, sep, attr = v.partition(":") if isinstance(v, str) else ("", "", "")
        return bool(sep and module and attr)

    return ok, "'package.module:callable' or None"


#: (pattern on the dotted key, check); the first pattern that matches a key decides.
VALUE_RULES: tuple[tuple[str, Check], ...] = (
    ("seed", _seed()),
    ("env.id", _env_id()),
    ("env.entry_point", _entry_point()),
    ("env.stop_value", ((lambda v: v is None or (_is_number(v) and not math.isnan(v))), "a number or None")),
    ("*_env_num", _at_least(1)),
    ("*.n_evaluator_episode", _at_least(1)),
    # None passes where a policy's default is None (PG: one step on all samples); elsewhere the type check refuses it
    ("*.batch_size", ((lambda v: v is None or _at_least(1)[0](v)), ">= 1")),
    ("*.n_sample", _at_least(1)),
    ("*.n_episode", _at_least(1)),
    ("*_per_collect", _at_least(1)),
    ("*.replay_buffer_size", _at_least(1)),
    ("*.replay_buffer.frame_dedup", ((lambda v: v is None or isinstance(v, bool)), "True, False or None (auto)")),
    ("*.replay_buffer.alpha", _unit()),  # prioritized replay's exponents
    ("*.replay_buffer.beta", _unit()),
    ("*.replay_buffer.anneal_step", _at_least(0)),
    ("*.keep_last", _at_least(1)),
    ("*.sequence.seq_len", _at_least(2)),  # R2D2's sequences (seq_len > burnin: the policy's check)
    ("*.sequence.burnin", _at_least(0)),
    ("*.sequence.overlap", _at_least(0)),
    ("*.priority_eta", _unit()),
    ("*.value_rescale_eps", _positive()),
    ("*.nstep", _at_least(1)),
    ("*.target_update_freq", _at_least(1)),  # the step count is taken modulo it
    ("*.actor_update_freq", _at_least(1)),  # TD3: the actor on every K-th update
    ("*.noise_sigma", ((lambda v: _is_number(v) and v >= 0), "a number >= 0")),
    ("*.preempt_fraction", _unit(low_open=True)),
    ("*.preempt_min_share", _unit(low_open=True)),
    ("*freq", _at_least(0)),  # 0: only at the end
    ("*.checkpoint.every_minutes", ((lambda v: _is_number(v) and v >= 0), "a number of minutes >= 0 (0: off)")),
    ("*.learning_starts", _at_least(0)),
    ("*.learning_rate*", _positive()),
    ("*.lr", _positive()),
    ("*_lr", _positive()),
    ("*discount_factor", _unit()),
    ("*.gae_lambda", _unit()),
    ("*.target_theta", _optional(_unit(low_open=True))),
    ("*.clip_ratio", _positive()),
    ("*.value_clip_ratio", _optional(_positive())),
    ("*.grad_clip_norm", _optional(_positive())),
    ("*hidden_sizes", _sizes()),
    ("*.eps.start", _unit()),
    ("*.eps.end", _unit()),
    ("*.eps.decay", _at_least(0)),
    ("*.device", _device()),
)


def _leaves(cfg: Mapping, schema: Mapping | None, path: str) -> Iterator[tuple[str, Any]]:
    for key, value in cfg.items():
        dotted = f"{path}{key}"
        sub_schema = schema.get(key) if schema is not None else None
        if isinstance(sub_schema, Mapping) and len(sub_schema) == 0:
            continue  # an open dict (e.g. env.env_kwargs): its keys are not ours to judge
        if isinstance(value, Mapping) and (schema is None or isinstance(sub_schema, Mapping)):
            yield from _leaves(value, sub_schema, dotted + ".")
        else:
            yield dotted, value  # a leaf, or a dict where the defaults hold a leaf (None): the rule judges it


def value_errors(
    cfg: Mapping, schema: Mapping | None = None, rules: Any = VALUE_RULES, skip: Collection[str] = ()
) -> list[str]:
    """One message per key whose value breaks its rule in :data:`VALUE_RULES` (keys in ``skip`` aside).

    Example:
        >>> for message in value_errors({"policy": {"learn": {"batch_size": 0, "lr": -1.0}}}):
        ...     print(message)
        config key 'policy.learn.batch_size' must be >= 1, got 0
        config key 'policy.learn.lr' must be a finite number > 0, got -1.0
    """
    top = {k: v for k, v in cfg.items() if k != "create_config"}
    errors = []
    for dotted, value in _leaves(top, schema, ""):
        if dotted in skip:
            continue
        for pattern, (ok, expected) in rules:
            if fnmatch.fnmatchcase(dotted, pattern):
                if not ok(value):
                    errors.append(f"config key {dotted!r} must be {expected}, got {short_repr(value)}")
                break
    return errors + [e for e in (rule(top) for rule in COMBINATION_RULES) if e is not None]


def _apex_without_actors(cfg: Mapping) -> str | None:
    """Ape-X (the epsilon ladder over actors) in a run without actors: the ladder would never be used."""
    policy, al = cfg.get("policy"), cfg.get("actor_learner")
    other = policy.get("other") if isinstance(policy, Mapping) else None
    ladder = other.get("eps_ladder") if isinstance(other, Mapping) else None
    actors = al.get("actors", 0) if isinstance(al, Mapping) else 0
    if isinstance(ladder, Mapping) and ladder.get("enable") is True and actors == 0:
        return (
            "config key 'policy.other.eps_ladder.enable' is True (Ape-X: one epsilon per actor) but the run has no "
            "actors (actor_learner.actors=0): train with --actors N (N >= 1), or set it False"
        )
    return None


def _ladder_with_inference(cfg: Mapping) -> str | None:
    """Ape-X's epsilon ladder with an inference rank: one batch for every actor has one epsilon, not a ladder."""
    policy, al = cfg.get("policy"), cfg.get("actor_learner")
    other = policy.get("other") if isinstance(policy, Mapping) else None
    ladder = other.get("eps_ladder") if isinstance(other, Mapping) else None
    inference = al.get("inference", 0) if isinstance(al, Mapping) else 0
    if isinstance(ladder, Mapping) and ladder.get("enable") is True and inference:
        return (
            "config key 'policy.other.eps_ladder.enable' is True (Ape-X: one epsilon per actor) but "
            "actor_learner.inference=1 acts for every actor with one epsilon: set one of them off"
        )
    return None


#: Checks of several keys together (each: config -> one message or None), after the per-key rules.
COMBINATION_RULES: tuple[Callable[[Mapping], str | None], ...] = (_apex_without_actors, _ladder_with_inference)


def check_values(cfg: Mapping, schema: Mapping | None = None, rules: Any = VALUE_RULES) -> None:
    """Raise one :class:`ConfigError` naming every key whose value breaks its rule in :data:`VALUE_RULES`.

    With ``schema`` (the merged defaults) keys inside open dicts are skipped; ``create_config`` is never
    checked (it only names component types).

    Example:
        >>> check_values({"policy": {"learn": {"batch_size": 64}}})
        >>> check_values({"policy": {"learn": {"batch_size": -1}}})
        Traceback (most recent call last):
        ...
        ding_dist.config.errors.ConfigError: config key 'policy.learn.batch_size' must be >= 1, got -1
    """
    raise_all(value_errors(cfg, schema, rules))
