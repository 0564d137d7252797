"""Persia-style option objects that turn a model into a data-parallel one.

``DDPOption`` converts with torch's own ``DistributedDataParallel``; ``AlgorithmOption`` converts with
our engine (:func:`ding_dist.sync.distribute`). Both start the process group first if none runs.

Example:
    >>> option = get_default_distributed_option()      # gloo DDP on CPU
    >>> model, opt = option.convert(torch.nn.Linear(2, 2))
"""

from __future__ import annotations

import abc
import logging
from typing import Any

import torch
from torch import nn

from ding_dist import comm
from ding_dist.sync.algorithms import get_algorithm
from ding_dist.sync.engine import distribute

__all__ = [
    "AlgorithmOption",
    "BaguaDistributedOption",
    "DDPOption",
    "DistributedBaseOption",
    "get_default_distributed_option",
]

logger = logging.getLogger(__name__)

_DISTRIBUTE_KEYS = (
    "broadcast_buffers",
    "delay_reduce",
    "bucket_size_mb",
    "group",
    "skip_nonfinite",
    "max_nonfinite_skips",
)
_DDP_KEYS = (
    "broadcast_buffers",
    "bucket_cap_mb",
    "find_unused_parameters",
    "gradient_as_bucket_view",
    "static_graph",
    "process_group",
)
_INIT_METHODS = ("tcp", "env")


class DistributedBaseOption(abc.ABC):
    """Common part of the options: where to rendezvous when no process group runs yet.

    Not instantiated directly; see :class:`DDPOption` and :class:`AlgorithmOption`.
    """

    def __init__(self, master_port: int | None = None, master_addr: str | None = None) -> None:
        if master_port is not None and (
            isinstance(master_port, bool) or not isinstance(master_port, int) or not 0 < master_port < 65536
        ):
            raise ValueError(f"master_port must be an int in [1, 65535], got {master_port!r}")
        self.master_port = master_port
        self.master_addr = master_addr

    @property
    def backend(self) -> str | None:
        """The backend to initialize with (``None``: comm's default)."""
        return None

    def init_with_env_file(self) -> bool:
        """Whether the rendezvous uses a shared file (not supported: always ``False``)."""
        return False

    def convert2distributed_model(
        self,
        model: nn.Module,
        world_size: int,
        rank_id: int,
        device_id: int | None = None,
        master_addr: str | None = None,
        optimizer: Any = None,
    ) -> tuple[nn.Module, Any]:
        """Start the process group if needed (Persia's signature), then :meth:`convert`.

        Example:
            >>> DDPOption(backend="gloo").convert2distributed_model(nn.Linear(2, 2), 1, 0)  # doctest: +SKIP
        """
        if comm.is_fake() and world_size > 1:
            comm.dist_init(
                backend=self.backend,
                addr=master_addr or self.master_addr,
                port=self.master_port,
                rank=rank_id,
                world_size=world_size,
            )
        running = comm.get_world_size()
        if running != world_size:
            raise ValueError(f"world_size {world_size} differs from the running world size {running}")
        return self.convert(model, optimizer, device_id=device_id)

    @abc.abstractmethod
    def convert(self, model: nn.Module, optimizer: Any = None, device_id: int | None = None) -> tuple[nn.Module, Any]:
        """Wrap ``model`` for data-parallel training in the running process group."""


