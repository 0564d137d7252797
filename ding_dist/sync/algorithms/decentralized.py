"""``decentralized``: each rank averages its *weights* with its peers of a topology (Bagua's ``decentralize``).

Gradients stay local. All trainable parameters travel as one flat vector (one per dtype and device). With
steps counted from 1, step ``k`` communicates when ``(k - 1) % communication_interval == 0``; the other
steps are plain local SGD. On a communicating step, the ``s``-th (0-based), this rank lies on edge ``e``
of iteration ``s`` of the topology, with self weight ``w``:

1. when the forward pass starts (``forward_hook``) the weights ``x`` are snapshotted and the exchange
   with the edge's peers starts without blocking: an ``isend``/``irecv`` pair for an edge of 2 ranks, a
   SUM allreduce on the edge's subgroup (created once, at state creation) for a larger edge;
2. right before ``optimizer.step()`` (``pre_step_hook``) the exchange is waited for and the mixed weights
   ``mix(x) = w x_i + (1 - w) / (|e| - 1) * sum(x_j, j in e, j != i)`` replace the parameters, so the
   step applies the gradient computed at ``x``: ``x' = mix(x) - lr g(x)`` (for SGD; any optimizer works).

``hierarchical=True``: ranks are grouped in nodes of ``get_local_size()`` consecutive ranks; the
snapshot is first averaged within the node (blocking, at forward), the node leaders (local rank 0)
run the exchange above over a topology of nodes, and at ``pre_step_hook`` each leader broadcasts the
mixed weights within its node. Unlike Bagua (``hierarchical=True``), the default is flat: on one
machine hierarchical would collapse into a global average every communicating step.

Options: ``topology`` (a name of :mod:`ding_dist.sync.topology` or a :class:`Topology`; default
``'complete'``; Bagua's ``peer_selection_mode`` is an alias: ``'all'`` is ``complete``,
``'shift_one'``), ``communication_interval`` (default 1), ``hierarchical`` (default False).

Example:
    >>> model, opt = distribute(net, opt, algorithm="decentralized", topology="ring")  # doctest: +SKIP

The helpers here (:class:`FlatWeights`, :class:`Layout`) are shared with ``low_precision_decentralized``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ding_dist import comm
from ding_dist.sync._primitives import MeteredLink, MeteredSubLink, node_hierarchy
from ding_dist.sync.algorithms import Algorithm
from ding_dist.sync.bucket import Bucket
from ding_dist.sync.topology import Edge, Topology, get_topology

__all__ = ["DecentralizedState", "FlatWeights", "Layout", "check_interval"]


class FlatWeights:
    """The trainable parameters as flat vectors, one per (device, dtype), in bucket order.

    Example:
        >>> net = torch.nn.Linear(2, 1)
        >>> w = FlatWeights(list(net.parameters()))
        >>> [f.numel() for f in w.read()]
        [3]
    """

    __slots__ = ("groups", "flats")

    def __init__(self, params: Sequence[torch.Tensor]) -> None:
        by_key: dict[tuple[Any, Any], list[torch.Tensor]] = {}
        for p in params:
            by_key.setdefault((p.device, p.dtype), []).append(p)
        self.groups = list(by_key.values())
        self.flats = [
            torch.empty(sum(p.numel() for p in ps), dtype=ps[0].dtype, device=ps[0].device) for ps in self.groups
        ]

    @classmethod
    def of_buckets(cls, buckets: Sequence[Bucket]) -> FlatWeights:
        """The parameters of ``buckets`` that require a gradient (identical order on every rank)."""
        return cls([p for b in buckets for p in b.params if p.requires_grad])

    def like(self) -> list[torch.Tensor]:
        """New uninitialized flat vectors of the same shapes."""
        return [torch.empty_like(f) for f in self.flats]

    def read(self) -> list[torch.Tensor]:
        """Copy the parameters into the flat vectors (``self.flats``) and return them."""
        with torch.no_grad():
            for ps, flat in zip(self.groups, self.flats):
                torch.cat([p.detach().reshape(-1) for p in ps], out=flat)
        return self.flats

    def write(self, flats: Sequence[torch.Tensor]) -> None:
        """Copy ``flats`` (as returned by :meth:`read`) into the parameters."""
        with torch.no_grad():
            for ps, flat in zip(self.groups, flats):
                for p, piece in zip(ps, flat.split([p.numel() for p in ps])):
                    p.copy_(piece.view_as(p))


class Layout:
    """Who takes part in the decentralized exchange: every rank (flat), or node leaders (hierarchical).

    ``members`` are the link ranks of the graph's vertices (all ranks, or local rank 0 of each node of
    ``node_size`` consecutive ranks), ``index`` this rank's vertex (``None`` on a non-leader), ``node``
    the link over this rank's node (hierarchical with more than one rank per node, else ``None``) and
    ``leaders`` the group of all leaders (hierarchical, on leaders). The node layout comes from
    :func:`~ding_dist.sync._primitives.node_hierarchy` (the same check on every rank).

    Example:
        >>> Layout(MeteredLink(None), hierarchical=False).members
        [0]
    """

    __slots__ = ("members", "index", "node_size", "node", "leaders")

    def __init__(self, link: MeteredLink, hierarchical: bool, algorithm: str = "decentralized") -> None:
        n, rank = link.world_size, link.rank
        self.members, self.index = list(range(n)), rank
        self.node_size, self.node, self.leaders = 1, None, None
        if not hierarchical or n == 1:
            return
        hierarchy = node_hierarchy(link, algorithm)  # None: one rank per node, or a single node
        if hierarchy is not None:
            self.node_size, self.node = hierarchy.local_size, hierarchy.node
            self.leaders = hierarchy.leaders.group if hierarchy.leaders is not None else None
        elif comm.get_local_size() == n:  # one node: the node average is all there is
            self.node_size, self.node = n, link
        if self.node_size > 1:
            self.members = list(range(0, n, self.node_size))
            self.index = rank // self.node_size if rank % self.node_size == 0 else None

    def node_average(self, flats: Sequence[torch.Tensor]) -> None:
        """Average ``flats`` in place over this rank's node (blocking; nothing when flat)."""
        if self.node is None:
            return
        for flat in flats:
            self.node.allreduce(flat).wait()
            flat.div_(self.node_size)

    def node_leader_average(self, flats: Sequence[torch.Tensor]) -> None:
        """Average ``flats`` over this rank's node onto its leader, in place (a SUM reduce, then the leader
        divides; the others' ``flats`` are scratch until :meth:`node_broadcast`); nothing when flat."""
        if self.node is None:
            return
        for flat in flats:
            self.node.reduce(flat, dst=0).wait()
            if self.node.rank == 0:
                flat.div_(self.node_size)

    def node_broadcast(self, flats: Sequence[torch.Tensor]) -> None:
        """Copy the node leader's ``flats`` to the node's ranks (blocking; nothing when flat)."""
        if self.node is None:
            return
        for flat in flats:
            self.node.broadcast(flat, src=0)

    def edge_link(self, link: MeteredLink, vertices: Sequence[int]) -> MeteredLink | None:
        """A link over the members ``vertices`` (a new group; collective: every rank calls it, in the same
        order); ``None`` on ranks outside it."""
        if len(vertices) == len(self.members) and self.node is not None:  # every node: the leaders' group
            return MeteredSubLink(self.leaders, link) if self.leaders is not None else None
        group = link.new_subgroup([self.members[i] for i in vertices])
        return MeteredSubLink(group, link) if group is not None else None


