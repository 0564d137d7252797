"""Catch distributed bugs early: mismatched collectives, ranks out of sync, dead ranks.

- Debug mode (``DING_DIST_DEBUG=1`` or ``set_debug(True)``): before every collective, the ranks compare
  what they are about to do (operation, shape, dtype, call site) and raise a clear error naming the ranks
  and their call sites instead of hanging or producing wrong data. It costs one small extra collective
  per call: use it to find a bug, not in production.
- ``check_consistency(model)``: compares parameter checksums across ranks, names the first that differs.
- ``health_check(timeout)``: gloo's monitored barrier on a side group; names the ranks that did not come.
"""

from __future__ import annotations

import re
import time
import zlib
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from . import link as _link
from .callers import call_site
from .init import on_finalize
from .settings import DEBUG_ENV, env_value


class CollectiveMismatchError(RuntimeError):
    """Ranks called different collectives (or the same one with different shapes/dtypes/call sites)."""


class DesyncError(RuntimeError):
    """Ranks hold different values for a tensor that must be identical everywhere."""


class DeadRankError(RuntimeError):
    """One or more ranks did not reach a health check within its timeout."""

    def __init__(self, message: str, ranks: list[int]) -> None:
        super().__init__(message)
        self.ranks = ranks

    def __reduce__(self) -> tuple:  # pickles whole (e.g. from a rank of ``launch`` to its caller)
        return type(self), (str(self), self.ranks)


def _describe(sig: tuple) -> str:
    name, shape, dtype, extra, site = sig
    what = f"{name}({', '.join(x for x in (shape, dtype, extra) if x)})"
    return f"{what} at {site}"


def _check(name: str, tensor: torch.Tensor | None = None, group: Any = None, extra: str = "") -> None:
    """Compare this collective's signature with every rank's; raise on any difference."""
    sig = (
        name,
        "" if tensor is None else f"shape={tuple(tensor.shape)}",
        "" if tensor is None else str(tensor.dtype).replace("torch.", ""),
        extra,
        call_site(),
    )
    sigs: list = [None] * dist.get_world_size(group)
    dist.all_gather_object(sigs, sig, group=group)
    if any(s != sigs[0] for s in sigs):
        ranks = dist.get_process_group_ranks(group) if group is not None else list(range(len(sigs)))
        lines = [f"  rank {rank}: {_describe(s)}" for rank, s in zip(ranks, sigs)]
        raise CollectiveMismatchError("ranks called mismatched collectives:\n" + "\n".join(lines))


class DebugLink(_link.TorchLink):
    """The torch link with a signature check before every collective."""

    def allreduce(self, tensor, op, group, async_op):
        _check("allreduce", tensor, group, f"op={str(op).split('.')[-1]}")
        return super().allreduce(tensor, op, group, async_op)

    def broadcast(self, tensor, src, group, async_op):
        _check("broadcast", tensor, group, f"src={src}")
        return super().broadcast(tensor, src, group, async_op)

    def reduce(self, tensor, dst, op, group):
        _check("reduce", tensor, group, f"dst={dst}")
        return super().reduce(tensor, dst, op, group)

    def allgather(self, outputs, tensor, group, async_op):
        _check("allgather", tensor, group)
        return super().allgather(outputs, tensor, group, async_op)

    def all_to_all_single(self, output, input, group, async_op):
        _check("all_to_all_single", input, group)
        return super().all_to_all_single(output, input, group, async_op)

    def allgather_into_tensor(self, output, input, group, async_op):
        _check("allgather_into_tensor", input, group)
        return super().allgather_into_tensor(output, input, group, async_op)

    def barrier(self, group):
        _check("barrier", None, group)
        return super().barrier(group)

    def broadcast_object_list(self, objs, src, group, device):
        _check("broadcast_object_list", None, group, f"src={src}, n={len(objs)}")
        return super().broadcast_object_list(objs, src, group, device)

    def all_gather_object(self, outputs, obj, group):
        _check("allgather_object", None, group)
        return super().all_gather_object(outputs, obj, group)


def _debug_from_env() -> bool:
    try:
        return bool(env_value(DEBUG_ENV))
    except ValueError:  # a bad value is reported in one line by dist_init and ding-dist (check_env_values)
        return False


DEBUG_LINK = DebugLink()
if _debug_from_env():
    _link.set_torch_link(DEBUG_LINK)


def set_debug(enabled: bool) -> None:
    """Turn the collective-mismatch check on or off (all ranks must agree).

    Example:
        >>> set_debug(True); debug_enabled()
        True
        >>> set_debug(False)
    """
    _link.set_torch_link(DEBUG_LINK if enabled else _link.TORCH_LINK)


def debug_enabled() -> bool:
    """True when collectives are checked before they run.

    Example:
        >>> isinstance(debug_enabled(), bool)
        True
    """
    return _link.get_torch_link() is DEBUG_LINK


