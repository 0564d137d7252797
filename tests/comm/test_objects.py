"""Object collectives over real gloo processes."""

import operator
import threading

import pytest

import ding_dist as dd


def _merge_counts(a, b):
    merged = dict(a)
    for key, value in b.items():
        merged[key] = merged.get(key, 0) + value
    return merged


def _objects():
    r, w = dd.get_rank(), dd.get_world_size()
    cfg = dd.broadcast_object({"lr": 0.1, "from": r} if r == 0 else None, src=0)
    lst = [None, None]
    if r == w - 1:
        lst = ["last", {"w": w}]
    dd.comm.broadcast_object_list(lst, src=w - 1)
    gathered = dd.comm.allgather_object(("rank", r))
    counts = dd.comm.allreduce_object({"env_steps": 10 * (r + 1), f"only{r}": 1}, reduce_fn=_merge_counts)
    order = dd.comm.allreduce_object([r], reduce_fn=operator.add)  # concatenation shows the order
    concat = dd.comm.allreduce_object(str(r))
    future = dd.comm.allreduce_object_async({"n": r}, reduce_fn=lambda a, b: {"n": a["n"] * 10 + b["n"]})
    big = dd.comm.allreduce_object_async(bytes(1000 * (r + 1)), reduce_fn=lambda a, b: a + b)
    return cfg, lst, gathered, counts, order, concat, future.result(), len(big.result())


@pytest.mark.parametrize("nproc", [2, 3])
def test_object_collectives(run_ranks, nproc):
    results = run_ranks(_objects, nproc)
    assert all(r == results[0] for r in results), "every rank gets the identical result"
    cfg, lst, gathered, counts, order, concat, nested, big = results[0]
    assert cfg == {"lr": 0.1, "from": 0}
    assert lst == ["last", {"w": nproc}]
    assert gathered == [("rank", i) for i in range(nproc)]
    assert counts["env_steps"] == sum(10 * (i + 1) for i in range(nproc))
    assert all(counts[f"only{i}"] == 1 for i in range(nproc))
    assert order == list(range(nproc))
    assert concat == "".join(str(i) for i in range(nproc))
    assert nested == {"n": int("".join(str(i) for i in range(nproc)))}
    assert big == sum(1000 * (i + 1) for i in range(nproc))


def _unpicklable_on_rank1():
    value = threading.Lock() if dd.get_rank() == 1 else 1
    try:
        dd.comm.allgather_object(value)
    except TypeError as exc:
        return str(exc)
    return "no error"


def test_unpicklable_value_fails_on_every_rank_without_hanging(run_ranks):
    for message in run_ranks(_unpicklable_on_rank1, 2):
        assert "rank 1 could not pickle its value of type lock" in message
