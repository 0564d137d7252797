"""Tensor collectives over real gloo processes (2 and 3 ranks)."""

import pytest
import torch

import ding_dist as dd

WORLDS = [2, 3]


def _reduce_ops():
    r, w = dd.get_rank(), dd.get_world_size()
    out = {}
    for op in ("sum", "avg", "max", "min", "product"):
        t = torch.tensor([r + 1.0, -(r + 1.0), 2.0])
        dd.allreduce(t, op=op)
        out[op] = t.tolist()
    ints = torch.tensor([r + 1])
    dd.allreduce(ints)  # torch's default: sum
    out["int_sum"] = ints.item()
    out["world"] = w
    return out


@pytest.mark.parametrize("nproc", WORLDS)
def test_allreduce_ops(run_ranks, nproc):
    results = run_ranks(_reduce_ops, nproc)
    values = [float(r + 1) for r in range(nproc)]
    prod = 1.0
    for v in values:
        prod *= v
    expected = {
        "sum": [sum(values), -sum(values), 2.0 * nproc],
        "avg": [sum(values) / nproc, -sum(values) / nproc, 2.0],
        "max": [max(values), -min(values), 2.0],
        "min": [min(values), -max(values), 2.0],
        "product": [prod, prod * (-1) ** nproc, 2.0**nproc],
        "int_sum": sum(range(1, nproc + 1)),
        "world": nproc,
    }
    for result in results:
        assert result.keys() == expected.keys()
        for key, value in expected.items():
            assert result[key] == pytest.approx(value), key


def _async_avg_divides_on_wait():
    r = dd.get_rank()
    t = torch.full((1000,), float(r))
    handle = dd.allreduce(t, op="avg", async_op=True)
    result = handle.wait()
    again = handle.wait()  # a second wait does not divide twice
    h2 = dd.comm.allreduce_async(torch.tensor([float(r + 1)]), op="avg")
    return result is t, again.tolist()[:3], h2.wait().item(), handle.is_completed()


@pytest.mark.parametrize("nproc", WORLDS)
def test_async_handles(run_ranks, nproc):
    mean = sum(range(nproc)) / nproc
    for same, head, avg, done in run_ranks(_async_avg_divides_on_wait, nproc):
        assert same and done
        assert head == pytest.approx([mean] * 3)
        assert avg == pytest.approx(sum(range(1, nproc + 1)) / nproc)


def _default_reductions():
    from ding_dist.compat import pytorch_ddp_dist_helper as ding_helper

    r = dd.get_rank()
    values = [float(r + 1), 10.0 * (r + 1)]  # [1, 10] and [2, 20]: mean [1.5, 15], sum [3, 30]
    out = {}
    t = torch.tensor(values)
    dd.allreduce(t)
    out["allreduce"] = t.tolist()
    t = torch.tensor(values)
    dd.comm.allreduce_async(t).wait()
    out["allreduce_async"] = t.tolist()
    out["allreduce_data"] = dd.allreduce_data(r + 1)
    t = torch.tensor(values)
    ding_helper.allreduce(t)
    out["compat allreduce"] = t.tolist()
    t = torch.tensor(values)
    ding_helper.allreduce_async("grad", t).wait()
    out["compat allreduce_async"] = t.tolist()
    return out


def test_the_one_default_reduction_is_the_sum_and_compat_keeps_the_mean(run_ranks):
    """``ding_dist``'s reductions sum by default, as torch.distributed; DI-engine's drop-in module averages."""
    expected = {
        "allreduce": [3.0, 30.0],
        "allreduce_async": [3.0, 30.0],
        "allreduce_data": 3,
        "compat allreduce": [1.5, 15.0],
        "compat allreduce_async": [1.5, 15.0],
    }
    assert run_ranks(_default_reductions, 2) == [expected, expected]


