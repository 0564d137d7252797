"""Communication topologies of decentralized training: who mixes weights with whom at each iteration.

A topology is a cycle of iterations; each iteration is a list of :class:`Edge` s that together hold
every rank exactly once. Mixing on an edge ``e`` with weight ``w`` sets, for each member ``i``,
``x_i = w * x_i + (1 - w) / (|e| - 1) * sum(x_j for the other members j)``; an edge of one rank keeps its
weights. The registry holds decent-dp's and Bagua's topologies; add one by subclassing
:class:`Topology`, returning the edges of each iteration from ``_edges()``, and decorating it with
``@register_topology('name')``.

| name | world sizes | iterations in a cycle |
|---|---|---|
| ``complete`` (alias ``all``) | any | 1: one edge of all ranks, the global average |
| ``shift_one`` (Bagua) | even | n/2: rank r < n/2 pairs with ((s + r) mod n/2) + n/2 at the s-th |
| ``ring`` (decent-dp) | even | 2: pairs (2k, 2k+1), then (2k, 2k-1 mod n) |
| ``one-peer-exp`` | powers of 2 | log2 n: iteration i pairs j with j + 2^i mod n, greedily |
| ``alternating-exp-ring`` (decent-dp) | L ranks per node, 2^k nodes | 2 log2(nodes) (1 on one node) |

``alternating-exp-ring``: round i < log2(nodes) pairs node j with node j + 2^i mod nodes, greedily;
the k-th pair (counted over all rounds from 0) averages all 2L ranks of both nodes in the round's
second iteration when k is even, in its first when k is odd, and in the other iteration each of its two
nodes averages its own L ranks (L = 1: the rank alone). 2 nodes of 2: {0,1} {2,3}, then {0,1,2,3};
4 nodes of 1: {2,3}, then {0,1}, then {1,3}, then {0,2} (the other ranks alone). One node: the node's
average, every iteration.

Example::

    topo = get_topology("ring", world_size=4)
    topo.edge_of(rank=1, step=0)   # Edge(ranks=(0, 1), weight=0.5)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

__all__ = ["Edge", "Topology", "available_topologies", "get_topology", "register_topology"]


@dataclass(frozen=True)
class Edge:
    """A set of ranks that mix their weights; ``weight`` is each member's weight on its own copy.

    Example:
        >>> Edge((0, 1), 0.5).ranks
        (0, 1)
    """

    ranks: tuple[int, ...]
    weight: float

    def mix_coefficient(self) -> float:
        """Weight of each other member's copy: ``(1 - weight) / (|e| - 1)`` (0 for an edge of one rank)."""
        return 0.0 if len(self.ranks) == 1 else (1.0 - self.weight) / (len(self.ranks) - 1)


