"""Check (c): an nccl world of one through every ``ding_dist.comm`` collective (c1) and ``distribute`` with
each sync algorithm (c2); without CUDA over a gloo world of one as a stand-in."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from gpu_check_common import (
    Ctx,
    _no_cuda_reason,
    _rank_device,
    flat,
    row,
    small_mlp,
)
from torch import nn

import ding_dist as dd


# ---------------------------------------------------------------------------------- (c) nccl world of one
@contextmanager
def world_of_one(ctx: Ctx) -> Iterator[str]:
    backend = "nccl" if ctx.cuda else "gloo"
    dd.dist_init(backend=backend, addr="127.0.0.1", port=dd.comm.free_port(), rank=0, world_size=1, timeout=60)
    try:
        yield backend
    finally:
        dd.dist_finalize()


def _stand_in(ctx: Ctx, check_id: str, name: str, figure: str) -> dict[str, str]:
    if ctx.cuda:
        return row(check_id, name, figure)
    return row(check_id, name, f"gloo stand-in on cpu ok: {figure}", f"skipped: {_no_cuda_reason()}")


def collectives_world_of_one(dev: torch.device, backend: str) -> list[str]:
    """Every collective helper of ding_dist.comm on a world of one; returns what was checked."""
    done: list[str] = []

    def same(got: torch.Tensor, want: torch.Tensor, what: str) -> None:
        assert got.device == want.device, f"{what}: result on {got.device}, expected {want.device}"
        assert torch.equal(got, want), f"{what}: got {got.tolist()}, expected {want.tolist()}"
        done.append(what)

    x = torch.arange(1.0, 7.0, device=dev)
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64):
        for op in ("sum", "avg", "max", "min", "product"):
            if op == "avg" and dtype == torch.int64:
                continue
            t = x.to(dtype)
            dd.allreduce(t, op=op)
            same(t, x.to(dtype), f"allreduce {op} {dtype}")
    t = x.clone()
    dd.allreduce(t, op=torch.distributed.ReduceOp.MAX)
    same(t, x, "allreduce ReduceOp.MAX")
    t = x.clone()
    dd.allreduce(t, async_op=True).wait()
    same(t, x, "allreduce async_op")
    t = x.clone()
    dd.comm.allreduce_async(t, op="avg").wait()
    same(t, x, "allreduce_async avg")
    t = x.clone()
    dd.broadcast(t, src=0)
    same(t, x, "broadcast")
    t = x.clone()
    dd.broadcast(t, src=0, async_op=True).wait()
    same(t, x, "broadcast async_op")
    gathered = dd.allgather(x)
    assert len(gathered) == 1, f"allgather returned {len(gathered)} tensors"
    same(gathered[0], x, "allgather")
    out = torch.empty_like(x)
    dd.comm.allgather_into_tensor(out, x)
    same(out, x, "allgather_into_tensor")
    out = torch.empty_like(x)
    dd.comm.all_to_all_single(out, x)
    same(out, x, "all_to_all_single")
    assert dd.comm.reduce_data(2.5) == 2.5 and dd.comm.reduce_data(3) == 3, "reduce_data of numbers"
    same(dd.comm.reduce_data(x), x, "reduce_data tensor")
    assert dd.allreduce_data(2.0) == 2.0 and dd.allreduce_data(3, op="avg") == 3.0, "allreduce_data of numbers"
    same(dd.allreduce_data(x, op="max"), x, "allreduce_data tensor")
    host = torch.tensor([1.0, 2.0])
    same(dd.allreduce_data(host), host, "allreduce_data host tensor (moved for the backend and back)")
    g = x.clone()
    same(dd.comm.allreduce_with_indicator(g, 1), x, "allreduce_with_indicator 1")
    g = x.clone()
    same(dd.comm.allreduce_with_indicator(g, torch.tensor(1.0, device=dev)), x, "allreduce_with_indicator tensor")
    g = x.clone()
    same(dd.comm.allreduce_with_indicator(g, 0), torch.zeros_like(x), "allreduce_with_indicator 0")
    dd.barrier()
    done.append("barrier")
    obj = {"a": [1, 2], "b": "x"}
    assert dd.broadcast_object(obj) == obj, "broadcast_object"
    assert dd.comm.broadcast_object_list([obj, 3]) == [obj, 3], "broadcast_object_list"
    assert dd.comm.allgather_object(obj) == [obj], "allgather_object"
    assert dd.comm.allreduce_object(5) == 5, "allreduce_object"
    assert dd.comm.allreduce_object_async(5).result(timeout=30) == 5, "allreduce_object_async"
    done += [
        "broadcast_object",
        "broadcast_object_list",
        "allgather_object",
        "allreduce_object",
        "allreduce_object_async",
    ]
    dd.comm.health_check(timeout=30)
    done.append("health_check")
    net = nn.Linear(3, 2).to(dev)
    dd.comm.check_consistency(net)
    dd.comm.check_consistency([p.detach() for p in net.parameters()])
    done.append("check_consistency")
    dd.comm.set_debug(True)  # the debug link checks every collective across ranks first
    try:
        t = x.clone()
        dd.allreduce(t, op="avg")
        same(t, x, "allreduce under set_debug(True)")
        assert dd.broadcast_object(obj) == obj, "broadcast_object under set_debug(True)"
    finally:
        dd.comm.set_debug(False)
    assert dd.comm.comm_device() == dev, f"comm_device() is {dd.comm.comm_device()}, expected {dev}"
    done.append("comm_device")
    if backend == "nccl":
        assert dd.comm.resolve_device("auto") == dev, (
            f"resolve_device('auto') is {dd.comm.resolve_device('auto')} under nccl"
        )
        assert dd.comm.backend_device_types() == frozenset({"cuda"}), f"nccl moves {dd.comm.backend_device_types()}"
        try:
            dd.allreduce(torch.ones(2))
        except dd.comm.DeviceMismatchError:
            done.append("host tensor refused")
        else:
            raise AssertionError("a host tensor on nccl was not refused with DeviceMismatchError")
    return done


def check_nccl_collectives(ctx: Ctx) -> list[dict[str, str]]:
    with world_of_one(ctx) as backend:
        dev = _rank_device(ctx.device)
        done = collectives_world_of_one(dev, backend)
    name = "nccl world of one: every ding_dist.comm collective, CUDA tensors"
    return [_stand_in(ctx, "c1", name, f"{len(done)} checks ok on {dev} ({backend})")]


def distribute_world_of_one(dev: torch.device) -> tuple[list[str], float]:
    """Each sync algorithm on a world of one against plain local training; returns (algorithms, max diff).

    Every algorithm must build on a world of one (each is local training there): one that raises fails the row.
    """
    ok, worst = [], 0.0
    x, y = torch.randn(16, 6, device=dev), torch.randn(16, 3, device=dev)
    for algorithm in dd.available_algorithms():
        net = small_mlp(seed=1).to(dev)
        local = copy.deepcopy(net)
        make_opt = (
            (lambda ps: dd.sync.QAdamOptimizer(ps, lr=1e-2, warmup_steps=2))
            if algorithm == "qadam"
            else (lambda ps: torch.optim.Adam(ps, lr=1e-2))
        )
        model, opt = dd.distribute(net, make_opt(net.parameters()), algorithm)
        opt_local = make_opt(local.parameters())
        for _ in range(4):
            for m, o in ((model, opt), (local, opt_local)):
                o.zero_grad()
                ((m(x) - y) ** 2).mean().backward()
                o.step()
        diff = (flat(model.parameters()) - flat(local.parameters())).abs().max().item()
        assert diff <= 1e-6, f"{algorithm}: max |distributed - local| {diff:.3g} on a world of one"
        assert {p.device for p in model.parameters()} == {dev}, f"{algorithm}: parameters left {dev}"
        worst = max(worst, diff)
        ok.append(algorithm)
    # non-finite gradients: the step is skipped and counted
    net = small_mlp(seed=2).to(dev)
    model, opt = dd.distribute(net, torch.optim.SGD(net.parameters(), lr=0.1))
    before = flat(model.parameters())
    model(x).sum().backward()
    next(model.parameters()).grad.view(-1)[0] = float("nan")
    opt.step()
    assert model.nonfinite_skips == 1, f"nonfinite_skips {model.nonfinite_skips} after a NaN gradient"
    assert torch.equal(flat(model.parameters()), before), "a step with a NaN gradient changed the parameters"
    model.switch_to("fp16")
    opt.zero_grad()
    model(x).sum().backward()
    opt.step()
    assert not torch.equal(flat(model.parameters()), before), "no update after switch_to('fp16')"
    # functional forms
    net(x).sum().backward()
    assert dd.sync_gradients(net) == 0, "sync_gradients on a world of one issued collectives"
    dd.broadcast_parameters(net)
    dd.sync.allreduce_parameters(net)
    return ok, worst


def check_nccl_distribute(ctx: Ctx) -> list[dict[str, str]]:
    with world_of_one(ctx) as backend:
        dev = _rank_device(ctx.device)
        ok, worst = distribute_world_of_one(dev)
    figure = (f"ran: {', '.join(ok)}; each = local training (max diff {worst:.2g}); nonfinite skip, switch_to, "
              f"sync_gradients, broadcast/allreduce_parameters ok on {dev} ({backend})")  # fmt: skip
    return [_stand_in(ctx, "c2", "nccl world of one: distribute, each algorithm", figure)]
