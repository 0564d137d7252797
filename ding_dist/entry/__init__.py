"""Entry points: training pipelines and evaluation (the ``ding-dist`` CLI lives in ``entry/cli/``).

Layout: :mod:`~ding_dist.entry.pipeline` (train: compile once, pick the loop, run),
:mod:`~ding_dist.entry.experiment` (the compiled run), :mod:`~ding_dist.entry.services` (checkpointing,
metrics, evaluation, failures, the run folder), :mod:`~ding_dist.entry.loops` (data-parallel, actor, learner).

Names load on first use (PEP 562), so ``ding-dist --help`` does not import torch.
"""

from __future__ import annotations

from ding_dist._lazy import lazy_names

__all__ = ["evaluate", "load_config", "serial_pipeline", "serial_pipeline_onpolicy", "train"]
__getattr__, __dir__ = lazy_names(__name__, dict.fromkeys(__all__, ".pipeline"))
