"""Which device a rank computes on, and which device a collective's tensors must live on.

One place decides both, so the process group, the policies and the pipeline never disagree:

- :func:`rank_cuda_index`: this rank's GPU among the visible ones (``local_rank % device_count``, so
  one visible GPU per task, as with SLURM ``--gpus-per-task=1``, is index 0 on every task).
- :func:`resolve_device`: a config's ``device`` (``"auto"``, ``"cpu"``, ``"cuda"``, ``"cuda:1"``) as a
  ``torch.device``; ``"auto"`` is the rank's GPU when the collectives can carry CUDA tensors without a
  copy (nccl, or a single process), else the CPU.
- :func:`comm_device`: where a tensor handed to a collective must live for the group's backend (nccl:
  the rank's GPU; gloo: the CPU, or the tensor's own device when gloo was created for it too).
- :func:`check_comm_device`: the rule every collective of this package checks before it runs.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from .callers import call_site
from .link import SingleProcessGroup, current_link, is_non_member
from .settings import local_rank as _local_rank

__all__ = [
    "DeviceMismatchError",
    "backend_device_types",
    "check_comm_device",
    "comm_device",
    "computes_on_cuda",
    "cuda_only",
    "rank_cuda_index",
    "resolve_device",
]

_types_cache: dict[int, frozenset[str]] = {}


class DeviceMismatchError(ValueError):
    """A tensor handed to a collective lives on a device the process group's backend cannot move."""


def rank_cuda_index(local_rank: int | None = None) -> int:
    """This rank's CUDA device index: ``local_rank % torch.cuda.device_count()``.

    With every GPU of a node visible it is the local rank; with one visible GPU per task it is 0.

    Example:
        >>> rank_cuda_index(3) if torch.cuda.is_available() else 0   # doctest: +SKIP
        3
    """
    count = torch.cuda.device_count()
    if count == 0:
        raise RuntimeError("no CUDA device is visible to this process (torch.cuda.device_count() is 0)")
    if local_rank is None:  # what get_local_rank() answers
        local_rank = _local_rank(not current_link().is_fake)
    return int(local_rank) % count


def _backend_map(text: str) -> dict[str, str]:
    """``'cpu:gloo,cuda:nccl'`` -> {cpu: gloo, cuda: nccl}; a bare ``'nccl'`` -> {cuda: nccl}; a bare
    ``'gloo'`` -> {cpu: gloo, cuda: gloo}."""
    found: dict[str, str] = {}
    for part in str(text).split(","):
        part = part.strip().lower()
        device, sep, name = part.rpartition(":")
        if sep:
            found[device] = name
        elif part == "nccl":
            found["cuda"] = part
        elif part:
            found.setdefault("cpu", part)
            found.setdefault("cuda", part)
    return found


def computes_on_cuda(backend: str) -> bool:
    """Whether a rank of a world with this backend computes on its GPU when its device is ``"auto"``: CUDA
    tensors go over nccl (``nccl``, ``cpu:gloo,cuda:nccl``), or the backend moves CUDA tensors only (``cuda:gloo``).

    Example:
        >>> computes_on_cuda("cpu:gloo,cuda:nccl"), computes_on_cuda("gloo")
        (True, False)
    """
    by_device = _backend_map(backend)
    return "cuda" in by_device and (by_device["cuda"] == "nccl" or "cpu" not in by_device)


def cuda_only(backend: str) -> bool:
    """Whether the backend moves CUDA tensors only (``nccl``, ``cuda:gloo``): every rank of such a world
    computes on a GPU, so ``dist_init`` makes the rank's GPU its current device.

    Example:
        >>> cuda_only("cuda:gloo"), cuda_only("cpu:gloo,cuda:nccl")
        (True, False)
    """
    return set(_backend_map(backend)) == {"cuda"}