def check_interval(value: Any) -> int:
    """Validate ``communication_interval`` (an int >= 1)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"communication_interval must be an int >= 1, got {value!r}")
    return value


def check_hierarchical(value: Any) -> bool:
    """Validate ``hierarchical`` (True or False)."""
    if not isinstance(value, bool):
        raise TypeError(f"hierarchical must be True or False, got {value!r}")
    return value


def build_topology(name: Any, layout: Layout, hierarchical: bool, algorithm: str) -> Topology:
    """The topology over ``layout.members``; a clear ``ValueError`` when it cannot serve that many."""
    n = len(layout.members)
    local = 1 if hierarchical else comm.get_local_size()
    what = f"{n} nodes (hierarchical, {layout.node_size} ranks per node)" if hierarchical else f"{n} ranks"
    try:
        return get_topology(name, n, local)
    except ValueError as exc:
        raise ValueError(f"{algorithm}: topology {getattr(name, 'name', name)!r} cannot serve {what}: {exc}") from None


class _Exchange:
    """One communicating step in flight: the edge, the snapshot sent and the transfers."""

    __slots__ = ("edge", "x", "handle")

    def __init__(self, edge: Edge | None, x: list[torch.Tensor], handle: Any) -> None:
        self.edge, self.x, self.handle = edge, x, handle


class DecentralizedState:
    """State of ``decentralized``: topology, layout, step counters, the edges' subgroups and buffers."""

    __slots__ = ("link", "layout", "topology", "interval", "steps", "comms", "groups", "weights", "recv", "pending")

    def __init__(self, link: MeteredLink, topology: Any, interval: int, hierarchical: bool) -> None:
        self.link = link
        self.interval = check_interval(interval)
        self.layout = Layout(link, check_hierarchical(hierarchical), "decentralized")
        self.topology = build_topology(topology, self.layout, hierarchical, "decentralized")
        self.steps = 0  # optimizer steps done; step k = steps + 1 communicates when steps % interval == 0
        self.comms = 0  # communicating steps done: the next one uses topology iteration `comms`
        self.groups: dict[tuple[int, ...], MeteredLink | None] = {}
        if link.world_size > 1:
            self._make_groups()
        self.weights: FlatWeights | None = None
        self.recv: list[torch.Tensor] = []
        self.pending: _Exchange | None = None

    def _make_groups(self) -> None:
        """One link per distinct edge of more than 2 vertices, created by every rank in the same order."""
        for edges in self.topology.iterations:
            for e in edges:
                if len(e.ranks) > 2 and e.ranks not in self.groups:
                    self.groups[e.ranks] = self.layout.edge_link(self.link, e.ranks)

    def communicates(self) -> bool:
        """True when the coming optimizer step communicates."""
        return self.steps % self.interval == 0

    def ensure(self, buckets: Sequence[Bucket]) -> FlatWeights:
        """Bind the parameters of ``buckets`` (on first use) and return them."""
        if self.weights is None:
            self.weights = FlatWeights.of_buckets(buckets)
            self.recv = self.weights.like()
        return self.weights

    def start(self) -> _Exchange:
        """Snapshot the weights and start this step's exchange (node average first when hierarchical)."""
        assert self.weights is not None
        x = self.weights.read()
        self.layout.node_average(x)
        if self.layout.index is None:  # a non-leader: its leader mixes for the node
            return _Exchange(None, x, None)
        edge = self.topology.edge_of(self.layout.index, self.comms)
        if len(edge.ranks) == 1:
            return _Exchange(edge, x, None)
        if len(edge.ranks) == 2:
            other = edge.ranks[0] if edge.ranks[1] == self.layout.index else edge.ranks[1]
            peer = self.layout.members[other]
            return _Exchange(edge, x, comm.CommHandle([self.link.exchange(a, b, peer) for a, b in zip(x, self.recv)]))
        edge_link = self.groups[edge.ranks]
        assert edge_link is not None
        for total, mine in zip(self.recv, x):
            total.copy_(mine)
        return _Exchange(edge, x, comm.CommHandle([edge_link.allreduce(total) for total in self.recv]))

    def finish(self, ex: _Exchange) -> list[torch.Tensor]:
        """Wait for ``ex`` and return the mixed weights (broadcast from the leader when hierarchical)."""
        if ex.handle is not None:
            ex.handle.wait()
        edge = ex.edge
        if edge is None:  # non-leader: receive the node's result
            mixed = self.recv
        elif len(edge.ranks) == 1:
            mixed = ex.x
        else:
            w, c = edge.weight, edge.mix_coefficient()
            for other, mine in zip(self.recv, ex.x):
                if len(edge.ranks) == 2:
                    other.mul_(c).add_(mine, alpha=w)
                elif w == c:  # uniform weights: the plain average, bitwise equal on the edge's ranks
                    other.div_(len(edge.ranks))
                else:
                    other.sub_(mine).mul_(c).add_(mine, alpha=w)
            mixed = self.recv
        self.layout.node_broadcast(mixed)
        return mixed


