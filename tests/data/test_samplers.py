"""Load-balancing samplers: exact coverage, balance against DistributedSampler, epochs, batching."""

import math
from collections import Counter

import numpy as np
import pytest
from torch.utils.data import DataLoader, DistributedSampler

from ding_dist import comm
from ding_dist.data import LoadBalancingDistributedBatchSampler, LoadBalancingDistributedSampler, samplers


def episodes(n: int, seed: int = 0) -> list[list[int]]:
    """Variable-length 'episodes' with a skewed (lognormal) length distribution."""
    rng = np.random.default_rng(seed)
    lengths = np.maximum(1, np.exp(rng.normal(3.0, 1.0, n))).astype(int)
    return [list(range(length)) for length in lengths]


def plans(dataset, num_replicas, **kwargs) -> list[list[int]]:
    """What each rank's own sampler yields (one sampler object per rank, as in real training)."""
    out = []
    for rank in range(num_replicas):
        sampler = LoadBalancingDistributedSampler(
            dataset, complexity_fn=len, num_replicas=num_replicas, rank=rank, **kwargs
        )
        out.append(list(sampler))
    return out


@pytest.mark.parametrize("shuffle", [True, False])
@pytest.mark.parametrize("n", [1, 2, 7, 10, 11])
@pytest.mark.parametrize("num_replicas", [1, 2, 3])
def test_padding_covers_dataset(num_replicas, n, shuffle):
    data = episodes(n)
    per_rank = plans(data, num_replicas, shuffle=shuffle, drop_last=False)
    expected = math.ceil(n / num_replicas)
    torch_len = len(DistributedSampler(data, num_replicas=num_replicas, rank=0, drop_last=False))
    assert expected == torch_len
    assert [len(indices) for indices in per_rank] == [expected] * num_replicas
    assert {i for indices in per_rank for i in indices} == set(range(n))  # every sample at least once


@pytest.mark.parametrize("shuffle", [True, False])
@pytest.mark.parametrize("n", [1, 2, 7, 10, 11])
@pytest.mark.parametrize("num_replicas", [1, 2, 3])
def test_drop_last_partitions(num_replicas, n, shuffle):
    data = episodes(n)
    per_rank = plans(data, num_replicas, shuffle=shuffle, drop_last=True)
    expected = n // num_replicas
    torch_len = len(DistributedSampler(data, num_replicas=num_replicas, rank=0, drop_last=True))
    assert expected == torch_len
    assert [len(indices) for indices in per_rank] == [expected] * num_replicas
    flat = [i for indices in per_rank for i in indices]
    assert len(flat) == len(set(flat)) == expected * num_replicas  # disjoint, nothing repeated
    assert set(flat) <= set(range(n))


def test_drop_last_with_shuffle_drops_different_samples_per_epoch():
    data = episodes(11)
    dropped = set()
    for epoch in range(10):
        samplers = [
            LoadBalancingDistributedSampler(data, len, num_replicas=3, rank=r, drop_last=True) for r in range(3)
        ]
        for s in samplers:
            s.set_epoch(epoch)
        dropped |= set(range(11)) - {i for s in samplers for i in s}
    assert len(dropped) > 2  # not always the same (e.g. the longest) two episodes


def totals_and_step_gaps(lengths: np.ndarray, per_rank: list[list[int]]) -> tuple[float, float]:
    """Spread of per-replica total complexity, and mean spread of complexity across replicas per step."""
    c = lengths[np.asarray(per_rank)]
    totals = c.sum(axis=1)
    return float(totals.max() - totals.min()), float((c.max(axis=0) - c.min(axis=0)).mean())


@pytest.mark.parametrize("num_replicas", [2, 3, 4])
def test_balance_much_better_than_distributed_sampler(num_replicas):
    data = episodes(601, seed=3)
    lengths = np.array([len(e) for e in data], dtype=float)
    lb_total, lb_step, ds_total, ds_step = [], [], [], []
    for epoch in range(4):
        lb = []
        ds = []
        for rank in range(num_replicas):
            s = LoadBalancingDistributedSampler(data, len, num_replicas=num_replicas, rank=rank)
            s.set_epoch(epoch)
            lb.append(list(s))
            d = DistributedSampler(data, num_replicas=num_replicas, rank=rank)
            d.set_epoch(epoch)
            ds.append(list(d))
        total, step = totals_and_step_gaps(lengths, lb)
        lb_total.append(total)
        lb_step.append(step)
        total, step = totals_and_step_gaps(lengths, ds)
        ds_total.append(total)
        ds_step.append(step)
    assert np.mean(ds_total) > 0 and np.mean(ds_step) > 0
    assert np.mean(lb_total) < 0.05 * np.mean(ds_total), (lb_total, ds_total)
    assert np.mean(lb_step) < 0.1 * np.mean(ds_step), (lb_step, ds_step)


