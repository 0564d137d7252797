"""Tensor collectives: validate the arguments, then hand them to the current link.

All of them work the same on the fake link (a world of one) and over a real process group.
"""

from __future__ import annotations

import numbers
from typing import Any

import torch
import torch.distributed as dist

from .devices import check_comm_device, comm_device
from .link import CommHandle, current_link, is_non_member

REDUCE_OPS: dict[str, Any] = {
    "sum": dist.ReduceOp.SUM,
    "avg": dist.ReduceOp.AVG,
    "max": dist.ReduceOp.MAX,
    "min": dist.ReduceOp.MIN,
    "product": dist.ReduceOp.PRODUCT,
}
_TORCH_OPS = {dist.ReduceOp.SUM, dist.ReduceOp.AVG, dist.ReduceOp.MAX, dist.ReduceOp.MIN, dist.ReduceOp.PRODUCT}


def reduce_op(op: str | Any) -> Any:
    """Turn ``'sum' | 'avg' | 'max' | 'min' | 'product'`` (or a ``ReduceOp``) into a ``ReduceOp``.

    Example:
        >>> reduce_op("max") == torch.distributed.ReduceOp.MAX
        True
    """
    if isinstance(op, str):
        try:
            return REDUCE_OPS[op]
        except KeyError:
            pass
    elif op in _TORCH_OPS:
        return op
    raise ValueError(f"op must be one of {sorted(REDUCE_OPS)} or a torch.distributed.ReduceOp, got {op!r}")


