"""The sections of a run's config beyond the policy's, each key declared once: ``exp_name`` and ``seed``, ``env.*``,
``actor_learner.*`` and ``pbt.*`` (a :class:`~ding_dist.utils.keys.KeySet` per section, as a policy declares its own).

Each declaration gives the section's defaults (:func:`~ding_dist.config.compiled.run_defaults`), the meanings
``ding-dist config show`` prints and the docs tables (:mod:`ding_dist.config.describe`) and the value checks
(:mod:`ding_dist.config.rules`). The env section is declared here, not in :mod:`ding_dist.envs`, because the envs
layer cannot import the keys module (``ding_dist.utils``); :func:`~ding_dist.envs.make_vec_env` reads a section
compiled against these defaults. What several keys must satisfy together is checked by
:func:`~ding_dist.config.actor_learner.check_actor_learner_config` and :func:`~ding_dist.config.pbt.check_pbt_config`.

Example:
    >>> ENV_KEYS.defaults().collector_env_num, ACTOR_LEARNER_KEYS["lag_mode"].error("wait")
    (8, "must be one of ['block', 'drop']")
    >>> run_key("env.stop_value").meaning
    'stop once the evaluation return reaches this (None: never)'
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from ding_dist.utils.keys import Check, Key, KeySet

__all__ = [
    "ACTOR_LEARNER_KEYS",
    "DEATH_POLICIES",
    "ENV_KEYS",
    "LAG_MODES",
    "PBT_KEYS",
    "SECTIONS",
    "TOP_KEYS",
    "int_at_least",
    "run_key",
]


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def int_at_least(n: int) -> Check:
    """The rule "an int >= ``n``" (the wording of the ``actor_learner`` and ``pbt`` sections' messages).

    Example:
        >>> ok, expected = int_at_least(1)
        >>> ok(0), ok(True), expected
        (False, False, 'an int >= 1')
    """
    return (lambda v: _is_int(v) and v >= n), f"an int >= {n}"


def _one_of(choices: tuple[str, ...]) -> Check:
    return (lambda v: v in choices), f"one of {list(choices)}"


def _entry_point_ok(v: Any) -> bool:
    if v is None:
        return True
    module, sep, attr = v.partition(":") if isinstance(v, str) else ("", "", "")
    return bool(sep and module and attr)


def _section(*keys: Key) -> KeySet:
    """The keys of a section the pipeline reads (``reader="pipeline"``: loops, envs, the CLI), not a policy."""
    return KeySet(*(replace(key, reader="pipeline") for key in keys))


_SEED: Check = (lambda v: _is_int(v) and 0 <= v < 2**32), "an int in [0, 2**32)"
_ENV_ID: Check = (
    (lambda v: v is None or (isinstance(v, str) and v.strip() != "")),
    "a gymnasium id such as 'CartPole-v1'",
)
_STOP_VALUE: Check = (lambda v: v is None or (_is_number(v) and not math.isnan(v))), "a number or None"
# --set actor_learner.learner_threads=2 keeps the text "2" of a key whose default is a string
_THREADS: Check = (
    (lambda v: v == "auto" or (isinstance(v, str) and v.isdigit() and int(v) >= 1) or (_is_int(v) and v >= 1)),
    '"auto" or an int >= 1',
)

#: ``exp_name`` and ``seed``, the keys at the top of a config.
TOP_KEYS = _section(
    Key("exp_name", "default_experiment", "experiment name; the run goes to runs/<exp_name> unless --exp-dir is given"),
    Key("seed", 0, "random seed of envs, networks and sampling (each rank its own streams of it)", _SEED),
)

#: The ``env`` section (read by :mod:`ding_dist.envs` and the loops of :mod:`ding_dist.entry`).
ENV_KEYS = _section(
    Key("id", None, "gymnasium id; 'module:Id' imports module first", _ENV_ID),
    Key(
        "entry_point",
        None,
        "'module:callable' returning an env (gymnasium or old-gym style) instead of env.id",
        (_entry_point_ok, "'package.module:callable' or None"),
    ),
    Key("env_kwargs", {}, "keyword arguments for the env's constructor"),
    Key("max_episode_steps", None, "episode step limit (None: the env's own)"),
    Key("collector_env_num", 8, "training envs, the run's total (each of N ranks steps collector_env_num / N)", ">= 1"),
    Key("evaluator_env_num", 5, "evaluation envs (on rank 0)", ">= 1"),
    Key("n_evaluator_episode", 5, "episodes per evaluation", ">= 1"),
    Key("stop_value", None, "stop once the evaluation return reaches this (None: never)", _STOP_VALUE),
    Key("atari", None, "Atari preprocessing: None: the defaults for ALE ids; False: off; a dict: its options"),
    Key("step_cost_ms", 0.0, "artificial CPU cost per env step in ms (benchmarks; 0: none)", "number >= 0"),
    Key(
        "max_restarts",
        5,
        "restarts of one crashed collector env allowed within env.restart_window_s (then an "
        "error; 0: no restarts, gymnasium's own vector env)",
        ">= 0",
    ),
    Key("restart_window_s", 300.0, "window in seconds over which env.max_restarts counts one env's restarts", "> 0"),
    Key(
        "sample_groups",
        1,
        "double-buffered sampling: collector envs in this many groups, one steps while the "
        "policy acts for the next (1: off; must divide each rank's collector envs)",
        ">= 1",
    ),
    Key(
        "channels_first",
        False,
        "uint8 (H, W, C) image observations as (C, H, W), the CNN encoder's layout (e.g. CarRacing)",
    ),
    Key(
        "reward_clip",
        None,
        "[low, high] (either None: unbounded): collector envs' rewards clipped into it; logged "
        "returns stay true (None: off)",
    ),
)

LAG_MODES = ("block", "drop")
DEATH_POLICIES = ("continue", "stop")

#: The ``actor_learner`` section (read by :mod:`ding_dist.entry.roles` and the actor-learner loops).
ACTOR_LEARNER_KEYS = _section(
    Key("actors", 0, "actor processes; 0: the data-parallel mode", int_at_least(0)),
    Key("learners", 1, "learner processes (at most actors)", int_at_least(1)),
    Key(
        "weight_sync_every", 1, "least learner updates between two weight versions sent to the actors", int_at_least(1)
    ),
    Key("max_lag", 8, "most versions a learned chunk may lag behind the learners' weights", int_at_least(0)),
    Key(
        "lag_mode",
        "block",
        "'block': actors wait for slow learners; 'drop': newer chunks replace unconsumed ones",
        _one_of(LAG_MODES),
    ),
    Key(
        "queue",
        1,
        "chunks per actor a learner receives ahead while it learns (0: on demand, least lag)",
        int_at_least(0),
    ),
    Key("actor_buffers", 1, "chunks an actor may have in flight", int_at_least(1)),
    Key("on_actor_death", "continue", "'continue' with the actors left, or 'stop'", _one_of(DEATH_POLICIES)),
    Key("actor_device", "cpu", "where actors (or the inference rank) run their policy"),
    Key(
        "inference",
        0,
        "1: one more process acts for every actor in one batch (for a GPU); 0: actors act",
        ((lambda v: _is_int(v) and v in (0, 1)), "0 or 1 (inference ranks)"),
    ),
    Key(
        "learner_threads",
        "auto",
        "torch threads of a learner; 'auto': OMP_NUM_THREADS when set, else for a CNN "
        "the cores its host's actors leave (>= 2), for large updates on vectors up to those cores while "
        "they are idle (the thread governor), else 1",
        _THREADS,
    ),
    Key("actor_threads", "auto", "torch threads of an actor; 'auto': OMP_NUM_THREADS when set, else 1", _THREADS),
)

#: The ``pbt`` section (population-based training; read by :mod:`ding_dist.entry.loops.pbt` and
#: :mod:`ding_dist.worker.pbt`; ``hyperparams`` entries are checked by :func:`~ding_dist.config.pbt.parse_hyperparams`).
PBT_KEYS = _section(
    Key(
        "population",
        1,
        "members of a population-based training run (1: none); the processes must be a multiple",
        int_at_least(1),
    ),
    Key("interval", 10_000, "global env steps of each member between two exploit steps", int_at_least(1)),
    Key(
        "quantile",
        0.25,
        "fraction of the members that copy (bottom) and that are copied (top): ceil(K * quantile)",
        ((lambda v: _is_number(v) and math.isfinite(v) and 0.0 < v <= 0.5), "a number in (0, 0.5]"),
    ),
    Key(
        "hyperparams",
        {},
        "key -> dict(min, max, perturb, resample_probability, log, init): what members explore, "
        "among the keys the policy can change mid-run",
    ),
    Key("seed", 0, "seed of the initial draws, the selections and the perturbations", int_at_least(0)),
)

#: Every section declared here by name (``""``: the top level), in the order docs and ``config show`` list them.
SECTIONS: dict[str, KeySet] = {"": TOP_KEYS, "env": ENV_KEYS, "actor_learner": ACTOR_LEARNER_KEYS, "pbt": PBT_KEYS}


def run_key(dotted: str) -> Key | None:
    """The declaration of a non-policy config key by its full dotted path (None: not declared here).

    Example:
        >>> run_key("actor_learner.queue").default, run_key("seed").expected, run_key("policy.learn.batch_size")
        (1, 'an int in [0, 2**32)', None)
    """
    section, _, rest = dotted.partition(".")
    if rest and section in SECTIONS:
        return SECTIONS[section].get(rest)
    return TOP_KEYS.get(dotted)