class Topology:
    """Base class: a cycle of iterations of edges over ``world_size`` ranks (``local_size`` per node).

    Subclasses set ``name`` and implement ``_edges()``; the constructor checks that every iteration
    holds every rank in exactly one edge.

    Example::

        class Solo(Topology):
            name = "solo"
            def _edges(self):
                return [[Edge((r,), 1.0) for r in range(self.world_size)]]
    """

    name: ClassVar[str] = ""

    def __init__(self, world_size: int, local_size: int | None = None) -> None:
        if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
            raise ValueError(f"world_size must be a positive int, got {world_size!r}")
        self.world_size = world_size
        self.local_size = world_size if local_size is None else int(local_size)
        self.iterations: list[list[Edge]] = self._edges() if world_size > 1 else [[Edge((0,), 1.0)]]
        self._check()
        self._lookup = [{r: e for e in edges for r in e.ranks} for edges in self.iterations]

    def _edges(self) -> list[list[Edge]]:
        raise NotImplementedError

    def _check(self) -> None:
        if not self.iterations:
            raise ValueError(f"topology {self.name!r} has no iterations")
        everyone = list(range(self.world_size))
        for i, edges in enumerate(self.iterations):
            members = sorted(r for e in edges for r in e.ranks)
            if members != everyone:
                raise ValueError(
                    f"topology {self.name!r}, iteration {i}: every rank of 0..{self.world_size - 1} must be in "
                    f"exactly one edge, got ranks {members}"
                )
            for e in edges:
                if not 0.0 <= e.weight <= 1.0 or (len(e.ranks) == 1 and e.weight != 1.0):
                    raise ValueError(f"topology {self.name!r}, iteration {i}: bad weight {e.weight} on edge {e.ranks}")

    def edge_of(self, rank: int, step: int) -> Edge:
        """The edge ``rank`` mixes on at its ``step``-th communication (0-based, cycling)."""
        return self._lookup[step % len(self.iterations)][rank]

    def mixing_matrix(self, step: int) -> np.ndarray:
        """The ``[n, n]`` matrix W with ``x_new = W @ x`` at communication ``step`` (doubly stochastic).

        Example:
            >>> get_topology("complete", world_size=2).mixing_matrix(0)
            array([[0.5, 0.5],
                   [0.5, 0.5]])
        """
        n = self.world_size
        w = np.zeros((n, n))
        for e in self.iterations[step % len(self.iterations)]:
            other = e.mix_coefficient()
            for i in e.ranks:
                for j in e.ranks:
                    w[i, j] = e.weight if i == j else other
        return w


_REGISTRY: dict[str, type[Topology]] = {}
_ALIASES = {"all": "complete", "shift-one": "shift_one", "one_peer_exp": "one-peer-exp"}
_ALIASES["alternating_exp_ring"] = "alternating-exp-ring"


def register_topology(name: str):
    """Class decorator: make a :class:`Topology` subclass available under ``name``.

    Example::

        @register_topology("solo")
        class Solo(Topology): ...
    """

    def add(cls: type[Topology]) -> type[Topology]:
        if name in _REGISTRY or name in _ALIASES:
            raise ValueError(f"topology name {name!r} is already registered")
        cls.name = name
        _REGISTRY[name] = cls
        return cls

    return add


def available_topologies() -> list[str]:
    """Registered topology names, sorted.

    Example:
        >>> "ring" in available_topologies()
        True
    """
    return sorted(_REGISTRY)


def get_topology(name: str | Topology, world_size: int, local_size: int | None = None) -> Topology:
    """Build the topology ``name`` (or alias: Bagua's ``'all'`` is ``complete``) for ``world_size`` ranks.

    Example:
        >>> get_topology("shift_one", world_size=4).edge_of(rank=0, step=1)
        Edge(ranks=(0, 3), weight=0.5)
    """
    if isinstance(name, Topology):
        if name.world_size != world_size:
            raise ValueError(
                f"topology {name.name!r} was built for {name.world_size} ranks, the group has {world_size}"
            )
        return name
    key = _ALIASES.get(str(name), str(name))
    if key not in _REGISTRY:
        raise ValueError(f"unknown topology {name!r}; valid names: {', '.join(available_topologies())}")
    return _REGISTRY[key](world_size, local_size)


def _pairs(pairs: list[tuple[int, int]]) -> list[Edge]:
    return [Edge(tuple(sorted(p)), 0.5) for p in pairs]


def _need_even(name: str, n: int) -> None:
    if n % 2:
        raise ValueError(f"topology {name!r} needs an even number of ranks, got {n} (valid: 2, 4, 6, ...)")


def _need_power_of_two(name: str, n: int, what: str = "ranks") -> None:
    if n & (n - 1):
        raise ValueError(f"topology {name!r} needs a power of 2 {what}, got {n} (valid: 1, 2, 4, 8, ...)")


