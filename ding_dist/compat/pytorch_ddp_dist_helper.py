"""DI-engine's ``ding.utils.pytorch_ddp_dist_helper``, drop-in: its names, signatures and behaviour.

Change ``from ding.utils import ...`` (or ``from ding.utils.pytorch_ddp_dist_helper import ...``) to
``from ding_dist.compat.pytorch_ddp_dist_helper import ...`` and code written against DI-engine runs
unchanged. Where such code relies on DI-engine's behaviour, it gets it: ``allreduce`` **averages** in
place (DI-engine's contract; ``ding_dist.allreduce`` and ``ding_dist.comm.allreduce_async`` sum by default, as
torch.distributed does), ``allreduce_data`` reduces a tensor in place, ``reduce_data`` returns a value on every rank,
``to_ddp_config`` edits the config it is given, ``allreduce_with_indicator`` leaves the contributor count
in the indicator tensor, ``dist_init(backend, addr, port, rank, world_size, timeout)``.

What stays ours (the fixes): CPU works (gloo; ``backend='nccl'`` on a machine without CUDA falls back to
gloo with a warning), collectives time out after 30 minutes (``DING_DIST_TIMEOUT``), not 16.7 hours,
``dist_finalize`` destroys the group, a plain ``python script.py`` is a world of one instead of an error,
SLURM's global rank is ``SLURM_PROCID``, ``allreduce_async`` returns its handle, ``dist_mode`` returns the
function's value and finalizes on an exception. Every difference: docs/migration_from_ding.md.

Example:
    >>> import torch
    >>> from ding_dist.compat.pytorch_ddp_dist_helper import allreduce, get_rank, get_world_size
    >>> t = torch.tensor([2.0, 4.0])
    >>> allreduce(t)  # the average over the ranks, in place (a world of one here)
    >>> t, get_rank(), get_world_size()
    (tensor([2., 4.]), 0, 1)
"""

from __future__ import annotations

import datetime
import logging
import numbers
import os
from typing import Any

import torch

import ding_dist.comm as _comm
from ding_dist.comm import CommHandle, DDPContext, DistContext, dist_finalize, dist_mode, error_wrapper
from ding_dist.config import split as _split

__all__ = [
    "DDPContext",
    "DistContext",
    "allgather",
    "allreduce",
    "allreduce_async",
    "allreduce_data",
    "allreduce_with_indicator",
    "broadcast",
    "broadcast_object_list",
    "dist_finalize",
    "dist_init",
    "dist_mode",
    "error_wrapper",
    "get_group",
    "get_rank",
    "get_world_size",
    "reduce_data",
    "simple_group_split",
    "synchronize",
    "to_ddp_config",
]

logger = logging.getLogger(__name__)


def get_rank() -> int:
    """This process's rank in the world; 0 when no process group runs.

    Example:
        >>> get_rank()
        0
    """
    return _comm.get_rank()


def get_world_size() -> int:
    """Number of processes in the world; 1 when no process group runs.

    Example:
        >>> get_world_size()
        1
    """
    return _comm.get_world_size()


def broadcast(tensor: torch.Tensor, src: int, group: Any = None, async_op: bool = False) -> CommHandle | None:
    """Copy rank ``src``'s ``tensor`` into ``tensor`` on every rank (``torch.distributed.broadcast``'s signature).

    Example:
        >>> t = torch.arange(3)
        >>> broadcast(t, 0)
        >>> t
        tensor([0, 1, 2])
    """
    return _comm.broadcast(tensor, src, group, async_op)


def allgather(
    tensor_list: list[torch.Tensor], tensor: torch.Tensor, group: Any = None, async_op: bool = False
) -> CommHandle | None:
    """Gather every rank's ``tensor`` into ``tensor_list`` (rank order, in place), as ``torch.distributed.all_gather``.

    With ``async_op=True`` the gather has completed already and a finished handle is returned.

    Example:
        >>> out = [torch.empty(2)]
        >>> allgather(out, torch.tensor([1.0, 2.0]))
        >>> out
        [tensor([1., 2.])]
    """
    size = _comm.get_world_size(group)
    if not isinstance(tensor_list, list) or len(tensor_list) != size:
        raise ValueError(f"allgather: tensor_list must be a list of {size} tensors (one per rank)")
    for out, part in zip(tensor_list, _comm.allgather(tensor, group)):
        out.copy_(part)
    return CommHandle(None, tensor_list) if async_op else None


def broadcast_object_list(object_list: list, src: int = 0, group: Any = None, device: Any = None) -> None:
    """Replace ``object_list`` in place with rank ``src``'s list (``torch.distributed.broadcast_object_list``).

    ``device`` is accepted for compatibility; the objects travel as pickled bytes on the group's device.

    Example:
        >>> objs = [True, {"eval_episode_return": 195.0}]
        >>> broadcast_object_list(objs, src=0)
        >>> objs[0]
        True
    """
    _comm.broadcast_object_list(object_list, src=src, group=group)


