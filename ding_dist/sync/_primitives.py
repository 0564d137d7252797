"""Private collective shim for the sync engine, with traffic accounting.

Everything the engine and its algorithms send goes through a :class:`MeteredLink`, which counts the
bytes handed to each collective and forwards to :mod:`ding_dist.comm` (whose links, fake or real, carry
them). Every transfer it starts returns a :class:`ding_dist.comm.CommHandle`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.distributed as dist
from torch.overrides import has_torch_function

from ding_dist import comm
from ding_dist.comm import link as comm_link
from ding_dist.comm.devices import check_comm_device
from ding_dist.comm.groups import make_group  # a cuda:gloo group gets its gloo twin for point-to-point
from ding_dist.comm.init import on_finalize  # (issue 12 block: cached subgroups)

_generation = [0]  # bumped when the process group is destroyed: cached process groups are stale then
on_finalize(lambda: _generation.__setitem__(0, _generation[0] + 1))


class MeteredLink:
    """A process group plus byte counters; the only door algorithms use to communicate.

    ``bytes_sent`` estimates what this rank puts on the wire for the textbook algorithm of each
    collective (ring allreduce: ``2(W-1)/W`` of the tensor, all-to-all: ``(W-1)/W``, all-gather:
    ``(W-1)`` times the input); ``payload_bytes`` is the plain size of the tensors handed over.

    Example:
        >>> link = MeteredLink(group=None)  # the fake link: a world of one
        >>> link.allreduce(torch.ones(2)).wait()
        tensor([1., 1.])
        >>> link.collectives
        1
    """

    __slots__ = ("group", "world_size", "rank", "bytes_sent", "payload_bytes", "collectives", "_direct")

    def __init__(self, group: Any = None) -> None:
        self.group = group
        self.world_size = comm.get_world_size(group)
        self.rank = comm.get_rank(group)
        self._direct: tuple[Any, Any, set[str], int] | None = None  # see _direct_allreduce
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

    def allreduce(self, tensor: torch.Tensor) -> comm.CommHandle:
        """Start an in-place SUM allreduce of ``tensor``; returns a handle with ``wait()``."""
        w = self.world_size
        self._count(tensor.numel() * tensor.element_size(), 2.0 * (w - 1) / w)
        direct = self._direct_allreduce(tensor)
        if direct is not None:
            return comm.CommHandle(direct[0].allreduce([tensor], direct[1]), tensor)
        return comm.allreduce(tensor, op="sum", group=self.group, async_op=True)

    def _direct_allreduce(self, tensor: torch.Tensor) -> tuple[Any, Any, set[str], int] | None:
        """The process group and options for handing a SUM allreduce straight to the group, or ``None``.

        Each bucket's allreduce goes through here once per backward pass, and on a small network the
        argument checks of ``comm.allreduce`` and ``torch.distributed.all_reduce`` cost as much CPU as the
        collective's own call (about 60 of 100 us on 2 loaded cores). Their checks are done once per link
        and device type instead; whatever they would handle differently takes the ordinary path: the debug
        link (it records every collective), a tensor subclass or torch-function mode, complex tensors.
        """
        if comm_link.get_torch_link() is not comm_link.TORCH_LINK or not dist.is_initialized():
            return None
        if type(tensor) is not torch.Tensor or tensor.is_complex() or has_torch_function((tensor,)):
            return None
        direct = self._direct
        if direct is None or direct[3] != _generation[0]:
            if self.world_size < 2 or comm_link.is_non_member(self.group):
                return None
            opts = dist.AllreduceOptions()
            opts.reduceOp = dist.ReduceOp.SUM
            if hasattr(opts, "asyncOp"):
                opts.asyncOp = True
            group = self.group if self.group is not None else dist.group.WORLD
            direct = self._direct = (group, opts, set(), _generation[0])
        if tensor.device.type not in direct[2]:
            check_comm_device(tensor, self.group, "allreduce")  # the error of the ordinary path, once
            direct[2].add(tensor.device.type)
        return direct

    def reduce(self, tensor: torch.Tensor, dst: int = 0) -> comm.CommHandle:
        """Start an in-place SUM reduce of ``tensor`` onto group rank ``dst`` (the others' ``tensor`` is
        scratch afterwards); returns a handle with ``wait()``."""
        w = self.world_size
        self._count(tensor.numel() * tensor.element_size(), (w - 1) / w)
        if w == 1:
            return comm.CommHandle(None, tensor)
        target = comm.get_global_rank(self.group, dst)
        return comm.CommHandle(
            dist.reduce(tensor, dst=target, op=dist.ReduceOp.SUM, group=self.group, async_op=True), tensor
        )

    def all_to_all(self, output: torch.Tensor, inp: torch.Tensor) -> comm.CommHandle:
        """Start an all-to-all of equal splits (``inp`` viewed as ``world_size`` rows)."""
        w = self.world_size
        self._count(inp.numel() * inp.element_size(), (w - 1) / w)
        return comm.all_to_all_single(output, inp, group=self.group, async_op=True)

    def allgather(self, output: torch.Tensor, inp: torch.Tensor) -> comm.CommHandle:
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

    # ---- peers and subgroups (decentralized algorithms) --------------------------------------------
    def is_world(self) -> bool:
        """True when this link's group is the whole world (``group=None`` or ``WORLD``)."""
        return self.group is None or (dist.is_initialized() and self.group is dist.group.WORLD)

    def global_rank(self, group_rank: int) -> int:
        """The world rank of rank ``group_rank`` of this link's group."""
        return group_rank if self.is_world() else comm.get_global_rank(self.group, group_rank)

    def new_subgroup(self, ranks: Sequence[int]) -> Any:
        """Create a process group over the ranks ``ranks`` of this link's group; ``None`` on non-members.

        Collective over the whole world (``torch.distributed.new_group``): every rank calls it with the
        same ``ranks`` in the same order, so the link's group must be the world. All ranks: the link's
        own group, no new group.
        """
        ranks = sorted(int(r) for r in ranks)
        if len(ranks) == self.world_size:
            return self.group if self.group is not None else dist.group.WORLD
        if not self.is_world():
            raise ValueError(
                f"a subgroup of ranks {ranks} needs the link's group to be the world (it has {self.world_size} "
                f"of {comm.get_world_size()} ranks); distribute with group=None"
            )
        made = make_group(ranks)
        return made if self.rank in ranks else None

    def exchange(self, send: torch.Tensor, recv: torch.Tensor, peer: int) -> comm.CommHandle:
        """Start sending ``send`` to group rank ``peer`` and receiving its message into ``recv`` (both
        ranks of the pair call it); ``wait()`` before reading ``recv`` or writing ``send``.

        The message travels in up to :data:`EXCHANGE_PIECES` pieces of at least
        :data:`EXCHANGE_MIN_PIECE_BYTES` (contiguous slices, posted together): one large bidirectional
        gloo transfer runs at about half the link rate, the same bytes in pieces at the full rate
        (docs/results/collectives_and_sync.md). The split depends only on a tensor's size, so the peer's pieces
        of ``send`` match this rank's of ``recv``; the bytes, and so the result, are those of one message.
        Counted as one collective.
        """
        self.count_exchange(send)
        return comm.CommHandle([w for s, r in zip(pieces(send), pieces(recv)) for w in self.exchange_piece(s, r, peer)])

    def count_exchange(self, send: torch.Tensor) -> None:
        """Count one :meth:`exchange` of ``send`` (for callers that post its pieces themselves)."""
        self._count(send.numel() * send.element_size(), 1.0)

    def exchange_piece(self, send: torch.Tensor, recv: torch.Tensor, peer: int) -> list[Any]:
        """Start sending one piece to group rank ``peer`` and receiving its piece (not counted); the works."""
        target = self.global_rank(peer)
        return [comm.isend(send, target, group=self.group), comm.irecv(recv, target, group=self.group)]


