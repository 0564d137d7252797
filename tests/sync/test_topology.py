"""Topologies: edges as specified, doubly stochastic mixing, repeated mixing reaches the average."""

from __future__ import annotations

import numpy as np
import pytest

from ding_dist.sync.topology import Edge, Topology, available_topologies, get_topology, register_topology

CASES = [
    ("complete", 3, None),
    ("complete", 4, None),
    ("shift_one", 4, None),
    ("shift_one", 6, None),
    ("ring", 2, None),
    ("ring", 6, None),
    ("one-peer-exp", 8, None),
    ("alternating-exp-ring", 8, 2),
    ("alternating-exp-ring", 8, 1),
    ("alternating-exp-ring", 4, 2),
    ("alternating-exp-ring", 4, 4),
]


@pytest.mark.parametrize("name, n, local", CASES)
def test_mixing_is_doubly_stochastic_and_converges_to_the_average(name, n, local):
    topo = get_topology(name, n, local)
    x = np.random.default_rng(0).normal(size=(n, 5))
    mean = x.mean(axis=0)
    for step in range(len(topo.iterations)):
        w = topo.mixing_matrix(step)
        np.testing.assert_allclose(w.sum(axis=0), 1.0)
        np.testing.assert_allclose(w.sum(axis=1), 1.0)
        assert (w >= 0).all()
    for step in range(200):
        x = topo.mixing_matrix(step) @ x
    np.testing.assert_allclose(x, np.broadcast_to(mean, x.shape), atol=1e-9)


def test_shift_one_follows_bagua():
    topo = get_topology("shift_one", 6)
    # s-th communication: rank r < 3 pairs with ((s + r) mod 3) + 3
    assert [sorted(e.ranks for e in topo.iterations[s]) for s in range(3)] == [
        [(0, 3), (1, 4), (2, 5)],
        [(0, 4), (1, 5), (2, 3)],
        [(0, 5), (1, 3), (2, 4)],
    ]
    assert get_topology("all", 6).name == "complete"


def test_ring_and_one_peer_exp_follow_decent_dp():
    ring = get_topology("ring", 6)
    assert [sorted(e.ranks for e in it) for it in ring.iterations] == [
        [(0, 1), (2, 3), (4, 5)],
        [(0, 5), (1, 2), (3, 4)],
    ]
    exp = get_topology("one-peer-exp", 8)
    assert [sorted(e.ranks for e in it) for it in exp.iterations] == [
        [(0, 1), (2, 3), (4, 5), (6, 7)],
        [(0, 2), (1, 3), (4, 6), (5, 7)],
        [(0, 4), (1, 5), (2, 6), (3, 7)],
    ]
    assert {e.weight for it in exp.iterations for e in it} == {0.5}


def _groups(topo: Topology) -> list[list[tuple[int, ...]]]:
    """Each iteration's edges of more than one rank, sorted (the ranks left out stay alone)."""
    return [sorted(e.ranks for e in it if len(e.ranks) > 1) for it in topo.iterations]


def test_alternating_exp_ring_follows_decent_dp():
    # decent-dp's definition: round i pairs node j with j + 2^i mod nodes, greedily; the k-th pair (over all
    # rounds) mixes its 2L ranks in the round's second iteration when k is even, its first when k is odd,
    # and in the other iteration each of its nodes averages its own L ranks.
    assert _groups(get_topology("alternating-exp-ring", 4, local_size=2)) == [[(0, 1), (2, 3)], [(0, 1, 2, 3)]]
    assert _groups(get_topology("alternating-exp-ring", 4, local_size=1)) == [[(2, 3)], [(0, 1)], [(1, 3)], [(0, 2)]]
    assert _groups(get_topology("alternating-exp-ring", 8, local_size=2)) == [
        [(0, 1), (2, 3), (4, 5, 6, 7)],
        [(0, 1, 2, 3), (4, 5), (6, 7)],
        [(0, 1), (2, 3, 6, 7), (4, 5)],
        [(0, 1, 4, 5), (2, 3), (6, 7)],
    ]
    assert _groups(get_topology("alternating-exp-ring", 8, local_size=1)) == [
        [(2, 3), (6, 7)],
        [(0, 1), (4, 5)],
        [(1, 3), (5, 7)],
        [(0, 2), (4, 6)],
        [(1, 5), (3, 7)],
        [(0, 4), (2, 6)],
    ]
    # uniform weights: 1/(2L) on a pair of nodes, 1/L within a node, 1 alone
    weights = {(len(e.ranks), e.weight) for it in get_topology("alternating-exp-ring", 8, 2).iterations for e in it}
    assert weights == {(4, 0.25), (2, 0.5)}
    assert {(len(e.ranks), e.weight) for e in get_topology("alternating-exp-ring", 4, 1).iterations[0]} == {
        (1, 1.0),
        (2, 0.5),
    }
    np.testing.assert_array_equal(get_topology("alternating-exp-ring", 4, 2).mixing_matrix(1), np.full((4, 4), 0.25))


def test_alternating_exp_ring_on_one_node_is_the_node_average():
    topo = get_topology("alternating-exp-ring", 3, local_size=3)
    assert [[(e.ranks, e.weight) for e in it] for it in topo.iterations] == [[((0, 1, 2), 1.0 / 3)]]


@pytest.mark.parametrize(
    "name, n, local, message",
    [
        ("ring", 3, None, "topology 'ring' needs an even number of ranks, got 3 (valid: 2, 4, 6, ...)"),
        ("shift_one", 5, None, "topology 'shift_one' needs an even number of ranks, got 5"),
        ("one-peer-exp", 6, None, "topology 'one-peer-exp' needs a power of 2 ranks, got 6 (valid: 1, 2, 4, 8, ...)"),
        ("alternating-exp-ring", 6, 2, "needs a power of 2 number of nodes, got 3"),
        ("star", 4, None, "unknown topology 'star'; valid names: "),
    ],
)
def test_a_world_size_a_topology_cannot_serve_names_the_valid_sizes(name, n, local, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        get_topology(name, n, local)


def test_a_user_topology_is_checked_and_registered():
    @register_topology("test-broken")
    class Broken(Topology):
        def _edges(self):
            return [[Edge((0, 1), 0.5), Edge((1, 2), 0.5)]]  # rank 1 twice, rank 3 missing

    @register_topology("test-pairs")
    class Pairs(Topology):
        def _edges(self):
            return [[Edge((r, r + 1), 0.5) for r in range(0, self.world_size, 2)]]

    assert {"test-broken", "test-pairs"} <= set(available_topologies())
    with pytest.raises(
        ValueError, match=r"iteration 0: every rank of 0..3 must be in exactly one edge, got ranks \[0, 1, 1, 2\]"
    ):
        get_topology("test-broken", 4)
    assert get_topology("test-pairs", 4).edge_of(3, 0) == Edge((2, 3), 0.5)