def allreduce(x: torch.Tensor, group: Any = None) -> None:
    """Average ``x`` in place over the ranks (DI-engine's ``allreduce``: a sum divided by the world size).

    This module's ``allreduce`` keeps DI-engine's mean, as its gradient sync and log reduction expect; everywhere
    else in ding_dist (``ding_dist.allreduce``, ``ding_dist.comm.allreduce_async``) the default is the sum, as in
    ``torch.distributed.all_reduce``: pass ``op="avg"`` there for the mean.

    Example:
        >>> g = torch.tensor([1.0, 3.0])
        >>> allreduce(g)  # on 2 ranks holding [1, 3] and [3, 5]: [2, 4] on both
        >>> g
        tensor([1., 3.])
    """
    _comm.allreduce(x, op="avg", group=group)


def allreduce_with_indicator(grad: torch.Tensor, indicator: torch.Tensor | float) -> None:
    """Sum ``grad`` over the ranks and divide by the number of ranks that contributed (the summed indicator).

    As DI-engine: every rank's ``grad`` is summed (a rank with indicator 0 should pass zeros), then divided
    by the indicator sum when it is not 0; a tensor ``indicator`` holds that sum afterwards. One collective
    (DI-engine uses two), on CPU or GPU.

    Example:
        >>> g, flag = torch.tensor([2.0, 4.0]), torch.tensor(1.0)
        >>> allreduce_with_indicator(g, flag)  # on 2 ranks, [2, 4] with 1 and zeros with 0: [2, 4], flag 1
        >>> g, flag
        (tensor([2., 4.]), tensor(1.))
    """
    if not isinstance(grad, torch.Tensor) or not grad.is_floating_point():
        raise TypeError(f"allreduce_with_indicator needs a floating-point gradient tensor, got {grad!r:.80}")
    if isinstance(indicator, torch.Tensor):
        if indicator.numel() != 1:
            raise ValueError(f"indicator must hold one value, got shape {tuple(indicator.shape)}")
        flag = indicator.detach().reshape(1).to(device=grad.device, dtype=grad.dtype)
    else:
        flag = torch.tensor([float(indicator)], device=grad.device, dtype=grad.dtype)
    packed = torch.cat([grad.detach().reshape(-1), flag])
    _comm.allreduce(packed, op="sum")
    count = packed[-1]
    grad.copy_(packed[:-1].view_as(grad))
    grad.div_(torch.where(count == 0, torch.ones_like(count), count))  # no host read
    if isinstance(indicator, torch.Tensor):
        indicator.copy_(count.reshape(indicator.shape).to(indicator.dtype))


