"""Optimizer utilities: FusedOptimizer runs elementwise torch optimizers on flat parameter buffers."""

from ding_dist.optim.fused import FusedOptimizer

__all__ = ["FusedOptimizer"]
