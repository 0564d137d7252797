"""Gradient synchronization: bucketed, overlapped averaging of gradients across ranks.

``model, optimizer = distribute(model, optimizer, algorithm='gradient_allreduce')`` wraps a module
so that after every ``loss.backward()`` its gradients are averaged across the process group;
``sync_gradients(model)`` does the same on demand. Algorithms live one per file in
:mod:`ding_dist.sync.algorithms`.
"""

from .algorithms import (
    Algorithm,
    DistributedAlgorithm,
    available_algorithms,
    get_algorithm,
    register_algorithm,
)
from .algorithms.qadam import QAdamOptimizer
from .bucket import Bucket, BucketStage
from .decentralized_dp import DecentralizedDataParallel
from .drift import weight_drift
from .engine import DistributedModel, distribute
from .functional import sync_gradients
from .nonfinite import NonFiniteGradientError
from .options import (
    AlgorithmOption,
    BaguaDistributedOption,
    DDPOption,
    DistributedBaseOption,
    get_default_distributed_option,
)
from .parameters import allreduce_parameters, broadcast_parameters
from .topology import Edge, Topology, available_topologies, get_topology, register_topology

__all__ = [
    "Algorithm",
    "AlgorithmOption",
    "BaguaDistributedOption",
    "Bucket",
    "DDPOption",
    "DecentralizedDataParallel",
    "DistributedAlgorithm",
    "DistributedBaseOption",
    "DistributedModel",
    "Edge",
    "NonFiniteGradientError",
    "BucketStage",
    "QAdamOptimizer",
    "Topology",
    "allreduce_parameters",
    "available_algorithms",
    "available_topologies",
    "broadcast_parameters",
    "distribute",
    "get_algorithm",
    "get_default_distributed_option",
    "get_topology",
    "register_algorithm",
    "register_topology",
    "sync_gradients",
    "weight_drift",
]