@pytest.mark.parametrize("greedy_chunks", [0, 16])
@pytest.mark.parametrize("num_replicas", [2, 3, 4])
def test_balance_when_most_chunks_are_placed_vectorized(monkeypatch, num_replicas, greedy_chunks):
    # Large datasets: only the widest chunks go through the greedy loop, the rest rotate ranks.
    monkeypatch.setattr(samplers, "_GREEDY_CHUNKS", greedy_chunks)
    data = episodes(601, seed=3)
    lengths = np.array([len(e) for e in data], dtype=float)
    lb = plans(data, num_replicas)
    ds = [list(DistributedSampler(data, num_replicas=num_replicas, rank=r)) for r in range(num_replicas)]
    assert {i for indices in lb for i in indices} == set(range(601))
    lb_total, lb_step = totals_and_step_gaps(lengths, lb)
    ds_total, ds_step = totals_and_step_gaps(lengths, ds)
    assert lb_step < 0.1 * ds_step
    if greedy_chunks:  # the greedy pass over the widest chunks absorbs what rotation left over
        assert lb_total < 0.05 * ds_total, (lb_total, ds_total)
    else:  # rotation alone: well under one long episode (fixed assignment gives about half the longest)
        assert lb_total < 0.3 * lengths.max(), (lb_total, lengths.max())


def test_each_position_is_a_window_of_sorted_complexities():
    # random_level=0: the samples the replicas get at one position are neighbours in complexity order.
    data = episodes(60, seed=5)
    lengths = sorted(len(e) for e in data)
    windows = Counter(tuple(lengths[k : k + 3]) for k in range(0, 60, 3))
    per_rank = plans(data, 3, seed=11)
    at_position = Counter(tuple(sorted(len(data[r[i]]) for r in per_rank)) for i in range(20))
    assert at_position == windows


def test_random_level_moves_from_balanced_to_random():
    data = episodes(300, seed=7)
    lengths = np.array([len(e) for e in data], dtype=float)
    gaps = []
    for level in (0.0, 0.3, 1.0):
        per_level = []
        for epoch in range(3):
            per_rank = []
            for rank in range(2):
                s = LoadBalancingDistributedSampler(data, len, num_replicas=2, rank=rank, random_level=level)
                s.set_epoch(epoch)
                per_rank.append(list(s))
            per_level.append(totals_and_step_gaps(lengths, per_rank)[1])
        gaps.append(np.mean(per_level))
    assert gaps[0] < gaps[1] < gaps[2]
    # Fully random: as unbalanced per step as a plain random split.
    ds = [list(DistributedSampler(data, num_replicas=2, rank=r)) for r in range(2)]
    assert gaps[2] > 0.5 * totals_and_step_gaps(lengths, ds)[1]


def test_set_epoch_is_deterministic_and_shared_by_replicas():
    data = episodes(50)
    samplers = [LoadBalancingDistributedSampler(data, len, num_replicas=2, rank=r, seed=4) for r in range(2)]
    seen = {}
    for epoch in (0, 1, 2, 1):
        for s in samplers:
            s.set_epoch(epoch)
        plan = samplers[0].replica_indices()
        assert plan == [list(s) for s in samplers]  # every replica computes the same plan
        if epoch in seen:
            assert plan == seen[epoch]
        seen[epoch] = plan
    assert seen[0] != seen[1] != seen[2]
    other_seed = LoadBalancingDistributedSampler(data, len, num_replicas=2, rank=0, seed=5)
    assert list(other_seed) != seen[0][0]


def test_no_shuffle_is_ascending_complexity():
    data = episodes(40)
    per_rank = plans(data, 2, shuffle=False)
    assert per_rank == plans(data, 2, shuffle=False)
    for indices in per_rank:
        lengths = [len(data[i]) for i in indices]
        assert lengths == sorted(lengths)


@pytest.mark.parametrize("level", [-0.1, 1.5, float("nan")])
def test_random_level_out_of_range(level):
    with pytest.raises(ValueError, match=f"random_level.*{level}"):
        LoadBalancingDistributedSampler(episodes(5), len, num_replicas=1, rank=0, random_level=level)


def test_bad_arguments():
    data = episodes(5)
    with pytest.raises(ValueError, match="random_level=0.5 needs shuffle"):
        LoadBalancingDistributedSampler(data, len, num_replicas=1, rank=0, shuffle=False, random_level=0.5)
    with pytest.raises(TypeError, match="random_level"):
        LoadBalancingDistributedSampler(data, len, num_replicas=1, rank=0, random_level=True)
    with pytest.raises(ValueError, match="rank must be in \\[0, 1\\].*got 2"):
        LoadBalancingDistributedSampler(data, len, num_replicas=2, rank=2)
    with pytest.raises(ValueError, match="num_replicas must be >= 1, got 0"):
        LoadBalancingDistributedSampler(data, len, num_replicas=0, rank=0)
    with pytest.raises(TypeError, match="complexity_fn must be callable"):
        LoadBalancingDistributedSampler(data, 3, num_replicas=1, rank=0)
    with pytest.raises(ValueError, match="finite.*sample 0"):
        LoadBalancingDistributedSampler(data, lambda e: float("inf"), num_replicas=1, rank=0)
    with pytest.raises(TypeError, match="must return a number"):
        LoadBalancingDistributedSampler(data, lambda e: "long", num_replicas=1, rank=0)


