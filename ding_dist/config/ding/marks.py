"""Whether a config is written in DI-engine's dialect: the check every config goes through, without importing the
translation (:mod:`ding_dist.config.ding.translate`), which only DI-engine files need.

Example:
    >>> looks_like_ding({"policy": {"cuda": False}}, {"env": {"type": "cartpole"}})
    True
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["looks_like_ding"]


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