class DDPOption(DistributedBaseOption):
    """Convert with torch's ``DistributedDataParallel`` (backend ``'nccl'`` or ``'gloo'``).

    ``options`` may hold ``master_port``/``master_addr`` (used if no group runs yet) and the DDP
    keywords ``broadcast_buffers``, ``bucket_cap_mb``, ``find_unused_parameters``,
    ``gradient_as_bucket_view``, ``static_graph``, ``process_group``. On a world of one the model is
    returned as it is (torch DDP needs a process group).

    Example:
        >>> option = DDPOption(backend="gloo", find_unused_parameters=True)
        >>> option.backend
        'gloo'
    """

    def __init__(self, initialization_method: str = "tcp", backend: str = "nccl", **options: Any) -> None:
        if initialization_method not in _INIT_METHODS:
            raise ValueError(f"initialization_method must be one of {_INIT_METHODS}, got {initialization_method!r}")
        if backend not in ("nccl", "gloo"):
            raise ValueError(f"backend must be 'nccl' or 'gloo', got {backend!r}")
        master_port = options.pop("master_port", None)
        master_addr = options.pop("master_addr", None)
        unknown = sorted(set(options) - set(_DDP_KEYS))
        if unknown:
            raise ValueError(
                f"unknown DDPOption option(s) {unknown}; valid: master_port, master_addr, {', '.join(_DDP_KEYS)}"
            )
        super().__init__(master_port, master_addr)
        self.initialization_method = initialization_method
        self._backend = backend
        self.ddp_kwargs = options

    @property
    def backend(self) -> str:
        return self._backend

    def convert(self, model: nn.Module, optimizer: Any = None, device_id: int | None = None) -> tuple[nn.Module, Any]:
        """Wrap ``model`` in ``torch.nn.parallel.DistributedDataParallel``.

        Example:
            >>> model, _ = DDPOption(backend="gloo").convert(nn.Linear(2, 2))  # world of one: unchanged
        """
        if comm.is_fake():
            logger.info("DDPOption: world of one, the model is used as it is (no DistributedDataParallel)")
            return model, optimizer
        if device_id is not None:
            model = model.to(torch.device("cuda", device_id))
        device_ids = [device_id] if device_id is not None else None
        ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=device_ids, **self.ddp_kwargs)
        return ddp, optimizer

    def __repr__(self) -> str:
        return f"DDPOption(backend={self._backend!r}, {self.ddp_kwargs})"


class AlgorithmOption(DistributedBaseOption):
    """Convert with ding_dist's engine and algorithm ``algorithm`` (e.g. ``'bytegrad'``).

    ``options`` may hold ``master_port``/``master_addr``, ``backend`` (for starting the group), the
    :func:`~ding_dist.sync.distribute` keywords (``broadcast_buffers``, ``delay_reduce``,
    ``bucket_size_mb``, ``group``, ``skip_nonfinite``, ``max_nonfinite_skips``) and the algorithm's own options.

    Example:
        >>> option = AlgorithmOption("bytegrad", error_feedback=True)
        >>> model, opt = option.convert(nn.Linear(2, 2))
        >>> model.algorithm
        'bytegrad'
    """

    def __init__(self, algorithm: str = "gradient_allreduce", **options: Any) -> None:
        master_port = options.pop("master_port", None)
        master_addr = options.pop("master_addr", None)
        backend = options.pop("backend", None)
        if backend not in (None, "nccl", "gloo"):
            raise ValueError(f"backend must be 'nccl', 'gloo' or None, got {backend!r}")
        algo = get_algorithm(algorithm)
        unknown = sorted(set(options) - set(_DISTRIBUTE_KEYS) - set(algo.options))
        if unknown:
            valid = ", ".join((*_DISTRIBUTE_KEYS, *algo.options))
            raise ValueError(f"unknown option(s) {unknown} for algorithm {algo.name!r}; valid: {valid}")
        super().__init__(master_port, master_addr)
        self.algorithm = algo.name
        self._backend = backend
        self.options = options

    @property
    def backend(self) -> str | None:
        return self._backend

    def convert(self, model: nn.Module, optimizer: Any = None, device_id: int | None = None) -> tuple[nn.Module, Any]:
        """Wrap ``model`` with :func:`ding_dist.sync.distribute`."""
        if device_id is not None:
            model = model.to(torch.device("cuda", device_id))
        return distribute(model, optimizer, self.algorithm, **self.options)

    def __repr__(self) -> str:
        return f"AlgorithmOption({self.algorithm!r}, {self.options})"


BaguaDistributedOption = AlgorithmOption
"""Persia's name for :class:`AlgorithmOption`."""


def get_default_distributed_option(device_id: int | None = None) -> DDPOption:
    """``DDPOption`` with nccl when a CUDA ``device_id`` is given, else gloo.

    Example:
        >>> get_default_distributed_option().backend
        'gloo'
    """
    return DDPOption(backend="nccl" if device_id is not None else "gloo")
