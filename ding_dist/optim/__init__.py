"""Optimizer utilities: FusedOptimizer runs elementwise torch optimizers on flat parameter buffers; eager gives a
torch optimizer that leaves ``torch._dynamo`` unimported."""

from ding_dist.optim.eager import eager
from ding_dist.optim.fused import FusedOptimizer

__all__ = ["FusedOptimizer", "eager"]