def _broadcast_gather_p2p():
    r, w = dd.get_rank(), dd.get_world_size()
    t = torch.full((3,), float(r))
    dd.broadcast(t, src=w - 1)
    h = dd.broadcast(torch.tensor([r]), src=0, async_op=True)
    gathered = [x.item() for x in dd.allgather(torch.tensor([r * 10]))]
    chunks = torch.arange(w, dtype=torch.float32) + 100 * r
    out = torch.empty(w)
    dd.comm.all_to_all_single(out, chunks)
    ring = torch.tensor([float(r)])
    got = torch.empty(1)
    if r % 2 == 0:
        dd.comm.send(ring, peer=(r + 1) % w)
        dd.comm.recv(got, peer=(r - 1) % w)
    else:
        dd.comm.recv(got, peer=(r - 1) % w)
        dd.comm.send(ring, peer=(r + 1) % w)
    dd.barrier()
    return t.tolist(), h.wait().item(), gathered, out.tolist(), got.item()


@pytest.mark.parametrize("nproc", WORLDS)
def test_broadcast_allgather_all_to_all_p2p(run_ranks, nproc):
    for rank, (bcast, from0, gathered, a2a, got) in enumerate(run_ranks(_broadcast_gather_p2p, nproc)):
        assert bcast == [nproc - 1.0] * 3
        assert from0 == 0
        assert gathered == [10 * i for i in range(nproc)]
        assert a2a == [100.0 * src + rank for src in range(nproc)]
        assert got == (rank - 1) % nproc


def _data_helpers():
    r = dd.get_rank()
    x = torch.tensor([1.0, float(r)])
    y = dd.allreduce_data(x, op="max")
    grad = torch.full((2, 2), float(r + 1))
    dd.comm.allreduce_with_indicator(grad, indicator=int(r != 0))
    return (
        dd.allreduce_data(r + 1),
        dd.allreduce_data(r, op="avg"),
        x.tolist(),
        y.tolist(),
        dd.comm.reduce_data(float(r), dst=1),
        dd.comm.reduce_data(torch.tensor([r, 1]), dst=0, op="sum"),
        grad.flatten().tolist(),
    )


@pytest.mark.parametrize("nproc", WORLDS)
def test_data_helpers(run_ranks, nproc):
    contributors = list(range(2, nproc + 1))  # ranks 1.. have indicator 1, their grads are r + 1
    for rank, (s, avg, x, y, reduced, reduced_t, grad) in enumerate(run_ranks(_data_helpers, nproc)):
        assert s == sum(range(1, nproc + 1)) and isinstance(s, int)
        assert avg == pytest.approx(sum(range(nproc)) / nproc)
        assert x == [1.0, float(rank)]  # input untouched
        assert y == [1.0, nproc - 1.0]
        assert reduced == (float(sum(range(nproc))) if rank == 1 else None)
        if rank == 0:
            assert reduced_t.tolist() == [sum(range(nproc)), nproc]
        else:
            assert reduced_t is None
        assert grad == pytest.approx([sum(contributors) / len(contributors)] * 4)


def _bad_src():
    dd.broadcast(torch.ones(1), src=dd.get_world_size())


def test_src_outside_the_world_is_a_clear_error(run_ranks):
    with pytest.raises(dd.comm.LaunchError, match=r"src must be a rank in \[0, 1\] for world size 2, got 2") as info:
        run_ranks(_bad_src, 2)
    assert isinstance(info.value.exception, ValueError)


def _gather_into_and_global_rank():
    r, w = dd.get_rank(), dd.get_world_size()
    out = torch.empty(2 * w)
    handle = dd.comm.allgather_into_tensor(out, torch.tensor([r, 10.0 * r]), async_op=True)
    handle.wait()
    group = dd.get_group(w)
    return out.tolist(), dd.comm.get_global_rank(group, w - 1), dd.comm.get_global_rank(None, 0)


@pytest.mark.parametrize("nproc", WORLDS)
def test_allgather_into_tensor_and_global_rank(run_ranks, nproc):
    for out, last, first in run_ranks(_gather_into_and_global_rank, nproc):
        assert out == [x for r in range(nproc) for x in (float(r), 10.0 * r)]
        assert (last, first) == (nproc - 1, 0)


def test_allgather_into_tensor_checks_the_output_size():
    with pytest.raises(ValueError, match="world size x input = 2 elements, got 3"):
        dd.comm.allgather_into_tensor(torch.empty(3), torch.ones(2))
