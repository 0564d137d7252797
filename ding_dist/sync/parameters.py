"""Whole-model operations across ranks, outside the per-bucket path: rank 0's parameters to every rank
(:func:`broadcast_parameters`), the average of every rank's (:func:`allreduce_parameters`) and the check that every
rank wraps the same model and optimizers (:func:`check_same_model`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from ding_dist.sync._primitives import MeteredLink
from ding_dist.sync.optimizer_state import optimizer_signature

__all__ = ["allreduce_parameters", "broadcast_coalesced", "broadcast_parameters", "check_same_model"]


def _coalesced(tensors: Sequence[torch.Tensor]) -> dict[tuple[Any, Any], list[torch.Tensor]]:
    groups: dict[tuple[Any, Any], list[torch.Tensor]] = {}
    for t in tensors:
        groups.setdefault((t.device, t.dtype), []).append(t)
    return groups


def broadcast_parameters(module: nn.Module, broadcast_buffers: bool = True, link: MeteredLink | None = None) -> None:
    """Copy rank 0's parameters (and buffers) to every rank, one collective per dtype.

    Example:
        >>> broadcast_parameters(nn.Linear(2, 2))  # no-op on the fake link
    """
    link = link or MeteredLink()
    if link.world_size == 1:
        return
    tensors = [p.data for p in module.parameters()]
    if broadcast_buffers:
        tensors += list(module.buffers())
    broadcast_coalesced(tensors, link)


def broadcast_coalesced(tensors: Sequence[torch.Tensor], link: MeteredLink) -> None:
    """Broadcast rank 0's ``tensors`` in place, one collective per (device, dtype).

    Example:
        >>> broadcast_coalesced([torch.zeros(2)], MeteredLink())  # no-op on the fake link
    """
    if link.world_size == 1:
        return
    for group in _coalesced(tensors).values():
        flat = torch.cat([t.detach().reshape(-1) for t in group])
        link.broadcast(flat, src=0)
        _copy_back(flat, group)


def _copy_back(flat: torch.Tensor, tensors: Sequence[torch.Tensor]) -> None:
    """Copy consecutive slices of ``flat`` into ``tensors`` (the inverse of flattening them)."""
    offset = 0
    with torch.no_grad():
        for t in tensors:
            n = t.numel()
            t.copy_(flat[offset : offset + n].view_as(t))
            offset += n


def allreduce_parameters(module: nn.Module, link: MeteredLink | None = None) -> None:
    """Average parameters and floating-point buffers across ranks (other buffers: rank 0's).

    Example:
        >>> allreduce_parameters(nn.Linear(2, 2))  # no-op on the fake link
    """
    link = link or MeteredLink()
    if link.world_size == 1:
        return
    floats = [p.data for p in module.parameters()] + [b for b in module.buffers() if b.is_floating_point()]
    for group in _coalesced(floats).values():
        flat = torch.cat([t.detach().reshape(-1) for t in group])
        link.allreduce(flat).wait()
        flat.div_(link.world_size)
        _copy_back(flat, group)
    others = [b for b in module.buffers() if not b.is_floating_point()]
    if others:
        broadcast_coalesced(others, link)


def check_same_model(module: nn.Module, link: MeteredLink, optimizers: Sequence[Any] = ()) -> None:
    """Raise ``ValueError`` on every rank if parameter names, shapes or dtypes, or the optimizers'
    types and param-group sizes, differ across ranks (one ``allgather_object``).

    Example:
        >>> check_same_model(nn.Linear(2, 2), MeteredLink())  # one rank: nothing to compare
    """
    signature = [(name, tuple(p.shape), str(p.dtype)) for name, p in module.named_parameters()]
    everyone = link.allgather_object((signature, optimizer_signature(list(optimizers))))
    _check_same_params([sig for sig, _ in everyone])
    _check_same_optimizers([opts for _, opts in everyone])


def _check_same_optimizers(everyone: list[Any]) -> None:
    for rank, sig in enumerate(everyone[1:], start=1):
        if sig != everyone[0]:
            raise ValueError(
                f"optimizers differ across ranks: rank 0 has {everyone[0]}, rank {rank} has {sig} "
                "(type and param-group sizes of each optimizer passed to distribute)"
            )


def _check_same_params(everyone: list[Any]) -> None:
    reference = everyone[0]
    for rank, sig in enumerate(everyone[1:], start=1):
        if sig == reference:
            continue
        for i, (a, b) in enumerate(zip(reference, sig)):
            if a != b:
                raise ValueError(
                    f"model differs across ranks at parameter #{i}: rank 0 has {a[0]!r} shape {a[1]} "
                    f"{a[2]}, rank {rank} has {b[0]!r} shape {b[1]} {b[2]}"
                )
        longer, which = (reference, 0) if len(reference) > len(sig) else (sig, rank)
        extra = longer[min(len(reference), len(sig))]
        raise ValueError(
            f"model differs across ranks: rank 0 has {len(reference)} parameters, rank {rank} has {len(sig)} "
            f"(first unmatched: {extra[0]!r} shape {extra[1]} on rank {which})"
        )
