"""A run's config, compiled once: :func:`load_config` is the one way from a config file (or a shipped config's name,
or a dict) to the compiled global config every part of a run reads.

Compiling reads the file (:func:`~ding_dist.config.loader.read_config`), translates a DI-engine file
(:mod:`ding_dist.config.ding`, imported for those only), merges it over the defaults of its env, its policy and the
``actor_learner`` section (:func:`run_defaults`), applies the ``--set`` overrides and checks every key
(:func:`~ding_dist.config.compile.compile_config`). The result is a :class:`CompiledConfig`: passed to
:func:`load_config` again (by the training pipeline, the evaluation) it comes back as it is, never compiled twice.

Example:
    >>> cfg = load_config("cartpole_dqn", overrides=["policy.learn.batch_size=128"])
    >>> cfg.policy.learn.batch_size, cfg.create_config.policy.type, is_compiled(cfg)
    (128, 'dqn', True)
    >>> load_config(cfg) is cfg
    True
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from easydict import EasyDict

from ding_dist.config.actor_learner import actor_learner_default_config, check_actor_learner_config
from ding_dist.config.compile import compile_config
from ding_dist.config.ding.marks import looks_like_ding
from ding_dist.config.errors import ConfigError
from ding_dist.config.loader import read_config
from ding_dist.config.sync_rules import check_sync_config

__all__ = ["CompiledConfig", "ConfigSource", "is_compiled", "load_config", "run_defaults"]


class CompiledConfig(EasyDict):
    """The config :func:`load_config` compiled: an :class:`~easydict.EasyDict` whose type says it is compiled.

    Its sections are plain EasyDicts; a copy keeps the mark (``copy.deepcopy``, pickling to another process), a
    rebuilt dict (``EasyDict(cfg)``, :func:`~ding_dist.config.compile.to_plain`) does not and is compiled again.

    Example:
        >>> cfg = load_config("cartpole_ppo")
        >>> type(cfg).__name__, type(cfg.policy).__name__
        ('CompiledConfig', 'EasyDict')
    """

    def __setattr__(self, name: str, value: Any) -> None:
        if type(value) in (list, tuple):  # EasyDict would make dicts in a list of this type: only the top is marked
            value = type(value)(EasyDict(v) if isinstance(v, dict) else v for v in value)
            super(EasyDict, self).__setattr__(name, value)
            dict.__setitem__(self, name, value)
        else:
            super().__setattr__(name, value)

    __setitem__ = __setattr__


#: What :func:`load_config` takes: a config file's path (or a shipped config's name), a ``(main_config,
#: create_config)`` pair, a ``main_config`` dict (its ``create_config`` in it, as a saved config holds it) or a
#: compiled config.
ConfigSource = str | os.PathLike | tuple[Mapping, Mapping] | Mapping


def is_compiled(config: Any) -> bool:
    """True for a config :func:`load_config` returned (or a copy of one), False for anything still to compile.

    Example:
        >>> is_compiled(load_config("cartpole_dqn")), is_compiled({"policy": {}, "create_config": {}})
        (True, False)
    """
    return isinstance(config, CompiledConfig)


def run_defaults(policy_type: str) -> dict[str, EasyDict]:
    """The sections a run's config is compiled against: the defaults of the env, of policy ``policy_type`` and of
    the ``actor_learner`` section (with ``exp_name`` and ``seed``, the schema of a compiled config).

    Example:
        >>> sorted(run_defaults("dqn")), run_defaults("dqn")["policy"].learn.batch_size
        (['actor_learner', 'env', 'pbt', 'policy'], 64)
    """
    from ding_dist.config.pbt import pbt_default_config
    from ding_dist.config.sections import ENV_KEYS
    from ding_dist.policy import get_policy_cls

    return {
        "env": ENV_KEYS.defaults(),
        "policy": get_policy_cls(policy_type).default_config(),
        "actor_learner": actor_learner_default_config(),
        "pbt": pbt_default_config(),
    }


def load_config(source: ConfigSource, *, seed: int | None = None, overrides: Sequence[str] = ()) -> CompiledConfig:
    """The compiled global config (totals, not a rank's share) of ``source``: read, translated when it is a
    DI-engine file, merged over :func:`run_defaults`, ``overrides`` (``"key.path=value"``) applied, checked.

    ``source``: a config file (``.py``, or a run's ``config.json``) or a shipped config's name (``"cartpole_ppo"``),
    a ``(main_config, create_config)`` pair, a ``main_config`` dict holding its ``create_config``, or a config
    compiled already, which comes back as it is (``seed`` and ``overrides`` were given when it was compiled). A bad
    key or value is one :class:`~ding_dist.config.errors.ConfigError` naming every problem; a missing or unknown
    policy type a ``ValueError`` naming it.

    Example:
        >>> cfg = load_config("configs/cartpole_dqn_config.py", seed=3)
        >>> cfg.seed, cfg.env.id
        (3, 'CartPole-v1')
        >>> load_config({"policy": {}, "create_config": {"policy": {"type": "ppo"}}}).policy.learn.epoch_per_collect
        10
    """
    if is_compiled(source):
        if seed is not None or overrides:
            raise ValueError("this config is compiled already: give seed and overrides when it is compiled")
        return source
    if isinstance(source, (str, os.PathLike)):
        main, create = read_config(source)
    elif isinstance(source, tuple) and len(source) == 2 and isinstance(source[0], Mapping):
        main, create = EasyDict(source[0]), EasyDict(source[1] or {})
    elif isinstance(source, Mapping):
        main = EasyDict(source)
        create = EasyDict(main.pop("create_config", None) or {})
    else:
        raise ConfigError(
            "config must be a config file's path or a shipped config's name, (main_config, create_config), a "
            f"main_config dict or a compiled config, got {type(source).__name__} {source!r:.80}"
        )
    if looks_like_ding(main, create):  # DI-engine files: translated (ding_dist.config.ding, imported for them only)
        from ding_dist.config.ding.translate import translate_if_ding

        main, create, overrides = translate_if_ding(main, create, overrides, source)
    policy_type = (create.get("policy") or {}).get("type")
    if policy_type is None:
        raise ValueError("create_config.policy.type is missing; set it to one of the registered policies")
    cfg = compile_config(main, create, defaults=run_defaults(policy_type), seed=seed, overrides=overrides)
    check_sync_config(cfg.policy.sync)
    check_actor_learner_config(cfg.actor_learner)
    from ding_dist.config.pbt import check_pbt_config
    from ding_dist.policy import get_policy_cls

    check_pbt_config(cfg.pbt, get_policy_cls(policy_type), actors=cfg.actor_learner.actors, policy_type=policy_type,
                     preempt=bool(cfg.policy.collect.get("preempt", False)))  # fmt: skip
    return CompiledConfig(cfg)
