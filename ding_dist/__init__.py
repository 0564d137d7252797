"""ding_dist: scale reinforcement-learning training from one process to many GPUs and nodes.

The same code runs as a plain single process (the fake link: every helper acts as a world of one),
under ``ding_dist.launch``, torchrun or SLURM.
"""

from .comm import *  # noqa: F403
from .comm import __all__ as _comm_all

__version__ = "0.1.0"
__all__ = list(_comm_all)
