"""Value rules: the ranges config values must lie in (counts >= 1, rates > 0, probabilities in [0, 1]).

The defaults give every key its type (see :mod:`ding_dist.config.compile`); its range is the rule declared with it
(:class:`~ding_dist.utils.keys.Key`): a ``policy.*`` key's in its policy's ``keys``, any other key's (``seed``,
``env.*``, ``actor_learner.*``, ``pbt.*``) in :mod:`ding_dist.config.sections`. :func:`~ding_dist.config.compile_config`
checks them after the types, so every entry point (the pipelines, the CLI, a direct call) rejects ``batch_size=-1``
with one line naming the key. Keys inside an open dict (a default of ``{}``, e.g. ``env.env_kwargs``) belong to
someone else and are not checked here; what several keys must satisfy together is :data:`COMBINATION_RULES`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any

from ding_dist.config.errors import raise_all
from ding_dist.config.sections import SECTIONS, run_key
from ding_dist.utils.keys import Key, check_of

__all__ = ["check_values", "policy_keys", "section_errors", "short_repr", "value_errors"]


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


def policy_keys(policy_type: str | None = None) -> list[Mapping[str, Key]]:
    """The declared keys (relative to ``policy.``) of policy ``policy_type``; of every built-in policy when it is
    None or unknown (a value then passes when one declaration of its key accepts it).

    Example:
        >>> policy_keys("dqn")[0]["learn.batch_size"].rule
        '>= 1'
    """
    from ding_dist.policy import get_policy_cls  # torch: only when a config has a policy section to judge
    from ding_dist.policy.registry import import_builtin_policies

    if isinstance(policy_type, str):
        try:
            return [get_policy_cls(policy_type).keys]
        except ValueError:  # an unknown type: create_config's check names it
            pass
    sets: list[Mapping[str, Key]] = []
    for cls in import_builtin_policies().values():
        if all(cls.keys is not s for s in sets):
            sets.append(cls.keys)
    return sets


def _policy_error(path: str, value: Any, declared: list[Mapping[str, Key]]) -> str | None:
    """The expected text of the first declaration of ``path`` when none accepts ``value`` (None: fine or undeclared)."""
    checks = [c for c in (check_of(keys[path].rule) for keys in declared if path in keys) if c is not None]
    if not checks or any(ok(value) for ok, _ in checks):
        return None
    return checks[0][1]


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
    cfg: Mapping,
    schema: Mapping | None = None,
    skip: Collection[str] = (),
    create: Mapping | None = None,
) -> list[str]:
    """One message per key whose value breaks its declared rule (keys in ``skip`` aside): a ``policy.*`` key's
    (of the policy ``create["policy"]["type"]`` names; without one, of any built-in policy), any other key's from
    :mod:`ding_dist.config.sections`; then one per broken :data:`COMBINATION_RULES` entry.

    Example:
        >>> for message in value_errors({"policy": {"learn": {"batch_size": 0, "learning_rate": -1.0}}}):
        ...     print(message)
        config key 'policy.learn.batch_size' must be >= 1, got 0
        config key 'policy.learn.learning_rate' must be a finite number > 0, got -1.0
    """
    top = {k: v for k, v in cfg.items() if k != "create_config"}
    if create is None and isinstance(cfg.get("create_config"), Mapping):
        create = cfg["create_config"]
    section = (create or {}).get("policy")
    policy_type = section.get("type") if isinstance(section, Mapping) else None
    declared = policy_keys(policy_type) if isinstance(top.get("policy"), Mapping) and top["policy"] else []
    errors = []
    for dotted, value in _leaves(top, schema, ""):
        if dotted in skip:
            continue
        if dotted.startswith("policy."):
            expected = _policy_error(dotted[len("policy.") :], value, declared)
            if expected is not None:
                errors.append(f"config key {dotted!r} must be {expected}, got {short_repr(value)}")
            continue
        key = run_key(dotted)
        problem = None if key is None else key.error(value)
        if problem is not None:
            errors.append(f"config key {dotted!r} {problem}, got {short_repr(value)}")
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


def section_errors(section: str, values: Mapping) -> list[str]:
    """One message per key of section ``section`` (a name of :data:`~ding_dist.config.sections.SECTIONS`) whose
    value in ``values`` (the section's mapping) breaks its declared rule; keys left out keep their defaults.

    Example:
        >>> section_errors("pbt", {"population": 0, "quantile": 0.25})
        ["config key 'pbt.population' must be an int >= 1, got 0"]
    """
    errors = []
    for path, key in SECTIONS[section].items():
        node: Any = values
        for part in path.split("."):
            node = node.get(part, key.default) if isinstance(node, Mapping) else key.default
        problem = key.error(node)
        if problem is not None:
            errors.append(f"config key {section + '.' + path!r} {problem}, got {short_repr(node)}")
    return errors


def check_values(cfg: Mapping, schema: Mapping | None = None) -> None:
    """Raise one :class:`ConfigError` naming every key whose value breaks its rule (:func:`value_errors`).

    With ``schema`` (the merged defaults) keys inside open dicts are skipped; ``create_config`` is never
    checked (it only names component types).

    Example:
        >>> check_values({"policy": {"learn": {"batch_size": 64}}})
        >>> check_values({"policy": {"learn": {"batch_size": -1}}})
        Traceback (most recent call last):
        ...
        ding_dist.config.errors.ConfigError: config key 'policy.learn.batch_size' must be >= 1, got -1
    """
    raise_all(value_errors(cfg, schema))