def make_state(
    link: MeteredLink,
    topology: Any = None,
    communication_interval: int = 1,
    hierarchical: bool = False,
    peer_selection_mode: str | None = None,
) -> DecentralizedState:
    """Build the state; ``peer_selection_mode`` is Bagua's name of ``topology`` (``'all'``, ``'shift_one'``)."""
    if topology is not None and peer_selection_mode is not None:
        raise ValueError(
            f"give topology or peer_selection_mode (Bagua's name of it), not both: got {topology!r} and "
            f"{peer_selection_mode!r}"
        )
    chosen = topology if topology is not None else peer_selection_mode
    return DecentralizedState(link, "complete" if chosen is None else chosen, communication_interval, hierarchical)


def forward_hook(state: DecentralizedState, buckets: list[Bucket]) -> None:
    """A training forward starts: on a communicating step send the pre-update weights (once per step)."""
    state.ensure(buckets)
    if state.pending is None and state.communicates():
        state.pending = state.start()


def pre_step_hook(state: DecentralizedState, buckets: list[Bucket]) -> None:
    """Before ``optimizer.step()``: put the mixed weights in place (communicating steps), count the step."""
    weights = state.ensure(buckets)
    if state.communicates():
        ex = state.pending if state.pending is not None else state.start()  # no forward this step: start now
        state.pending = None
        weights.write(state.finish(ex))
        state.comms += 1
    state.steps += 1


def close(state: DecentralizedState) -> None:
    """Finish an exchange still in flight (every rank has the same one) and drop its result."""
    if state.pending is not None:
        ex, state.pending = state.pending, None
        state.finish(ex)


ALGORITHMS = (
    Algorithm(
        "decentralized",
        make_state=make_state,
        forward_hook=forward_hook,
        pre_step_hook=pre_step_hook,
        close=close,
        averages_weights=True,
        options=("topology", "communication_interval", "hierarchical", "peer_selection_mode"),
    ),
)
