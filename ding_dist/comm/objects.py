"""Collectives on arbitrary picklable Python values (small objects: counters, dicts, flags).

Built on torch.distributed's object collectives. Each value is pickled by us first, so a value that
cannot be pickled raises a clear ``TypeError`` on every rank instead of leaving the others waiting.
Reductions run in rank order, so every rank computes the identical result.
"""

from __future__ import annotations

import functools
import operator
import pickle
from collections.abc import Callable
from typing import Any

import torch

from .collectives import _check_src, allgather
from .devices import comm_device
from .link import current_link


class _PickleFailure:
    """Travels in place of a value its rank could not pickle."""

    def __init__(self, type_name: str, error: str) -> None:
        self.type_name, self.error = type_name, error


def _dumps(obj: Any) -> bytes:
    try:
        return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:  # pickling can raise nearly anything (TypeError, AttributeError, ...)
        return pickle.dumps(_PickleFailure(type(obj).__name__, f"{type(exc).__name__}: {exc}"))


def _loads(payload: bytes, rank: int, fn: str) -> Any:
    try:
        value = pickle.loads(payload)
    except Exception as exc:  # e.g. the value's class differs between ranks, or its __reduce__ fails on load
        raise TypeError(f"{fn}: rank {rank}'s value could not be unpickled here ({type(exc).__name__}: {exc})") from exc
    if isinstance(value, _PickleFailure):
        raise TypeError(f"{fn}: rank {rank} could not pickle its value of type {value.type_name} ({value.error})")
    return value


def broadcast_object_list(objs: list, src: int = 0, group: Any = None) -> list:
    """Replace ``objs`` (same length on every rank) in place with rank ``src``'s list, and return it.

    Example:
        >>> broadcast_object_list([{"lr": 0.1}, "cfg"])
        [{'lr': 0.1}, 'cfg']
    """
    if not isinstance(objs, list):
        raise TypeError(f"broadcast_object_list expects a list, got {type(objs).__name__}")
    _check_src(src, "src", "broadcast_object_list")
    link = current_link(group)
    if link.is_fake:
        for obj in objs:  # fail on an unpicklable value here too, as a real run would
            _loads(_dumps(obj), 0, "broadcast_object_list")
        return objs
    payloads = [_dumps(o) for o in objs] if link.rank() == src else [None] * len(objs)
    link.broadcast_object_list(payloads, src, group, comm_device(group))
    objs[:] = [_loads(p, src, "broadcast_object_list") for p in payloads]
    return objs


def broadcast_object(obj: Any, src: int = 0, group: Any = None) -> Any:
    """Return rank ``src``'s ``obj`` on every rank (the argument is ignored elsewhere).

    Example:
        >>> broadcast_object({"stop": False})
        {'stop': False}
    """
    return broadcast_object_list([obj], src=src, group=group)[0]


def allgather_object(obj: Any, group: Any = None) -> list:
    """Gather every rank's ``obj`` into a list ordered by rank.

    Example:
        >>> allgather_object("x")
        ['x']
    """
    link = current_link(group)
    payload = _dumps(obj)
    if link.is_fake:
        return [_loads(payload, 0, "allgather_object")]
    gathered: list = [None] * link.world_size(group)
    link.all_gather_object(gathered, payload, group)
    return [_loads(p, rank, "allgather_object") for rank, p in enumerate(gathered)]


def _check_reduce_fn(reduce_fn: Any) -> None:
    if not callable(reduce_fn):
        raise TypeError(f"reduce_fn must be a callable of two values, got {reduce_fn!r}")


def allreduce_object(value: Any, reduce_fn: Callable[[Any, Any], Any] = operator.add, group: Any = None) -> Any:
    """Reduce a Python value across ranks with ``reduce_fn``, in rank order; all ranks get the same result.

    Example:
        >>> allreduce_object({"a": 1}, reduce_fn=lambda x, y: {k: x[k] + y[k] for k in x})
        {'a': 1}
    """
    _check_reduce_fn(reduce_fn)
    return functools.reduce(reduce_fn, allgather_object(value, group=group))


class ObjectFuture:
    """Result of ``allreduce_object_async``: ``result()`` waits for the transfer and reduces.

    Example:
        >>> allreduce_object_async(5).result()
        5
    """

    __slots__ = ("_handle", "_buffers", "_sizes", "_reduce_fn", "_value", "_done")

    def __init__(self, handle: Any, buffers: list, sizes: list[int], reduce_fn: Callable, value: Any = None):
        self._handle, self._buffers, self._sizes, self._reduce_fn = handle, buffers, sizes, reduce_fn
        self._value, self._done = value, handle is None

    def done(self) -> bool:
        """True when ``result()`` will not block."""
        return self._done or self._handle.is_completed()

    def result(self, timeout: float | None = None) -> Any:
        """Wait for every rank's value and return the reduction (the same on every rank)."""
        if not self._done:
            self._handle.wait(timeout)
            values = [
                _loads(buf[:size].cpu().numpy().tobytes(), rank, "allreduce_object_async")
                for rank, (buf, size) in enumerate(zip(self._buffers, self._sizes))
            ]
            self._value = functools.reduce(self._reduce_fn, values)
            self._buffers, self._done = [], True
        return self._value


def allreduce_object_async(
    value: Any, reduce_fn: Callable[[Any, Any], Any] = operator.add, group: Any = None
) -> ObjectFuture:
    """Start reducing a Python value across ranks; returns a future whose ``result()`` gives the value.

    The payload travels asynchronously; only the (tiny) size exchange blocks.

    Example:
        >>> future = allreduce_object_async([1], reduce_fn=operator.add)
        >>> future.result()
        [1]
    """
    _check_reduce_fn(reduce_fn)
    link = current_link(group)
    payload = _dumps(value)
    if link.is_fake:
        return ObjectFuture(None, [], [], reduce_fn, _loads(payload, 0, "allreduce_object_async"))
    device = comm_device(group)
    size = torch.tensor([len(payload)], dtype=torch.int64, device=device)
    sizes = [int(s.item()) for s in allgather(size, group=group)]
    longest = max(sizes)
    mine = torch.zeros(longest, dtype=torch.uint8, device=device)
    mine[: len(payload)] = torch.frombuffer(bytearray(payload), dtype=torch.uint8).to(device)
    buffers = [torch.empty(longest, dtype=torch.uint8, device=device) for _ in sizes]
    handle = link.allgather(buffers, mine, group, True)
    return ObjectFuture(handle, buffers, sizes, reduce_fn)