def allreduce_async(name: str, x: torch.Tensor) -> CommHandle:
    """Start averaging ``x`` in place (divided by the world size first, then summed); returns the handle.

    DI-engine drops the handle, so its callers cannot know when ``x`` is ready; call ``handle.wait()``
    before reading ``x``. ``name`` is accepted for compatibility and not used.

    Example:
        >>> x = torch.ones(2)
        >>> allreduce_async("grad", x).wait()
        tensor([1., 1.])
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"allreduce_async expects a torch.Tensor, got {type(x).__name__}")
    x.div_(_comm.get_world_size())
    return _comm.allreduce(x, op="sum", async_op=True)


def _is_number(x: Any) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def reduce_data(x: int | float | torch.Tensor, dst: int) -> int | float | torch.Tensor:
    """Sum ``x`` onto rank ``dst``. A number: ``dst`` gets the sum, the other ranks their own value back.
    A tensor: reduced in place on ``dst`` (left as it was elsewhere) and returned. CPU or GPU.

    Example:
        >>> reduce_data(2.5, 0)  # on 2 ranks with 2.5 and 1.5: 4.0 on rank 0, 1.5 on rank 1
        2.5
    """
    if isinstance(x, torch.Tensor):
        result = _comm.reduce_data(x, dst=dst, op="sum")
        if result is not None:
            x.copy_(result)
        return x
    if not _is_number(x):
        raise TypeError(f"reduce_data supports an int, a float or a torch.Tensor, got {type(x).__name__}")
    result = _comm.reduce_data(x, dst=dst, op="sum")
    return x if result is None else result


def allreduce_data(x: int | float | torch.Tensor, op: str) -> int | float | torch.Tensor:
    """Reduce ``x`` over the ranks with ``op`` (``'sum'`` or ``'avg'``) and return it; a tensor in place.

    Example:
        >>> allreduce_data(8, "sum")  # env steps collected by this rank; on 2 ranks with 8 each: 16
        8
    """
    if op not in ("sum", "avg"):
        raise ValueError(f"allreduce_data: op must be 'sum' or 'avg', got {op!r}")
    if isinstance(x, torch.Tensor):
        x.copy_(_comm.allreduce_data(x, op=op))
        return x
    if not _is_number(x):
        raise TypeError(f"allreduce_data supports an int, a float or a torch.Tensor, got {type(x).__name__}")
    return _comm.allreduce_data(x, op=op)


def synchronize(device: torch.device | str | int | None = None) -> None:
    """Wait for the CUDA work queued on ``device`` (DI-engine's is ``torch.cuda.synchronize``, same argument).

    ``device``: a CUDA device (``torch.device``, ``'cuda:1'`` or an index; ``None``: the current one). Without
    CUDA (a CPU-only machine, or CUDA not used yet by this process) nothing can be queued, so this returns
    at once, whatever CUDA device is named (DI-engine's crashes on CPU); a ``'cpu'`` device returns at once
    too, since CPU work runs synchronously (``torch.cuda.synchronize('cpu')`` raises). Any other device type,
    or a CUDA index past the last GPU, is a ``ValueError``.

    Example:
        >>> synchronize()
        >>> synchronize("cpu")
    """
    if device is not None:
        if isinstance(device, bool) or not isinstance(device, (int, str, torch.device)):
            raise TypeError(f"synchronize: device must be a torch.device, a str or an int, got {device!r}")
        dev = torch.device("cuda", device) if isinstance(device, int) else torch.device(device)
        if dev.type == "cpu":
            return
        if dev.type != "cuda":
            raise ValueError(f"synchronize: expected a CUDA or CPU device, got {device!r}")
        if torch.cuda.is_available() and dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(
                f"synchronize: device {device!r} does not exist; this machine has {torch.cuda.device_count()} GPU(s)"
            )
        device = dev
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize(device)


def get_group(group_size: int | None = None) -> Any:
    """This rank's group among consecutive groups of ``group_size`` ranks (None: the whole world).

    Groups are created once and cached (DI-engine creates new ones on every call).

    Example:
        >>> get_group(1).size()
        1
    """
    return _comm.get_group(_comm.get_world_size() if group_size is None else group_size)


def simple_group_split(world_size: int, rank: int, num_groups: int) -> Any:
    """Split ``world_size`` ranks into ``num_groups`` consecutive groups and return ``rank``'s group.

    Example:
        >>> simple_group_split(1, 0, 1).size()
        1
    """
    return _comm.simple_group_split(world_size, rank, num_groups)


def _env_int(*names: str) -> int | None:
    for name in names:
        if os.environ.get(name, "") != "":
            return int(os.environ[name])
    return None


def dist_init(
    backend: str | None = None,
    addr: str | None = None,
    port: str | int | None = None,
    rank: int | None = None,
    world_size: int | None = None,
    timeout: datetime.timedelta | float | None = None,
) -> tuple[int, int]:
    """Initialize the process group; DI-engine's argument order; returns ``(rank, world_size)``.

    ``backend`` None picks nccl with CUDA, else gloo; ``'nccl'`` on a machine without CUDA falls back to
    gloo with a warning (DI-engine crashes there). ``port`` may be a str, ``timeout`` a ``timedelta`` or
    seconds (default ``$DING_DIST_TIMEOUT`` or 30 min). A rank or world size not given comes from
    ``RANK``/``SLURM_PROCID`` and ``WORLD_SIZE``/``SLURM_NTASKS``; with neither given and no launcher
    variables, this is a world of one.

    Example:
        >>> dist_init()  # a plain `python script.py`
        (0, 1)
        >>> dist_finalize()
    """
    if backend == "nccl" and not torch.cuda.is_available():
        logger.warning("dist_init: backend 'nccl' needs CUDA and this machine has none; using 'gloo'")
        backend = "gloo"
    if isinstance(port, str):
        try:
            port = int(port)
        except ValueError:
            raise ValueError(f"dist_init: port must be an integer (str or int), got {port!r}") from None
    if isinstance(timeout, datetime.timedelta):
        timeout = timeout.total_seconds()
    if (rank is None) != (world_size is None):  # DI-engine fills the missing one from the launcher's variables
        rank = _env_int("RANK", "SLURM_PROCID") if rank is None else rank
        world_size = _env_int("WORLD_SIZE", "SLURM_NTASKS") if world_size is None else world_size
    return _comm.dist_init(backend, addr, port, rank, world_size, timeout)


def to_ddp_config(cfg: Any) -> Any:
    """Divide the per-process sizes by the world size **in place** and return ``cfg`` (as DI-engine does).

    ``policy.batch_size``, ``policy.learn.batch_size``, ``policy.collect.n_sample``, ``policy.collect.n_episode``
    (those present) become ``value / world_size``; each change is logged. A value that does not divide
    raises ``ConfigError`` (a ``ValueError``) naming the nearest ones that do, where DI-engine silently
    changes the global size.

    Example:
        >>> from easydict import EasyDict
        >>> cfg = EasyDict(policy=dict(learn=dict(batch_size=64)))
        >>> to_ddp_config(cfg) is cfg, cfg.policy.learn.batch_size  # unchanged in a world of one
        (True, 64)
    """
    return _split.to_ddp_config(cfg, in_place=True)
