"""ding_dist: scale reinforcement-learning training from one process to many GPUs and nodes.

The same code runs as a plain single process (the fake link: every helper acts as a world of one),
under ``ding_dist.launch``, torchrun or SLURM. The top level holds the few names a training script needs
(``ding_dist.__all__``):

- DI-engine's helper list (as ``ding.utils`` serves it): ``get_rank, get_world_size, broadcast, allreduce,
  get_group, dist_init, dist_finalize, dist_mode, error_wrapper``; ``allreduce`` sums, as torch.distributed does
- starting a job and asking where this process is: ``launch``, ``DistContext``, ``is_fake``, ``get_local_rank``,
  ``barrier``
- moving data between ranks: ``allgather``, ``allreduce_data``, ``broadcast_object``
- gradient synchronization: ``distribute``, ``sync_gradients``, ``broadcast_parameters``,
  ``available_algorithms``; and ``FusedOptimizer``

Everything else is imported from its subpackage, each reachable as an attribute (``ding_dist.comm``):
:mod:`ding_dist.comm` (every collective, groups, devices, debugging, heartbeats, ``free_port``),
:mod:`ding_dist.sync` (algorithms, ``QAdamOptimizer``, ``weight_drift``), :mod:`ding_dist.data`,
:mod:`ding_dist.entry` (``train``, ``serial_pipeline``), ``policy``, ``worker``, ``envs``, ``config``, ``utils``,
and :mod:`ding_dist.compat` (DI-engine's helper module, its ``DDPContext`` alias and mean ``allreduce``).
A name that left the top level says where it lives now::

    >>> import ding_dist
    >>> ding_dist.free_port
    Traceback (most recent call last):
    AttributeError: ding_dist.free_port moved: import it from ding_dist.comm

Names are imported on first use (PEP 562), so ``import ding_dist`` and ``ding-dist --help`` do not pay
for importing torch until a name that needs it is touched.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# Each top-level name and the subpackage that defines it.
_TOP: dict[str, str] = {
    # DI-engine's helper list (ding.utils), so its scripts change only their import line
    "get_rank": ".comm",
    "get_world_size": ".comm",
    "broadcast": ".comm",
    "allreduce": ".comm",
    "get_group": ".comm",
    "dist_init": ".comm",
    "dist_finalize": ".comm",
    "dist_mode": ".comm",
    "error_wrapper": ".comm",
    # starting a job and asking where this process is
    "launch": ".comm",
    "DistContext": ".comm",
    "is_fake": ".comm",
    "get_local_rank": ".comm",
    "barrier": ".comm",
    # moving data between ranks: tensors from every rank, a metric reduced, an object from one rank
    "allgather": ".comm",
    "allreduce_data": ".comm",
    "broadcast_object": ".comm",
    # gradient synchronization: the engine, its on-demand form, a common start, the algorithm names
    "distribute": ".sync",
    "sync_gradients": ".sync",
    "broadcast_parameters": ".sync",
    "available_algorithms": ".sync",
    # the optimizer that steps flat buffers
    "FusedOptimizer": ".optim",
}

__all__ = sorted(_TOP)

_SUBPACKAGES = ("comm", "compat", "config", "data", "entry", "envs", "optim", "policy", "sync", "utils", "worker")

# Names once served here that live only in their subpackage now (every other name of ding_dist.comm too).
_MOVED: dict[str, str] = {
    "DistributedModel": "sync",
    "NonFiniteGradientError": "sync",
    "QAdamOptimizer": "sync",
    "allreduce_parameters": "sync",
    "register_algorithm": "sync",
    "weight_drift": "sync",
    "LoadBalancingDistributedBatchSampler": "data",
    "LoadBalancingDistributedSampler": "data",
}


def _moved_to(name: str) -> str | None:
    """The subpackage that serves ``name`` instead of the top level, or None (``ding_dist.comm`` needs no torch)."""
    if name in _MOVED:
        return _MOVED[name]
    if not name.startswith("_") and name in importlib.import_module(".comm", __name__)._WHERE:
        return "comm"
    return None


def __getattr__(name: str) -> Any:
    if name in _SUBPACKAGES:
        return importlib.import_module(f".{name}", __name__)
    module = _TOP.get(name)
    if module is None:
        home = _moved_to(name)
        if home is not None:
            raise AttributeError(f"ding_dist.{name} moved: import it from ding_dist.{home}")
        raise AttributeError(f"module 'ding_dist' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_TOP, *_SUBPACKAGES})
