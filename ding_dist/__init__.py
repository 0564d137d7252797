"""ding_dist: scale reinforcement-learning training from one process to many GPUs and nodes.

The same code runs as a plain single process (the fake link: every helper acts as a world of one),
under ``ding_dist.launch``, torchrun or SLURM.

- collectives and process-group helpers: :mod:`ding_dist.comm` (all re-exported here)
- gradient synchronization: ``distribute``, ``sync_gradients`` and friends from :mod:`ding_dist.sync`
- ``FusedOptimizer`` and the load-balancing samplers
- the RL side lives in subpackages: ``ding_dist.entry`` (``serial_pipeline``, ``train``),
  ``ding_dist.policy``, ``ding_dist.worker``, ``ding_dist.envs``, ``ding_dist.config``, ``ding_dist.utils``.
"""

from .comm import *  # noqa: F403
from .comm import __all__ as _comm_all
from .data.samplers import LoadBalancingDistributedBatchSampler, LoadBalancingDistributedSampler
from .optim import FusedOptimizer
from .sync import (
    AlgorithmOption,
    BaguaDistributedOption,
    DDPOption,
    DistributedAlgorithm,
    DistributedModel,
    NonFiniteGradientError,
    QAdamOptimizer,
    allreduce_parameters,
    available_algorithms,
    broadcast_parameters,
    distribute,
    get_default_distributed_option,
    register_algorithm,
    sync_gradients,
)

__version__ = "0.1.0"
__all__ = [
    *_comm_all,
    "AlgorithmOption",
    "BaguaDistributedOption",
    "DDPOption",
    "DistributedAlgorithm",
    "DistributedModel",
    "FusedOptimizer",
    "NonFiniteGradientError",
    "LoadBalancingDistributedBatchSampler",
    "LoadBalancingDistributedSampler",
    "QAdamOptimizer",
    "allreduce_parameters",
    "available_algorithms",
    "broadcast_parameters",
    "distribute",
    "get_default_distributed_option",
    "register_algorithm",
    "sync_gradients",
]