def _greedy_exp_pairs(n: int, shift: int) -> list[tuple[int, int]]:
    """Pair j with (j + shift) mod n for j = 0, 1, ... while both are free."""
    taken: set[int] = set()
    pairs = []
    for j in range(n):
        k = (j + shift) % n
        if j not in taken and k not in taken and j != k:
            pairs.append((j, k))
            taken.update((j, k))
    return pairs


@register_topology("complete")
class CompleteTopology(Topology):
    """Every rank averages with every other at every communication."""

    def _edges(self) -> list[list[Edge]]:
        n = self.world_size
        return [[Edge(tuple(range(n)), 1.0 / n)]]


@register_topology("shift_one")
class ShiftOneTopology(Topology):
    """Bagua's ``shift_one``: the first half of the ranks pairs with the second half, shifted by one each time."""

    def _edges(self) -> list[list[Edge]]:
        n = self.world_size
        _need_even(self.name, n)
        half = (n + 1) // 2
        return [_pairs([(r, (s + r) % half + n // 2) for r in range(n // 2)]) for s in range(half)]


@register_topology("ring")
class RingTopology(Topology):
    """decent-dp's ``ring``: even pairs (2k, 2k+1), then odd pairs (2k, 2k-1 mod n)."""

    def _edges(self) -> list[list[Edge]]:
        n = self.world_size
        _need_even(self.name, n)
        first = [(2 * k, 2 * k + 1) for k in range(n // 2)]
        second = [(2 * k, (2 * k - 1) % n) for k in range(n // 2)]
        return [_pairs(first), _pairs(second)] if n > 2 else [_pairs(first)]


@register_topology("one-peer-exp")
class OnePeerExpTopology(Topology):
    """One peer per iteration at distance 2^i (i = 0 .. log2 n - 1)."""

    def _edges(self) -> list[list[Edge]]:
        n = self.world_size
        _need_power_of_two(self.name, n)
        return [_pairs(_greedy_exp_pairs(n, 2**i)) for i in range(int(math.log2(n)))]


@register_topology("alternating-exp-ring")
class AlternatingExpRingTopology(Topology):
    """decent-dp's ``alternating-exp-ring``: node pairs of one-peer-exp, each pair's whole-pair mix alternated
    with a mix within each of its nodes.

    Each round ``i < log2(nodes)`` has two iterations; node pairs ``(j, j + 2^i mod nodes)`` are taken
    greedily, and the ``k``-th pair (counted over all rounds from 0) mixes all ``2L`` ranks of both nodes
    (weight ``1/(2L)``) in the round's second iteration when ``k`` is even, in its first when ``k`` is odd;
    in the other iteration each of the two nodes averages its own ``L`` ranks (one rank: alone). One node:
    one iteration, the average of the node's ranks (decent-dp refuses one node).

    Example:
        >>> [sorted(e.ranks for e in it) for it in get_topology("alternating-exp-ring", 4, 2).iterations]
        [[(0, 1), (2, 3)], [(0, 1, 2, 3)]]
    """

    def _edges(self) -> list[list[Edge]]:
        n, local = self.world_size, self.local_size
        if local < 1 or n % local:
            raise ValueError(f"topology {self.name!r}: local size {local} must divide the world size {n}")
        nodes = n // local
        _need_power_of_two(self.name, nodes, "number of nodes")

        def node(a: int) -> tuple[int, ...]:
            return tuple(range(a * local, (a + 1) * local))

        if nodes == 1:
            return [[Edge(node(0), 1.0 / local)]]
        cycle, k = [], 0
        for i in range(int(math.log2(nodes))):
            first: list[Edge] = []
            second: list[Edge] = []
            for a, b in _greedy_exp_pairs(nodes, 2**i):
                pair, apart = first, second
                if k % 2 == 0:
                    pair, apart = second, first
                pair.append(Edge(node(a) + node(b), 1.0 / (2 * local)))
                apart += [Edge(node(a), 1.0 / local), Edge(node(b), 1.0 / local)]
                k += 1
            cycle += [first, second]
        return cycle
