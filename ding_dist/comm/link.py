"""The one place that decides between a real process group and the fake link.

Every public helper validates its arguments and then calls ``current_link()``: a ``TorchLink`` over
torch.distributed when a process group is initialized, else the ``FAKE_LINK``, a world of one where
each collective leaves the data as it is. No helper branches on "am I distributed?" itself.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

# torch >= 2.13 names it all_gather_single (all_gather_into_tensor is deprecated there)
_ALL_GATHER_SINGLE = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor


class CommHandle:
    """Handle of a communication in flight: ``wait()`` completes it and returns its tensor.

    ``work`` is what torch returned for an asynchronous collective or point-to-point transfer, a list of
    such works (or of handles) completed together, in order, or ``None`` when nothing is in flight (a
    world of one). Post-processing (the division of an ``'avg'`` allreduce, the copy of a host-staged
    receive) runs inside ``wait()``, never before.

    Example:
        >>> t = torch.ones(3)
        >>> handle = allreduce(t, op="avg", async_op=True)   # doctest: +SKIP
        >>> handle.wait()                                    # doctest: +SKIP
        tensor([1., 1., 1.])
        >>> CommHandle([CommHandle(None, t)], t).wait()
        tensor([1., 1., 1.])
    """

    __slots__ = ("_works", "_finish", "_tensor", "_done")

    def __init__(self, work: Any, tensor: Any = None, finish: Callable[[], None] | None = None) -> None:
        self._works = tuple(work) if isinstance(work, (list, tuple)) else () if work is None else (work,)
        self._tensor = tensor
        self._finish = finish
        self._done = not self._works and finish is None

    @property
    def works(self) -> tuple[Any, ...]:
        """The transfers this handle completes, in order (empty when nothing is in flight)."""
        return self._works

    def wait(self, timeout: float | None = None) -> Any:
        """Block until the communication is complete (each work waits up to ``timeout`` seconds); return its
        (in-place) result."""
        if not self._done:
            for work in self._works:
                if timeout is None:
                    work.wait()
                elif isinstance(work, CommHandle):
                    work.wait(timeout)
                else:
                    work.wait(timedelta(seconds=timeout))
            if self._finish is not None:
                self._finish()
            self._done = True
        return self._tensor

    def is_completed(self) -> bool:
        """True once ``wait()`` has run (or the transfers finished and nothing is left to do)."""
        return self._done or (self._finish is None and bool(self._works) and all(w.is_completed() for w in self._works))


class SingleProcessGroup:
    """The group of the fake link: this process alone (rank 0 of 1)."""

    def size(self) -> int:
        return 1

    def rank(self) -> int:
        return 0

    def __repr__(self) -> str:
        return "SingleProcessGroup()"


SINGLE_PROCESS_GROUP = SingleProcessGroup()


class FakeLink:
    """A world of one: every collective is a correct no-op."""

    is_fake = True

    def rank(self, group: Any = None) -> int:
        return 0

    def world_size(self, group: Any = None) -> int:
        return 1

    def backend(self, group: Any = None) -> str:
        return "fake"

    def allreduce(self, tensor: torch.Tensor, op: Any, group: Any, async_op: bool) -> CommHandle | None:
        return CommHandle(None, tensor) if async_op else None

    def broadcast(self, tensor: torch.Tensor, src: int, group: Any, async_op: bool) -> CommHandle | None:
        return CommHandle(None, tensor) if async_op else None

    def reduce(self, tensor: torch.Tensor, dst: int, op: Any, group: Any) -> None:
        return None

    def allgather(self, outputs: list[torch.Tensor], tensor: torch.Tensor, group: Any, async_op: bool):
        outputs[0].copy_(tensor)
        return CommHandle(None, outputs) if async_op else None

    def all_to_all_single(self, output: torch.Tensor, input: torch.Tensor, group: Any, async_op: bool):
        output.copy_(input)
        return CommHandle(None, output) if async_op else None

    def allgather_into_tensor(self, output: torch.Tensor, input: torch.Tensor, group: Any, async_op: bool):
        output.copy_(input.reshape(output.shape))
        return CommHandle(None, output) if async_op else None

    def global_rank(self, group: Any, group_rank: int) -> int:
        return group_rank

    def barrier(self, group: Any) -> None:
        return None

    def broadcast_object_list(self, objs: list, src: int, group: Any, device: torch.device) -> None:
        return None

    def all_gather_object(self, outputs: list, obj: Any, group: Any) -> None:
        outputs[0] = obj

    def p2p(self, kind: str, tensor: torch.Tensor, peer: int, group: Any):
        raise RuntimeError(f"{kind}(peer={peer}): there is no peer on the fake link (a world of one process)")


class TorchLink:
    """Collectives over an initialized torch.distributed process group."""

    is_fake = False

    def rank(self, group: Any = None) -> int:
        return dist.get_rank(group)

    def world_size(self, group: Any = None) -> int:
        return dist.get_world_size(group)

    def backend(self, group: Any = None) -> str:
        return str(dist.get_backend(group))

    def allreduce(self, tensor: torch.Tensor, op: Any, group: Any, async_op: bool) -> CommHandle | None:
        finish = None
        if op is dist.ReduceOp.AVG and self.backend(group) != "nccl":  # gloo has no AVG: sum, then divide
            size = self.world_size(group)
            op = dist.ReduceOp.SUM

            def finish() -> None:
                tensor.div_(size)

        work = dist.all_reduce(tensor, op=op, group=group, async_op=async_op)
        if async_op:
            return CommHandle(work, tensor, finish)
        if finish is not None:
            finish()
        return None

    def broadcast(self, tensor: torch.Tensor, src: int, group: Any, async_op: bool) -> CommHandle | None:
        work = dist.broadcast(tensor, src=src, group=group, async_op=async_op)
        return CommHandle(work, tensor) if async_op else None

    def reduce(self, tensor: torch.Tensor, dst: int, op: Any, group: Any) -> None:
        avg = op is dist.ReduceOp.AVG
        dist.reduce(tensor, dst=dst, op=dist.ReduceOp.SUM if avg else op, group=group)
        if avg and self.rank() == dst:
            tensor.div_(self.world_size(group))

    def allgather(self, outputs: list[torch.Tensor], tensor: torch.Tensor, group: Any, async_op: bool):
        work = dist.all_gather(outputs, tensor, group=group, async_op=async_op)
        return CommHandle(work, outputs) if async_op else None

    def all_to_all_single(self, output: torch.Tensor, input: torch.Tensor, group: Any, async_op: bool):
        work = dist.all_to_all_single(output, input, group=group, async_op=async_op)
        return CommHandle(work, output) if async_op else None

    def allgather_into_tensor(self, output: torch.Tensor, input: torch.Tensor, group: Any, async_op: bool):
        work = _ALL_GATHER_SINGLE(output, input, group=group, async_op=async_op)
        return CommHandle(work, output) if async_op else None

    def global_rank(self, group: Any, group_rank: int) -> int:
        return group_rank if group is None else dist.get_global_rank(group, group_rank)

    def barrier(self, group: Any) -> None:
        dist.barrier(group=group)

    def broadcast_object_list(self, objs: list, src: int, group: Any, device: torch.device) -> None:
        """``device``: where the pickled bytes travel (:func:`~ding_dist.comm.devices.comm_device`)."""
        dist.broadcast_object_list(objs, src=src, group=group, device=device if device.type == "cuda" else None)

    def all_gather_object(self, outputs: list, obj: Any, group: Any) -> None:
        dist.all_gather_object(outputs, obj, group=group)

    def p2p(self, kind: str, tensor: torch.Tensor, peer: int, group: Any):
        if tensor.device.type == "cuda" and _gloo_moves_cuda(group):
            return _host_staged_p2p(kind, tensor, peer, group)
        if kind == "send":
            return dist.send(tensor, dst=peer, group=group)
        if kind == "recv":
            return dist.recv(tensor, src=peer, group=group)
        if kind == "isend":
            return CommHandle(dist.isend(tensor, dst=peer, group=group), tensor)
        return CommHandle(dist.irecv(tensor, src=peer, group=group), tensor)


def cuda_backend_of(config: str) -> str | None:
    """The backend that moves CUDA tensors in a torch backend config, None when none does.

    Example:
        >>> cuda_backend_of("cpu:gloo,cuda:nccl"), cuda_backend_of("cuda:gloo"), cuda_backend_of("gloo")
        ('nccl', 'gloo', 'gloo')
    """
    for part in str(config).lower().split(","):
        device, sep, name = part.strip().partition(":")
        if sep and device == "cuda":
            return name.strip()
        if not sep and device in ("gloo", "nccl"):  # a bare name: gloo moves every device, nccl CUDA only
            return device
    return None


def lacks_host_backend(config: str) -> bool:
    """Whether a backend config moves CUDA tensors over gloo but has no backend for host tensors (``cuda:gloo``):
    host-staged point-to-point then needs a gloo group of the same ranks (:func:`register_host_group`).

    Example:
        >>> lacks_host_backend("cuda:gloo"), lacks_host_backend("gloo"), lacks_host_backend("cpu:gloo,cuda:gloo")
        (True, False, False)
    """
    parts = [part.strip().partition(":") for part in str(config).lower().split(",")]
    return cuda_backend_of(config) == "gloo" and all(sep and device != "cpu" for device, sep, _ in parts)


#: The host (gloo) twin of each group whose backend moves CUDA tensors only over gloo; ``None``: the world's.
_HOST_GROUPS: dict[Any, Any] = {}


def register_host_group(group: Any, host: Any) -> None:
    """Make ``host`` (a gloo group of the same ranks) the group that carries ``group``'s host-staged
    point-to-point; ``group`` None is the world. :func:`~ding_dist.comm.dist_finalize` forgets them."""
    _HOST_GROUPS[None if group is None or group is dist.group.WORLD else group] = host


def clear_host_groups() -> None:
    _HOST_GROUPS.clear()


def _host_group(group: Any) -> Any:
    """The group a host copy of a CUDA tensor travels on: ``group`` itself when it has a host backend, else its
    registered gloo twin (a ``cuda:gloo`` group has none of its own: torch refuses host tensors on it)."""
    key = None if group is None or group is dist.group.WORLD else group
    if key in _HOST_GROUPS:
        return _HOST_GROUPS[key]
    if lacks_host_backend(dist.get_backend_config(group)):
        raise RuntimeError(
            "point-to-point of a CUDA tensor over a cuda:gloo group goes through a host copy, and this group has no "
            "gloo twin for it: make the group with ding_dist.comm.new_group (which adds one), not torch's new_group"
        )
    return group


def _gloo_moves_cuda(group: Any) -> bool:
    return cuda_backend_of(dist.get_backend_config(group)) == "gloo"  # asked for CUDA tensors only: no cache


def _host_staged_p2p(kind: str, tensor: torch.Tensor, peer: int, group: Any) -> CommHandle | None:
    """Point-to-point of a CUDA tensor over gloo, through a host copy.

    gloo's send and recv hand the tensor's address to the TCP transport as host memory (it has CUDA forms
    of its collectives, not of send/recv), so a CUDA tensor is copied to the host first (send) or received
    into a host buffer and copied to the device in ``wait()`` (recv). The handle's tensor is the caller's. On a
    ``cuda:gloo`` group (no host backend) the copy travels on the group's gloo twin (:func:`register_host_group`).
    """
    group = _host_group(group)
    if kind in ("send", "isend"):
        host = tensor.detach().to("cpu", copy=True)  # the data as of this call (a CUDA tensor is copied anyway)
        if kind == "send":
            dist.send(host, dst=peer, group=group)
            return None
        return CommHandle(dist.isend(host, dst=peer, group=group), tensor)  # the work keeps ``host`` alive
    host = torch.empty(tensor.shape, dtype=tensor.dtype)
    if kind == "recv":
        dist.recv(host, src=peer, group=group)
        tensor.copy_(host)
        return None
    return CommHandle(dist.irecv(host, src=peer, group=group), tensor, finish=lambda: tensor.copy_(host))


class NonMemberLink(FakeLink):
    """A group this rank is not a member of (``new_group`` returned ``NON_GROUP_MEMBER``): as in
    torch.distributed, rank and size are -1 and every collective is a no-op that leaves the data alone."""

    is_fake = False

    def rank(self, group: Any = None) -> int:
        return -1

    def world_size(self, group: Any = None) -> int:
        return -1

    def backend(self, group: Any = None) -> str:
        return "non-member"

    def allgather(self, outputs: list[torch.Tensor], tensor: torch.Tensor, group: Any, async_op: bool):
        return CommHandle(None, outputs) if async_op else None

    def all_to_all_single(self, output: torch.Tensor, input: torch.Tensor, group: Any, async_op: bool):
        return CommHandle(None, output) if async_op else None

    def allgather_into_tensor(self, output: torch.Tensor, input: torch.Tensor, group: Any, async_op: bool):
        return CommHandle(None, output) if async_op else None

    def global_rank(self, group: Any, group_rank: int) -> int:
        raise ValueError("this rank is not a member of the group: it has no ranks to translate")

    def all_gather_object(self, outputs: list, obj: Any, group: Any) -> None:
        return None

    def p2p(self, kind: str, tensor: torch.Tensor, peer: int, group: Any):
        return None if kind in ("send", "recv") else CommHandle(None, tensor)


FAKE_LINK = FakeLink()
NON_MEMBER_LINK = NonMemberLink()
TORCH_LINK = TorchLink()
_AVAILABLE = dist.is_available()
_torch_link: TorchLink = TORCH_LINK  # swapped for a checking link in debug mode


def set_torch_link(link: TorchLink) -> None:
    """Choose the link used while a process group runs (debug mode installs a checking one)."""
    global _torch_link
    _torch_link = link


def get_torch_link() -> TorchLink:
    return _torch_link


def is_non_member(group: Any) -> bool:
    """True for the placeholder ``dist.new_group`` returns on ranks outside the new group."""
    return _AVAILABLE and isinstance(group, int) and group == dist.GroupMember.NON_GROUP_MEMBER


def current_link(group: Any = None) -> FakeLink | TorchLink:
    """The link every helper talks through: torch.distributed if initialized, else the fake link.

    ``group`` (what the caller will pass on) must be ``None`` or a group of that link.
    """
    if _AVAILABLE and dist.is_initialized():
        if is_non_member(group):
            return NON_MEMBER_LINK
        if group is not None and not isinstance(group, dist.ProcessGroup):
            raise TypeError(f"group must be None or a torch.distributed ProcessGroup, got {group!r}")
        return _torch_link
    if group is not None and not isinstance(group, SingleProcessGroup):
        what = (
            "a group of a process group that is no longer running"
            if _AVAILABLE and isinstance(group, dist.ProcessGroup)
            else repr(group)
        )
        raise TypeError(f"group must be None or get_group()'s group on the fake link, got {what}")
    return FAKE_LINK
