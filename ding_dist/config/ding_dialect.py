"""DI-engine's dialect, as it was first imported: the names of :mod:`ding_dist.config.ding`, re-exported.

The translation lives in the package :mod:`ding_dist.config.ding` (a shared core and one module per family of
policies); this module keeps ``from ding_dist.config.ding_dialect import translate_ding_config`` working.

Example:
    >>> from ding_dist.config.ding_dialect import looks_like_ding
    >>> looks_like_ding({"policy": {"cuda": False}}, {"env": {"type": "cartpole"}})
    True
"""

from ding_dist.config.ding import (
    DING_ENV_IDS,
    NO_CLIP,
    TRANSLATORS,
    Translation,
    TranslationReport,
    Translator,
    looks_like_ding,
    translate_ding_config,
    translate_if_ding,
    translates,
)

__all__ = [
    "DING_ENV_IDS",
    "NO_CLIP",
    "TRANSLATORS",
    "Translation",
    "TranslationReport",
    "Translator",
    "looks_like_ding",
    "translate_ding_config",
    "translate_if_ding",
    "translates",
]
