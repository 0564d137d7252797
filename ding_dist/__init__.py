"""ding_dist: scale reinforcement-learning training from one process to many GPUs and nodes.

The same code runs as a plain single process (the fake link: every helper acts as a world of one),
under ``ding_dist.launch``, torchrun or SLURM.

- collectives and process-group helpers: :mod:`ding_dist.comm` (re-exported here, with the helper list
  DI-engine serves from ``ding.utils``: ``get_rank, get_world_size, broadcast, allreduce, get_group,
  dist_init, dist_finalize, dist_mode, error_wrapper``; DI-engine's alias ``DDPContext`` stays in
  :mod:`ding_dist.comm` and :mod:`ding_dist.compat`)
- gradient synchronization: ``distribute``, ``sync_gradients`` and friends from :mod:`ding_dist.sync`
- ``FusedOptimizer`` and the load-balancing samplers
- the RL side lives in subpackages: ``ding_dist.entry`` (``serial_pipeline``, ``train``),
  ``ding_dist.policy``, ``ding_dist.worker``, ``ding_dist.envs``, ``ding_dist.config``, ``ding_dist.utils``.

Names are imported on first use (PEP 562), so ``import ding_dist`` and ``ding-dist --help`` do not pay
for importing torch until a name that needs it is touched.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_SYNC_NAMES = (
    "DistributedModel",
    "NonFiniteGradientError",
    "QAdamOptimizer",
    "allreduce_parameters",
    "available_algorithms",
    "broadcast_parameters",
    "distribute",
    "register_algorithm",
    "sync_gradients",
    "weight_drift",
)
_SUBPACKAGES = ("comm", "compat", "config", "data", "entry", "envs", "optim", "policy", "sync", "utils", "worker")
_OTHER_NAMES = {
    "FusedOptimizer": ".optim",
    "LoadBalancingDistributedBatchSampler": ".data.samplers",
    "LoadBalancingDistributedSampler": ".data.samplers",
}
# DI-engine's alias of DistContext: in ding_dist.comm and ding_dist.compat for drop-in code, not here.
_COMM_ONLY = frozenset({"DDPContext"})


def _comm_names() -> list[str]:
    return [n for n in importlib.import_module(".comm", __name__).__all__ if n not in _COMM_ONLY]


def __getattr__(name: str) -> Any:
    if name == "__all__":  # star imports: every re-exported name (importing torch, as they use it)
        names = [*_comm_names(), *_OTHER_NAMES, *_SYNC_NAMES]
        globals()["__all__"] = names
        return names
    if name in _SUBPACKAGES:
        return importlib.import_module(f".{name}", __name__)
    if name in _SYNC_NAMES:
        module = ".sync"
    elif name in _OTHER_NAMES:
        module = _OTHER_NAMES[name]
    elif not name.startswith("_") and name in _comm_names():
        module = ".comm"
    else:
        raise AttributeError(f"module 'ding_dist' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value