def _check_tensor(tensor: Any, fn: str, group: Any = None) -> None:
    """A tensor, on a device the group's backend moves (see :func:`~ding_dist.comm.devices.comm_device`)."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{fn} expects a torch.Tensor, got {type(tensor).__name__}")
    if not is_non_member(group):
        check_comm_device(tensor, group, fn)


def _check_src(value: int, name: str, fn: str) -> None:
    size = current_link().world_size()
    if not isinstance(value, int) or not 0 <= value < size:
        raise ValueError(f"{fn}: {name} must be a rank in [0, {size - 1}] for world size {size}, got {value!r}")


def _check_float_for_avg(tensor: torch.Tensor, op: Any, fn: str) -> None:
    if op is dist.ReduceOp.AVG and not (tensor.is_floating_point() or tensor.is_complex()):
        raise TypeError(f"{fn}(op='avg') needs a floating-point or complex tensor, got dtype {tensor.dtype}")


def allreduce(tensor: torch.Tensor, op: str | Any = "sum", group: Any = None, async_op: bool = False):
    """Reduce ``tensor`` in place across ranks; every rank ends with the identical result.

    ``op`` is ``'sum'`` (default, as in torch.distributed), ``'avg'``, ``'max'``, ``'min'``, ``'product'`` or a
    ``ReduceOp``. With ``async_op=True`` returns a ``CommHandle`` whose ``wait()`` completes the operation
    (for ``'avg'`` the division happens then).

    Example:
        >>> t = torch.tensor([1.0, 2.0])
        >>> allreduce(t, op="avg")      # on the fake link: unchanged
        >>> t
        tensor([1., 2.])
    """
    _check_tensor(tensor, "allreduce", group)
    op = reduce_op(op)
    _check_float_for_avg(tensor, op, "allreduce")
    return current_link(group).allreduce(tensor, op, group, async_op)


def allreduce_async(tensor: torch.Tensor, op: str | Any = "sum", group: Any = None) -> CommHandle:
    """Start an in-place allreduce and return its handle; ``wait()`` finishes it.

    ``op`` as for :func:`allreduce`: a sum by default, ``op="avg"`` for the mean (divided at ``wait()``).

    Example:
        >>> handle = allreduce_async(torch.ones(4), op="avg")
        >>> handle.wait()               # on the fake link: unchanged
        tensor([1., 1., 1., 1.])
    """
    return allreduce(tensor, op=op, group=group, async_op=True)


def broadcast(tensor: torch.Tensor, src: int = 0, group: Any = None, async_op: bool = False):
    """Copy rank ``src``'s ``tensor`` into ``tensor`` on every rank (in place).

    Example:
        >>> t = torch.arange(3)
        >>> broadcast(t, src=0)
        >>> t
        tensor([0, 1, 2])
    """
    _check_tensor(tensor, "broadcast", group)
    _check_src(src, "src", "broadcast")
    return current_link(group).broadcast(tensor, src, group, async_op)


def allgather(tensor: torch.Tensor, group: Any = None) -> list[torch.Tensor]:
    """Gather every rank's ``tensor`` (same shape everywhere) into a list ordered by rank.

    Example:
        >>> allgather(torch.tensor([7]))
        [tensor([7])]
    """
    _check_tensor(tensor, "allgather", group)
    link = current_link(group)
    outputs = [torch.empty_like(tensor) for _ in range(link.world_size(group))]
    link.allgather(outputs, tensor, group, False)
    return outputs


def allgather_into_tensor(output: torch.Tensor, input: torch.Tensor, group: Any = None, async_op: bool = False):
    """Gather every rank's ``input`` into the flat ``output`` (world size x ``input.numel()``), rank order.

    Example:
        >>> out = torch.empty(2)
        >>> allgather_into_tensor(out, torch.tensor([1.0, 2.0]))
        >>> out
        tensor([1., 2.])
    """
    _check_tensor(output, "allgather_into_tensor", group)
    _check_tensor(input, "allgather_into_tensor", group)
    link = current_link(group)
    expected = input.numel() * link.world_size(group)
    if output.numel() != expected:
        raise ValueError(
            f"allgather_into_tensor: output must hold world size x input = {expected} elements, got {output.numel()}"
        )
    return link.allgather_into_tensor(output, input, group, async_op)


def get_global_rank(group: Any, group_rank: int) -> int:
    """Global rank of ``group``'s member ``group_rank`` (``src``/``dst``/``peer`` arguments are global).

    Example:
        >>> get_global_rank(None, 0)
        0
    """
    return current_link(group).global_rank(group, group_rank)


def all_to_all_single(output: torch.Tensor, input: torch.Tensor, group: Any = None, async_op: bool = False):
    """Split ``input`` into world-size equal chunks, send chunk i to rank i, receive into ``output``.

    Example:
        >>> out = torch.empty(2)
        >>> all_to_all_single(out, torch.tensor([1.0, 2.0]))
        >>> out
        tensor([1., 2.])
    """
    _check_tensor(output, "all_to_all_single", group)
    _check_tensor(input, "all_to_all_single", group)
    if output.numel() != input.numel():
        raise ValueError(f"all_to_all_single: output has {output.numel()} elements, input {input.numel()}")
    return current_link(group).all_to_all_single(output, input, group, async_op)


def barrier(group: Any = None) -> None:
    """Block until every rank of ``group`` reaches this call (a no-op on the fake link).

    Example:
        >>> barrier()
    """
    current_link(group).barrier(group)


def _p2p(kind: str, tensor: torch.Tensor, peer: int, group: Any):
    _check_tensor(tensor, kind, group)
    link = current_link(group)
    if not link.is_fake:
        _check_src(peer, "peer", kind)
    return link.p2p(kind, tensor, peer, group)


def send(tensor: torch.Tensor, peer: int, group: Any = None) -> None:
    """Send ``tensor`` to rank ``peer`` (blocking). Example: ``send(t, peer=1)`` on rank 0."""
    _p2p("send", tensor, peer, group)


def recv(tensor: torch.Tensor, peer: int, group: Any = None) -> None:
    """Receive into ``tensor`` from rank ``peer`` (blocking). Example: ``recv(t, peer=0)`` on rank 1."""
    _p2p("recv", tensor, peer, group)


def isend(tensor: torch.Tensor, peer: int, group: Any = None) -> CommHandle:
    """Start sending ``tensor`` to ``peer``; ``wait()`` the handle. Example: ``isend(t, 1).wait()``."""
    return _p2p("isend", tensor, peer, group)


def irecv(tensor: torch.Tensor, peer: int, group: Any = None) -> CommHandle:
    """Start receiving into ``tensor`` from ``peer``; ``wait()`` the handle. Example: ``irecv(t, 0).wait()``."""
    return _p2p("irecv", tensor, peer, group)


def _as_comm_tensor(x: Any, fn: str, group: Any = None) -> tuple[torch.Tensor, Any]:
    """A private copy of ``x`` on a device the backend moves, plus how to turn the result back."""
    device = comm_device(group, like=x if isinstance(x, torch.Tensor) else None)
    if isinstance(x, torch.Tensor):
        origin = x.device
        return x.detach().to(device=device, copy=True), lambda t: t.to(origin)
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        raise TypeError(f"{fn} expects a Python int/float or a torch.Tensor, got {type(x).__name__}")
    if isinstance(x, int):
        return torch.tensor(x, dtype=torch.int64, device=device), lambda t: t.item()
    return torch.tensor(x, dtype=torch.float64, device=device), lambda t: t.item()


def allreduce_data(x: Any, op: str | Any = "sum", group: Any = None) -> Any:
    """Reduce a Python number or a tensor (CPU or GPU) across ranks; return the result, input untouched.

    ``'avg'`` of ints gives a float.

    Example:
        >>> allreduce_data(3, op="max")
        3
    """
    op = reduce_op(op)
    if op is dist.ReduceOp.AVG and isinstance(x, int) and not isinstance(x, bool):
        x = float(x)
    tensor, back = _as_comm_tensor(x, "allreduce_data", group)
    allreduce(tensor, op=op, group=group)
    return back(tensor)


def reduce_data(x: Any, dst: int = 0, op: str | Any = "sum", group: Any = None) -> Any:
    """Reduce a Python number or a tensor onto rank ``dst``; ``dst`` gets the result, other ranks ``None``.

    Example:
        >>> reduce_data(2.5, dst=0)
        2.5
    """
    op = reduce_op(op)
    _check_src(dst, "dst", "reduce_data")
    if op is dist.ReduceOp.AVG and isinstance(x, int) and not isinstance(x, bool):
        x = float(x)
    tensor, back = _as_comm_tensor(x, "reduce_data", group)
    _check_float_for_avg(tensor, op, "reduce_data")
    link = current_link(group)
    link.reduce(tensor, dst, op, group)
    return back(tensor) if link.rank() == dst else None


def allreduce_with_indicator(grad: torch.Tensor, indicator: Any, group: Any = None) -> torch.Tensor:
    """Average ``grad`` in place over the ranks whose ``indicator`` is 1 (others contribute nothing).

    One collective: the indicator travels in the same buffer as the gradient. With no rank indicating,
    ``grad`` becomes zeros.

    Example:
        >>> g = torch.tensor([2.0, 4.0])
        >>> allreduce_with_indicator(g, 1)
        tensor([2., 4.])
    """
    _check_tensor(grad, "allreduce_with_indicator", group)
    if not grad.is_floating_point():
        raise TypeError(f"allreduce_with_indicator needs a floating-point gradient, got dtype {grad.dtype}")
    packed = torch.empty(grad.numel() + 1, dtype=grad.dtype, device=grad.device)
    if isinstance(indicator, torch.Tensor):  # stays on the device: no host read (0 or 1 is the caller's promise)
        flag = indicator.detach().to(device=grad.device, dtype=grad.dtype).reshape(())
        packed[:-1].copy_(grad.reshape(-1)).mul_(flag)
        packed[-1:].copy_(flag.reshape(1))
    else:
        flag = float(indicator)
        if flag not in (0.0, 1.0):
            raise ValueError(f"indicator must be 0 or 1, got {indicator!r}")
        packed[:-1].copy_(grad.reshape(-1)).mul_(flag)
        packed[-1] = flag
    allreduce(packed, op="sum", group=group)
    count = packed[-1].clamp(min=1.0)
    grad.copy_((packed[:-1] / count).view_as(grad))
    return grad