EXCHANGE_PIECES = 8
"""At most this many point-to-point messages per :meth:`MeteredLink.exchange`."""
EXCHANGE_MIN_PIECE_BYTES = 256 * 1024
"""No piece of a :meth:`MeteredLink.exchange` is smaller than this (small messages go whole)."""


def pieces(t: torch.Tensor) -> list[torch.Tensor]:
    """Up to ``EXCHANGE_PIECES`` contiguous slices of ``t`` (flattened) of nearly equal sizes, each of at
    least ``EXCHANGE_MIN_PIECE_BYTES``; ``[t]`` when it is too small to split. ``t`` must be contiguous
    (as gloo requires of any point-to-point tensor).

    Example:
        >>> [p.numel() for p in pieces(torch.zeros(1 << 20))]
        [131072, 131072, 131072, 131072, 131072, 131072, 131072, 131072]
    """
    n = t.numel()
    count = min(EXCHANGE_PIECES, (n * t.element_size()) // max(1, EXCHANGE_MIN_PIECE_BYTES))
    if count <= 1:
        return [t]
    flat = t.view(-1)
    bounds = [n * i // count for i in range(count + 1)]
    return [flat[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


# ==== subgroups for hierarchical and asynchronous algorithms (issue 12) ==========================
# Used by ``gradient_allreduce``/``bytegrad`` (``hierarchical=True``), ``local_sgd`` and ``async``.


class MeteredSubLink(MeteredLink):
    """A :class:`MeteredLink` over a subgroup of ``parent``'s ranks; its traffic also counts on ``parent``, so
    a model's ``comm_stats()`` include it.

    Example:
        >>> sub = MeteredSubLink(None, MeteredLink())  # the fake link: a group of one
        >>> sub.reduce(torch.ones(2)).wait()
        tensor([1., 1.])
    """

    __slots__ = ("parent",)

    def __init__(self, group: Any, parent: MeteredLink) -> None:
        super().__init__(group)
        self.parent = parent

    def _count(self, nbytes: int, wire_factor: float) -> None:
        super()._count(nbytes, wire_factor)
        self.parent._count(nbytes, wire_factor)

    def broadcast_async(self, tensor: torch.Tensor, src: int = 0) -> comm.CommHandle:
        """Start broadcasting ``tensor`` in place from group rank ``src``; returns a handle with ``wait()``."""
        self._count(tensor.numel() * tensor.element_size(), 1.0 if self.rank == src else 0.0)
        if self.world_size == 1:
            return comm.CommHandle(None, tensor)
        return comm.broadcast(tensor, src=comm.get_global_rank(self.group, src), group=self.group, async_op=True)


def _check_world(link: MeteredLink, what: str) -> None:
    if link.world_size != comm.get_world_size():
        raise ValueError(
            f"{what} creates process groups, which needs the link's group to be the world (it has "
            f"{link.world_size} of {comm.get_world_size()} ranks); distribute with group=None"
        )


def consecutive_link(link: MeteredLink, size: int) -> MeteredLink:
    """This rank's group among the consecutive groups of ``size`` ranks of the world (``link``'s group).

    Collective the first time (every rank creates every group, in the same order); the groups are cached
    (:func:`ding_dist.comm.get_group`). ``size == world``: ``link`` itself.

    Example:
        >>> consecutive_link(MeteredLink(), 1).world_size
        1
    """
    if size == link.world_size:
        return link
    _check_world(link, f"a subgroup of {size} consecutive ranks")
    return MeteredSubLink(comm.get_group(size), link)


_strided_groups: dict[int, Any] = {}
on_finalize(_strided_groups.clear)


def strided_link(link: MeteredLink, stride: int) -> MeteredSubLink | None:
    """The group of world ranks ``0, stride, 2 * stride, ...`` (e.g. node leaders); ``None`` on the others.

    Collective the first time (every rank calls it with the same ``stride``); the group is cached.

    Example:
        >>> strided_link(MeteredLink(), 1).world_size
        1
    """
    if stride == 1:
        return MeteredSubLink(link.group, link)
    _check_world(link, f"the group of every {stride}-th rank")
    if link.world_size % stride:
        raise ValueError(f"stride {stride} does not divide the world size {link.world_size}")
    if stride not in _strided_groups:
        _strided_groups[stride] = make_group(list(range(0, link.world_size, stride)))
    return MeteredSubLink(_strided_groups[stride], link) if link.rank % stride == 0 else None


def dedicated_link(link: MeteredLink) -> MeteredSubLink:
    """A new process group with ``link``'s ranks, for a background thread: gloo groups are not safe for
    collectives issued concurrently from two threads, so the thread never shares the training thread's.

    Collective (every rank of the world creates it, in the same order); not cached: one per call.

    Example:
        >>> dedicated_link(MeteredLink()).world_size
        1
    """
    if link.world_size == 1:
        return MeteredSubLink(link.group, link)
    _check_world(link, "a dedicated group for background averaging")
    return MeteredSubLink(make_group(list(range(link.world_size))), link)


class NodeHierarchy:
    """Nodes of ``local_size`` consecutive ranks: ``node`` (this rank's node), ``leaders`` (local rank 0 of
    every node; ``None`` on the other ranks), ``is_leader``, ``local_size``, ``nodes``.

    Example::

        h = node_hierarchy(link)          # 4 ranks with LOCAL_WORLD_SIZE=2: 2 nodes of 2
        h.node.world_size, h.nodes        # (2, 2)
    """

    __slots__ = ("node", "leaders", "is_leader", "local_size", "nodes")

    def __init__(self, link: MeteredLink, local_size: int) -> None:
        self.local_size = local_size
        self.nodes = link.world_size // local_size
        self.node = consecutive_link(link, local_size)
        self.leaders = strided_link(link, local_size)
        self.is_leader = self.leaders is not None


def node_hierarchy(link: MeteredLink, algorithm: str) -> NodeHierarchy | None:
    """The node layout for ``hierarchical=True`` from :func:`ding_dist.comm.get_local_size` (torchrun's
    ``LOCAL_WORLD_SIZE``), or ``None`` when it is flat anyway (one node, or one rank per node).

    Every rank's ``(local_size, local_rank)`` is gathered first, so a layout that does not fit (sizes that
    differ, do not divide the world, or ranks that are not consecutive per node) raises ``ValueError`` on
    every rank alike, before any group is created.

    Example:
        >>> node_hierarchy(MeteredLink(), "gradient_allreduce") is None
        True
    """
    if link.world_size == 1:
        return None
    _check_world(link, f"{algorithm}(hierarchical=True)")
    layout = link.allgather_object((comm.get_local_size(), comm.get_local_rank()))
    sizes = sorted({size for size, _ in layout})
    size = sizes[0]
    if len(sizes) > 1 or link.world_size % size:
        raise ValueError(
            f"{algorithm}(hierarchical=True) needs the same number of ranks on every node, dividing the world "
            f"size {link.world_size}; the ranks report local sizes {[s for s, _ in layout]} (LOCAL_WORLD_SIZE)"
        )
    if any(local != rank % size for rank, (_, local) in enumerate(layout)):
        raise ValueError(
            f"{algorithm}(hierarchical=True) needs consecutive ranks on each node (rank r has local rank "
            f"r % {size}); the ranks report local ranks {[lr for _, lr in layout]} (LOCAL_RANK)"
        )
    if size in (1, link.world_size):
        return None
    return NodeHierarchy(link, size)
