"""Subgroups of consecutive ranks, created once and cached."""

from __future__ import annotations

from typing import Any

import torch.distributed as dist

from .init import on_finalize
from .link import SINGLE_PROCESS_GROUP, current_link, is_non_member, lacks_host_backend, register_host_group

_groups: dict[int, Any] = {}
on_finalize(_groups.clear)


def get_group(group_size: int) -> Any:
    """This rank's group among the consecutive groups of ``group_size`` ranks.

    Every rank must call it with the same size (all groups are created on all ranks, in the same order);
    the groups are cached, so later calls cost nothing. On the fake link it returns a group of one.

    Example:
        >>> group = get_group(1)
        >>> group.size()
        1
    """
    link = current_link()
    world_size = link.world_size()
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1:
        raise ValueError(f"group_size must be a positive int, got {group_size!r}")
    if world_size % group_size:
        raise ValueError(f"group_size {group_size} does not divide the world size {world_size}")
    if link.is_fake:
        return SINGLE_PROCESS_GROUP
    if group_size not in _groups:
        if group_size == world_size:
            _groups[group_size] = dist.group.WORLD
        else:
            rank = link.rank()
            mine = None
            for start in range(0, world_size, group_size):
                group = make_group(list(range(start, start + group_size)))
                if start <= rank < start + group_size:
                    mine = group
            _groups[group_size] = mine
    return _groups[group_size]


def new_group(ranks: list[int], backend: str | None = None) -> Any:
    """A process group of the global ``ranks`` (``torch.distributed.new_group``; every rank of the world calls
    it, with the same arguments in the same order). A rank outside ``ranks`` gets the non-member placeholder,
    with which every helper is a no-op. ``backend``: e.g. ``"gloo"`` for a CPU-only group (default: the
    world's). On the fake link (a world of one) it returns the group of one.

    Example:
        >>> new_group([0]).size()
        1
    """
    link = current_link()
    world_size = link.world_size()
    ranks = sorted(int(r) for r in ranks)
    if not ranks or len(set(ranks)) != len(ranks) or ranks[0] < 0 or ranks[-1] >= world_size:
        raise ValueError(f"ranks must be distinct ranks of the world of {world_size}, got {ranks}")
    if link.is_fake:
        return SINGLE_PROCESS_GROUP
    return make_group(ranks, backend)


def make_group(ranks: list[int] | None = None, backend: str | None = None) -> Any:
    """``torch.distributed.new_group(ranks, backend=backend)`` (every rank of the world calls it), and, when the
    group would move CUDA tensors over gloo with no host backend (``cuda:gloo``), a gloo twin of the same ranks
    for its host-staged point-to-point (gloo's send/recv read host memory only).

    Example::

        group = make_group([0, 1])  # under DING_DIST_BACKEND=cuda:gloo: isend/irecv of CUDA tensors work on it
    """
    group = dist.new_group(ranks, backend=backend)
    if lacks_host_backend(backend if backend is not None else dist.get_backend_config()):  # the same on every rank
        host = dist.new_group(ranks, backend="gloo")
        if not is_non_member(group):
            register_host_group(group, host)
    return group


def simple_group_split(world_size: int, rank: int, num_groups: int) -> Any:
    """Split ``world_size`` ranks into ``num_groups`` consecutive groups and return ``rank``'s group.

    Example:
        >>> simple_group_split(world_size=1, rank=0, num_groups=1).size()
        1
    """
    actual = current_link().world_size()
    if world_size != actual:
        raise ValueError(f"world_size {world_size} differs from the running world size {actual}")
    if not 0 <= rank < world_size:
        raise ValueError(f"rank must be in [0, {world_size - 1}], got {rank}")
    if isinstance(num_groups, bool) or not isinstance(num_groups, int) or num_groups < 1:
        raise ValueError(f"num_groups must be a positive int, got {num_groups!r}")
    if world_size % num_groups:
        raise ValueError(f"num_groups {num_groups} does not divide the world size {world_size}")
    if rank != current_link().rank():
        raise ValueError(f"rank {rank} is not this process's rank {current_link().rank()}")
    return get_group(world_size // num_groups)
