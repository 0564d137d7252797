"""Private collective shim for the sync engine, with traffic accounting.

Everything the engine and its algorithms send goes through a :class:`Link`, which counts the
bytes handed to each collective and forwards to :mod:`ding_dist.comm`.
"""

from __future__ import annotations

from typing import Any

import torch

from ding_dist import comm


class Link:
    """A process group plus byte counters; the only door algorithms use to communicate.

    ``bytes_sent`` estimates what this rank puts on the wire for the textbook algorithm of each
    collective (ring allreduce: ``2(W-1)/W`` of the tensor, all-to-all: ``(W-1)/W``, all-gather:
    ``(W-1)`` times the input); ``payload_bytes`` is the plain size of the tensors handed over.

    Example:
        >>> link = Link(group=None)          # the fake link: a world of one
        >>> link.allreduce(torch.ones(2)).wait()
        tensor([1., 1.])
        >>> link.collectives
        1
    """

    __slots__ = ("group", "world_size", "rank", "bytes_sent", "payload_bytes", "collectives")

    def __init__(self, group: Any = None) -> None:
        self.group = group
        self.world_size = comm.get_world_size(group)
        self.rank = comm.get_rank(group)
        self.reset_counters()

    def reset_counters(self) -> None:
        """Zero ``bytes_sent``, ``payload_bytes`` and ``collectives``."""
        self.bytes_sent = 0
        self.payload_bytes = 0
        self.collectives = 0

    def _count(self, nbytes: int, wire_factor: float) -> None:
        self.payload_bytes += nbytes
        self.bytes_sent += int(nbytes * wire_factor)
        self.collectives += 1

    def allreduce(self, tensor: torch.Tensor) -> Any:
        """Start an in-place SUM allreduce of ``tensor``; returns a handle with ``wait()``."""
        w = self.world_size
        self._count(tensor.numel() * tensor.element_size(), 2.0 * (w - 1) / w)
        return comm.allreduce(tensor, op="sum", group=self.group, async_op=True)

    def all_to_all(self, output: torch.Tensor, inp: torch.Tensor) -> Any:
        """Start an all-to-all of equal splits (``inp`` viewed as ``world_size`` rows)."""
        w = self.world_size
        self._count(inp.numel() * inp.element_size(), (w - 1) / w)
        return comm.all_to_all_single(output, inp, group=self.group, async_op=True)

    def allgather(self, output: torch.Tensor, inp: torch.Tensor) -> Any:
        """Start an all-gather of ``inp`` from every rank into the flat ``output`` (rank order)."""
        self._count(inp.numel() * inp.element_size(), float(self.world_size - 1))
        return comm.allgather_into_tensor(output, inp, group=self.group, async_op=True)

    def broadcast(self, tensor: torch.Tensor, src: int = 0) -> None:
        """Broadcast ``tensor`` in place from group rank ``src`` (blocking)."""
        self._count(tensor.numel() * tensor.element_size(), 1.0 if self.rank == src else 0.0)
        comm.broadcast(tensor, src=comm.get_global_rank(self.group, src), group=self.group)

    def broadcast_object(self, obj: Any, src: int = 0) -> Any:
        """Return group rank ``src``'s picklable ``obj`` on every rank (blocking; not counted)."""
        return comm.broadcast_object(obj, src=comm.get_global_rank(self.group, src), group=self.group)

    def allgather_object(self, obj: Any) -> list[Any]:
        """Gather one picklable object from every rank (blocking; not counted)."""
        return comm.allgather_object(obj, group=self.group)
