"""Utilities: crash-safe checkpoints, rank-aware logging and metrics, atomic file writes, statistics over seeds.

Names are imported on first use (PEP 562), so the command line's ``--help`` and the config layer do not
import torch (which :mod:`ding_dist.utils.checkpoint` needs).

Example:
    >>> from ding_dist.utils import CheckpointManager, MetricWriter, get_logger
"""

from __future__ import annotations

from ding_dist._lazy import lazy_names

_NAMES = {
    "CheckpointError": ".checkpoint",
    "CheckpointManager": ".checkpoint",
    "capture_rng_state": ".checkpoint",
    "check_finite_weights": ".checkpoint",
    "load_checkpoint": ".checkpoint",
    "restore_rng_state": ".checkpoint",
    "save_checkpoint": ".checkpoint",
    "atomic_open": ".fileio",
    "atomic_write_json": ".fileio",
    "atomic_write_text": ".fileio",
    "shown_path": ".fileio",
    "unwritable_reason": ".fileio",
    "METRICS_FILE": ".logging",
    "MetricWriter": ".logging",
    "get_logger": ".logging",
    "PlainProgress": ".logging",
    "progress_bar": ".logging",
    "read_metrics": ".logging",
    "auc": ".stats",
    "curve_iqm": ".stats",
    "first_reach": ".stats",
    "iqm": ".stats",
    "stratified_bootstrap_ci": ".stats",
}

__all__ = sorted(_NAMES)
__getattr__, __dir__ = lazy_names(__name__, _NAMES)
