"""Utilities: crash-safe checkpoints, rank-aware logging and metrics, atomic file writes.

Example:
    >>> from ding_dist.utils import CheckpointManager, MetricWriter, get_logger
"""

from ding_dist.utils.checkpoint import (
    CheckpointError,
    CheckpointManager,
    capture_rng_state,
    load_checkpoint,
    restore_rng_state,
    save_checkpoint,
)
from ding_dist.utils.fileio import atomic_open, atomic_write_json, atomic_write_text
from ding_dist.utils.logging import METRICS_FILE, MetricWriter, get_logger, progress_bar, read_metrics

__all__ = [
    "CheckpointError",
    "CheckpointManager",
    "METRICS_FILE",
    "MetricWriter",
    "atomic_open",
    "atomic_write_json",
    "atomic_write_text",
    "capture_rng_state",
    "get_logger",
    "load_checkpoint",
    "progress_bar",
    "read_metrics",
    "restore_rng_state",
    "save_checkpoint",
]