def test_defaults_come_from_comm_fake_link():
    # No process group here: ding_dist.comm answers a world of one.
    sampler = LoadBalancingDistributedSampler(episodes(7), len)
    assert (sampler.num_replicas, sampler.rank) == (comm.get_world_size(), comm.get_rank()) == (1, 0)
    assert sorted(sampler) == list(range(7))


def test_dataloader_yields_the_planned_samples():
    data = episodes(9)
    sampler = LoadBalancingDistributedSampler(data, len, num_replicas=2, rank=1)
    loader = DataLoader(data, sampler=sampler, batch_size=None, collate_fn=lambda e: e)
    assert [len(e) for e in loader] == [len(data[i]) for i in sampler]


def budget_batches(data, budget):
    """Batches of consecutive episodes holding at most ``budget`` steps (at least one episode each)."""

    def batch_fn(indices):
        batches, current, used = [], [], 0
        for i in indices:
            if current and used + len(data[i]) > budget:
                batches.append(current)
                current, used = [], 0
            current.append(i)
            used += len(data[i])
        return batches + ([current] if current else [])

    return batch_fn


@pytest.mark.parametrize("drop_last", [False, True])
def test_batch_sampler_equal_counts(drop_last):
    data = episodes(101, seed=2)
    batch_fn = budget_batches(data, budget=80)
    samplers = [
        LoadBalancingDistributedSampler(data, len, num_replicas=3, rank=r, drop_last=drop_last, random_level=0.5)
        for r in range(3)
    ]
    batchers = [LoadBalancingDistributedBatchSampler(s, batch_fn, drop_last=drop_last) for s in samplers]
    raw = [batch_fn(list(s)) for s in samplers]
    raw_counts = [len(b) for b in raw]
    assert len(set(raw_counts)) > 1, "test setup should give the replicas different batch counts"
    per_rank = [list(b) for b in batchers]
    counts = [len(b) for b in per_rank]
    assert counts == [len(b) for b in batchers]
    assert counts == [min(raw_counts) if drop_last else max(raw_counts)] * 3
    for mine, own in zip(per_rank, raw):
        if drop_last:
            assert mine == own[: len(mine)]
        else:  # own batches first, then own batches again from the start
            assert mine[: len(own)] == own
            assert mine[len(own) :] == own[: len(mine) - len(own)]
    indices = [i for batches in per_rank for batch in batches for i in batch]
    if drop_last:
        assert len(indices) == len(set(indices))  # every index at most once
    else:
        assert set(indices) == set(range(101))  # every index at least once


def test_batch_sampler_set_epoch_and_validation():
    data = episodes(30)
    sampler = LoadBalancingDistributedSampler(data, len, num_replicas=2, rank=0)
    batcher = LoadBalancingDistributedBatchSampler(sampler, lambda idx: [idx[i : i + 4] for i in range(0, len(idx), 4)])
    first = list(batcher)
    batcher.set_epoch(1)
    assert sampler.epoch == 1
    assert list(batcher) != first
    assert [i for b in batcher for i in b] == list(sampler)
    with pytest.raises(ValueError, match="empty batch"):
        list(LoadBalancingDistributedBatchSampler(sampler, lambda idx: [idx, []]))
    with pytest.raises(ValueError, match="not in its input"):
        list(LoadBalancingDistributedBatchSampler(sampler, lambda idx: [[10_000]]))
    with pytest.raises(TypeError, match="LoadBalancingDistributedSampler"):
        LoadBalancingDistributedBatchSampler(DistributedSampler(data, 2, 0), lambda idx: [idx])


def _gloo_rank_indices(n: int) -> tuple[int, int, list[int]]:
    # Runs in a spawned process with a gloo group: num_replicas/rank come from ding_dist.comm.
    sampler = LoadBalancingDistributedSampler(episodes(n), complexity_fn=len)
    sampler.set_epoch(1)
    return sampler.num_replicas, sampler.rank, list(sampler)


def test_two_rank_gloo_union_is_dataset(run_ranks):
    results = run_ranks(_gloo_rank_indices, 2, 11)
    assert [(world, rank) for world, rank, _ in results] == [(2, 0), (2, 1)]
    assert [len(indices) for _, _, indices in results] == [6, 6]
    assert {i for _, _, indices in results for i in indices} == set(range(11))
    local = LoadBalancingDistributedSampler(episodes(11), len, num_replicas=2, rank=0)
    local.set_epoch(1)
    assert [indices for _, _, indices in results] == local.replica_indices()