def _tensors(source: Any) -> list[tuple[str, torch.Tensor]]:
    if isinstance(source, torch.nn.Module):
        return list(source.state_dict(keep_vars=False).items())
    if isinstance(source, dict):
        return list(source.items())
    if isinstance(source, Iterable):
        items = list(source)
        if all(isinstance(x, torch.Tensor) for x in items):
            return [(str(i), t) for i, t in enumerate(items)]
        return items
    raise TypeError(f"check_consistency expects a Module, a dict of tensors or tensors, got {type(source).__name__}")


def check_consistency(source: Any, group: Any = None) -> None:
    """Raise ``DesyncError`` naming the first tensor whose bytes differ across ranks (one collective).

    ``source`` is a module (its state_dict: parameters and buffers), a dict of tensors or an iterable of
    tensors or ``(name, tensor)`` pairs. On the fake link it only validates its input.

    Example:
        >>> check_consistency(torch.nn.Linear(2, 2))   # ranks agree: returns None
    """
    fingerprints = []
    for name, tensor in _tensors(source):
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"check_consistency: {name!r} is a {type(tensor).__name__}, not a tensor")
        data = tensor.detach().cpu().contiguous()
        raw = data.view(torch.uint8) if data.numel() else data
        fingerprints.append((name, tuple(data.shape), str(data.dtype), zlib.crc32(raw.numpy().tobytes())))
    current = _link.current_link()
    if current.is_fake:
        return
    everyone: list = [None] * current.world_size(group)
    dist.all_gather_object(everyone, fingerprints, group=group)
    ranks = dist.get_process_group_ranks(group) if group is not None else list(range(len(everyone)))
    for index, mine in enumerate(everyone[0]):
        for rank, theirs in zip(ranks[1:], everyone[1:]):
            other = theirs[index] if index < len(theirs) else None
            if other != mine:
                raise DesyncError(
                    f"ranks are out of sync at {mine[0]!r}: rank {ranks[0]} has shape {mine[1]} {mine[2]} "
                    f"checksum {mine[3]:08x}, rank {rank} has "
                    + (
                        "nothing"
                        if other is None
                        else f"{other[0]!r} shape {other[1]} {other[2]} checksum {other[3]:08x}"
                    )
                )
    if any(len(theirs) != len(everyone[0]) for theirs in everyone):
        raise DesyncError(f"ranks hold different numbers of tensors: {[len(x) for x in everyone]}")


_side_groups: dict[Any, Any] = {}
on_finalize(_side_groups.clear)


def side_group(group: Any = None) -> Any:
    """The gloo group of ``group``'s ranks (the world by default) for small host-side agreements (health checks,
    stop requests), apart from the group's own traffic. Created on the first call, which every member makes at the
    same point (the loops' first health check); None on the fake link.

    Example:
        >>> side_group() is None   # on the fake link
        True
    """
    if _link.current_link().is_fake:
        return None
    if group not in _side_groups:
        ranks = None if group is None else dist.get_process_group_ranks(group)
        # A subgroup's side group needs only its members (e.g. the learners of an actor-learner run).
        _side_groups[group] = dist.new_group(ranks=ranks, backend="gloo", use_local_synchronization=ranks is not None)
    return _side_groups[group]


def health_check(timeout: float = 30.0, group: Any = None) -> None:
    """Wait for every rank (gloo monitored barrier on a side group); name the ranks that did not come.

    All ranks call it at the same points (e.g. before each checkpoint). The side group is created on the
    first call. Raises ``DeadRankError`` with ``.ranks`` after ``timeout`` seconds. No-op on the fake link.

    Example:
        >>> health_check(timeout=10)   # on the fake link: returns at once
    """
    if not timeout > 0:
        raise ValueError(f"timeout must be positive seconds, got {timeout}")
    if _link.current_link().is_fake:
        return
    side = side_group(group)
    start = time.monotonic()
    try:
        dist.monitored_barrier(group=side, timeout=timedelta(seconds=timeout), wait_all_ranks=True)
    except RuntimeError as exc:
        text = str(exc)
        found = re.search(r"[Rr]anks? ([\d, ]+) failed", text)
        missing = [int(x) for x in re.findall(r"\d+", found.group(1))] if found else []
        waited_out = time.monotonic() - start >= 0.9 * timeout
        two_ranks = dist.get_world_size(side) == 2
        if not missing and dist.get_rank() != 0 and two_ranks:
            missing = [0]  # in a pair, the only rank another one waits for is rank 0
        if missing:
            what = f"rank(s) {missing} did not reach the health check within {timeout:g} s (dead or stuck)"
        elif waited_out:  # rank 0 runs the barrier and answers only when every rank came
            what = (
                f"rank 0 did not confirm the health check within {timeout:g} s: rank 0, or a rank it waits for, "
                "is dead or stuck (rank 0's error names it)"
            )
        else:  # failed at once: a peer closed its connection
            what = "a peer closed its connection during the health check: a rank died (rank 0's error names it)"
        raise DeadRankError(f"{what}: {text}", missing) from exc