def resolve_device(spec: str | torch.device | None = "auto") -> torch.device:
    """Turn a config's ``device`` into this rank's ``torch.device``.

    ``"auto"`` (or ``None``): the rank's GPU when CUDA is available and there is no process group (one
    process) or the backend carries CUDA tensors over nccl or moves only CUDA tensors (:func:`computes_on_cuda`:
    ``nccl``, ``cpu:gloo,cuda:nccl``, ``cuda:gloo``), else the CPU (plain gloo moves host tensors).
    ``"cuda"``: the rank's GPU (:func:`rank_cuda_index`). ``"cuda:N"``: that GPU. ``"cpu"``: the CPU. A CUDA
    device on a machine without one is a ``ValueError`` naming it.

    Example:
        >>> resolve_device("cpu")
        device(type='cpu')
    """
    if spec is None or spec == "auto":
        link = current_link()
        if torch.cuda.is_available() and (link.is_fake or computes_on_cuda(link.backend())):
            return torch.device("cuda", rank_cuda_index())
        return torch.device("cpu")
    try:
        device = torch.device(spec)
    except (RuntimeError, TypeError) as e:
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got {spec!r}") from e
    if device.type == "cpu":
        return torch.device("cpu")
    if device.type != "cuda":
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got {spec!r}")
    if not torch.cuda.is_available():
        raise ValueError(f"device {spec!r} needs CUDA and this machine has no CUDA device; use 'auto' or 'cpu'")
    if device.index is None:
        return torch.device("cuda", rank_cuda_index())
    if device.index >= torch.cuda.device_count():
        raise ValueError(
            f"device {spec!r}: only {torch.cuda.device_count()} CUDA device(s) are visible (indices 0.."
            f"{torch.cuda.device_count() - 1})"
        )
    return device


def _parse_backend_config(text: str) -> frozenset[str]:
    """``'cpu:gloo,cuda:nccl'`` -> {cpu, cuda}; a bare ``'nccl'`` -> {cuda}; a bare ``'gloo'`` -> {cpu, cuda}."""
    types: set[str] = set()
    for part in str(text).split(","):
        part = part.strip().lower()
        if ":" in part:
            types.add(part.split(":", 1)[0])
        elif part == "nccl":
            types.add("cuda")
        elif part:
            types.update(("cpu", "cuda"))
    return frozenset(types)


def backend_device_types(group: Any = None) -> frozenset[str]:
    """Device types the group's backend moves: ``{'cpu'}`` on the fake link, ``{'cuda'}`` for nccl,
    ``{'cpu', 'cuda'}`` for gloo, as declared by ``backend='cpu:gloo,cuda:nccl'``-style strings.

    Example:
        >>> sorted(backend_device_types())
        ['cpu', 'cuda']
    """
    link = current_link(group)
    if link.is_fake or is_non_member(group):
        return frozenset(("cpu", "cuda"))  # nothing moves: every device is fine
    key = id(group) if group is not None else id(dist.group.WORLD)
    found = _types_cache.get(key)
    if found is None:
        found = _types_cache[key] = _parse_backend_config(dist.get_backend_config(group))
    return found


def comm_device(group: Any = None, like: torch.Tensor | torch.device | None = None) -> torch.device:
    """The device to put a tensor on before handing it to a collective on ``group``.

    ``like``: a tensor or device the data already lives on; it is kept when the backend moves that device
    type (no copy), else the backend's own device is returned (nccl: the rank's GPU; gloo: the CPU).

    Example:
        >>> comm_device()
        device(type='cpu')
    """
    if isinstance(like, torch.Tensor):
        like = like.device
    types = backend_device_types(group)
    if like is not None and like.type in types:
        return like
    if current_link(group).is_fake or is_non_member(group):
        return torch.device("cpu")
    if "cpu" in types:
        return torch.device("cpu")
    # the rank's GPU, where resolve_device puts its networks (not current_device(): GPU 0 unless someone set it)
    return torch.device("cuda", rank_cuda_index()) if torch.cuda.is_available() else torch.device("cuda")


def check_comm_device(tensor: torch.Tensor, group: Any, fn: str) -> None:
    """Raise :class:`DeviceMismatchError` naming the call site when ``tensor``'s device type is one the
    group's backend cannot move (e.g. a host tensor on an nccl group). A dict lookup per call.

    Example:
        >>> check_comm_device(torch.ones(1), None, "allreduce")   # the fake link takes any device
    """
    if group is not None and isinstance(group, SingleProcessGroup):
        return
    types = backend_device_types(group)
    if tensor.device.type not in types:
        backend = dist.get_backend_config(group)
        raise DeviceMismatchError(
            f"{fn} at {call_site()}: tensor on {tensor.device}, but the process group's backend "
            f"{backend!r} moves only {sorted(types)} tensors; create it on ding_dist.comm.comm_device() "
            "(or move it there) before the collective"
        )


def clear_cache() -> None:
    """Forget the device types of groups (called when the process group is destroyed)."""
    _types_cache.clear()
