"""Entry points: training pipelines and evaluation (the ``ding-dist`` CLI lives in ``entry/cli/``).

Layout: :mod:`~ding_dist.entry.pipeline` (train: compile once, pick the loop, run),
:mod:`~ding_dist.entry.experiment` (the compiled run), :mod:`~ding_dist.entry.services` (checkpointing,
metrics, evaluation, failures, the run folder), :mod:`~ding_dist.entry.loops` (data-parallel, actor, learner).

Names load on first use (PEP 562), so ``ding-dist --help`` does not import torch.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["evaluate", "load_config", "serial_pipeline", "serial_pipeline_onpolicy", "train"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(".pipeline", __name__), name)
    globals()[name] = value
    return value
