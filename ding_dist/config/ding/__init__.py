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
:class:`~ding_dist.config.errors.ConfigError` naming the key, as is any key the translation does not know (with the
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
    >>> from ding_dist.config.ding import looks_like_ding, translate_ding_config
    >>> looks_like_ding(main, create)
    True
    >>> ours, our_create, _, report = translate_ding_config(main, create)
    >>> ours["env"]["id"], ours["policy"]["eval"]["eval_freq"], ours["policy"]["discount_factor"]
    ('CartPole-v0', 112, 0.97)

Layout: :mod:`~ding_dist.config.ding.marks` (whether a config is DI-engine's, the check every config goes through),
:mod:`~ding_dist.config.ding.imports` (DI-engine files that import ``ding``'s config helpers, read without DI-engine),
:mod:`~ding_dist.config.ding.core` (the :class:`Translator`'s reads, writes and refusals, the registry of
translators by DI-engine policy type name, the helpers all families share), :mod:`~ding_dist.config.ding.report`
(the :class:`TranslationReport`), :mod:`~ding_dist.config.ding.sections` (``create_config`` and the keys of every
policy section), :mod:`~ding_dist.config.ding.envs` (DI-engine's env suites onto our ``env`` section),
:mod:`~ding_dist.config.ding.translate` (the whole translation and ``--set``), and one module per
family of policies, each translator beside its family's shared defaults: :mod:`~ding_dist.config.ding.q_learning`
(DQN and its relatives), :mod:`~ding_dist.config.ding.actor_critic` (DI-engine's VAC network: PPO, A2C, IMPALA,
off-policy PPO and PPG), :mod:`~ding_dist.config.ding.episodes` (PG, PPO-PG: whole episodes),
:mod:`~ding_dist.config.ding.continuous` (off-policy actor-critic: SAC, discrete SAC, TD3, DDPG, D4PG) and
:mod:`~ding_dist.config.ding.sequences` (replayed sequences: R2D2, ACER). A new translator is a function in its
family's module under ``@translates("<DI-engine policy type>", on_policy=...)``.

The names below load on first use (PEP 562): a config of ours imports :mod:`~ding_dist.config.ding.marks` only.
"""

import importlib
from typing import Any

#: Public name -> the module of this package that defines it.
_NAMES = {
    "DING_ENV_IDS": "envs",
    "NO_CLIP": "core",
    "TRANSLATORS": "translate",  # the registry, filled by the family modules the translation imports
    "Translation": "core",
    "TranslationReport": "report",
    "Translator": "core",
    "looks_like_ding": "marks",
    "translate_ding_config": "translate",
    "translate_if_ding": "translate",
    "translates": "core",
}

__all__ = sorted(_NAMES)


def __getattr__(name: str) -> Any:
    if name not in _NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if _NAMES[name] != "marks":
        importlib.import_module(".translate", __name__)  # every translator registered before any name is used
    value = getattr(importlib.import_module(f".{_NAMES[name]}", __name__), name)
    globals()[name] = value
    return value
