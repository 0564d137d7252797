"""The ``actor_learner`` config section: its defaults and checks, from the declaration of its keys
(:data:`~ding_dist.config.sections.ACTOR_LEARNER_KEYS`, the one place each key's default, meaning and rule is
written). :mod:`ding_dist.entry.roles` reads the section.

Example:
    >>> actor_learner_default_config().learners
    1
    >>> check_actor_learner_config({"actors": 2, "learners": 1})  # in range: nothing raised
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from easydict import EasyDict

from ding_dist.config.errors import ConfigError, raise_all
from ding_dist.config.rules import section_errors
from ding_dist.config.sections import ACTOR_LEARNER_KEYS, DEATH_POLICIES, LAG_MODES

__all__ = ["DEATH_POLICIES", "LAG_MODES", "actor_learner_default_config", "check_actor_learner_config"]


def actor_learner_default_config() -> EasyDict:
    """Defaults of the ``actor_learner`` config section (:data:`~ding_dist.config.sections.ACTOR_LEARNER_KEYS`).

    Example:
        >>> actor_learner_default_config().lag_mode
        'block'
    """
    return ACTOR_LEARNER_KEYS.defaults()


def check_actor_learner_config(al: Mapping[str, Any]) -> None:
    """Raise ``ConfigError`` naming every ``actor_learner.*`` key whose value breaks its rule, then what the keys
    must satisfy together (an inference rank needs actors; every learner needs an actor).

    Example:
        >>> check_actor_learner_config({"actors": -1})
        Traceback (most recent call last):
        ...
        ding_dist.config.errors.ConfigError: config key 'actor_learner.actors' must be an int >= 0, got -1
    """
    raise_all(section_errors("actor_learner", al))
    inference, actors, learners = al.get("inference", 0), al.get("actors", 0), al.get("learners", 1)
    if inference and not actors:
        raise ConfigError(
            "config key 'actor_learner.inference' is 1 but the run has no actors (actor_learner.actors=0): "
            "train with --actors N, or set it 0"
        )
    if actors and actors < learners:
        raise ConfigError(
            f"actor_learner.actors={actors} < actor_learner.learners={learners}: every learner needs at least one actor"
        )
