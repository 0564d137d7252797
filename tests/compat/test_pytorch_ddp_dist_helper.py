"""``ding_dist.compat.pytorch_ddp_dist_helper``: DI-engine's helper names and behaviour, on real gloo ranks.

The main test runs :mod:`tests.compat.di_style` (code written against DI-engine's module, only the import
changed) under a torchrun-style environment on 2 processes, as DI-engine's DDP configs are started, on CPU.
"""

from __future__ import annotations

import datetime
import inspect
import os

import pytest
import torch
from easydict import EasyDict
from torch import nn

import ding_dist.comm as comm
from ding_dist.compat import pytorch_ddp_dist_helper as helper
from tests.compat import di_style

LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
DI_ENGINE_NAMES = (
    "get_rank get_world_size broadcast allgather broadcast_object_list allreduce allreduce_with_indicator "
    "allreduce_async reduce_data allreduce_data synchronize get_group dist_mode dist_init dist_finalize "
    "DistContext DDPContext simple_group_split to_ddp_config error_wrapper"
).split()


def _cfg() -> EasyDict:
    return EasyDict(seed=3, policy=dict(learn=dict(batch_size=64, learning_rate=0.1), collect=dict(n_sample=16)))


def _as_torchrun_rank(port: int, fn_name: str) -> dict:
    """Leave launch's group and start again from torchrun's variables, as `python -m torch.distributed.launch`."""
    rank, world = comm.get_rank(), comm.get_world_size()
    comm.dist_finalize()
    os.environ.update(
        RANK=str(rank),
        WORLD_SIZE=str(world),
        LOCAL_RANK=str(rank),
        LOCAL_WORLD_SIZE=str(world),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
    )
    try:
        out = getattr(di_style, fn_name)(_cfg())
        out["fake_after"] = comm.is_fake()  # DDPContext finalized the group it started
        return out
    finally:
        for name in LAUNCHER_VARS:
            os.environ.pop(name, None)


def _expected_training(iterations: int = 5, world: int = 2) -> tuple[torch.Tensor, torch.Tensor, float]:
    """The same learner loop on one process: rank 0's initial weights, gradients averaged over the ranks."""
    cfg = _cfg()
    torch.manual_seed(cfg.seed)
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=cfg.policy.learn.learning_rate)
    gens = [torch.Generator().manual_seed(100 + r) for r in range(world)]
    per_rank = cfg.policy.learn.batch_size // world
    losses: list[float] = []
    for _ in range(iterations):
        grads, losses = [], []
        for r in range(world):
            x = torch.randn(per_rank, 4, generator=gens[r])
            loss = (model(x) - 1.0).pow(2).mean()
            model.zero_grad()
            loss.backward()
            grads.append([p.grad.clone() for p in model.parameters()])
            losses.append(loss.item())
        for i, p in enumerate(model.parameters()):
            p.grad = (grads[0][i] + grads[1][i]) / world
        optimizer.step()
    mean_loss = ((torch.tensor([losses[0]]) + torch.tensor([losses[1]])) / world).item()
    return model.weight.detach(), model.bias.detach(), mean_loss


def test_di_engine_ddp_code_runs_on_two_cpu_ranks_with_only_the_import_changed(run_ranks):
    port = comm.free_port()
    results = run_ranks(_as_torchrun_rank, 2, port, "ddp_entry", heartbeat=False)
    weight, bias, mean_loss = _expected_training()
    for rank, out in enumerate(results):
        assert (out["rank"], out["world_size"]) == (rank, 2)
        assert (out["batch_size"], out["n_sample"]) == (32, 8)  # to_ddp_config edited the config in place
        torch.testing.assert_close(out["weight"], weight, rtol=1e-6, atol=0.0)
        torch.testing.assert_close(out["bias"], bias, rtol=1e-6, atol=0.0)
        assert out["log"]["total_loss"] == pytest.approx(mean_loss, rel=1e-6)  # averaged, not summed
        assert out["log"]["count"].tolist() == [1.0]  # the average of 1 and 1
        assert out["totals"] == (16, 4, 1.5)  # allreduce_data sums
        assert out["shared"] == (True, {"eval_episode_return": 195.0})
        assert out["fake_after"] is True
    assert torch.equal(results[0]["weight"], results[1]["weight"])
    assert torch.equal(results[0]["bias"], results[1]["bias"])


def _collective_semantics() -> dict:
    r = helper.get_rank()
    avg = torch.tensor([r + 1.0, 10.0 * (r + 1)])
    helper.allreduce(avg)
    summed = torch.tensor([r + 1.0])
    returned = helper.allreduce_data(summed, "sum")
    gathered = [torch.empty(2) for _ in range(helper.get_world_size())]
    helper.allgather(gathered, torch.tensor([float(r), -float(r)]))
    async_t = torch.tensor([2.0 * (r + 1)])
    handle = helper.allreduce_async("grad", async_t)
    handle.wait()
    one_grad = torch.tensor([2.0, 4.0]) if r == 0 else torch.zeros(2)
    one_flag = torch.tensor(1.0 if r == 0 else 0.0)
    helper.allreduce_with_indicator(one_grad, one_flag)
    both_grad, both_flag = torch.tensor([2.0, 4.0]) * (r + 1), torch.tensor([1.0])
    helper.allreduce_with_indicator(both_grad, both_flag)
    reduced_t = torch.tensor([r + 1.0])
    helper.reduce_data(reduced_t, 0)
    b = torch.tensor([7.0]) if r == 0 else torch.zeros(1)
    helper.broadcast(b, 0)
    return {
        "avg": avg.tolist(),
        "in_place": (returned is summed, summed.tolist()),
        "avg_data": helper.allreduce_data(r + 1.0, "avg"),
        "gathered": [t.tolist() for t in gathered],
        "async": async_t.tolist(),
        "one_contributor": (one_grad.tolist(), one_flag.item()),
        "two_contributors": (both_grad.tolist(), both_flag.tolist()),
        "reduce_number": helper.reduce_data(float(r + 1), 0),
        "reduce_tensor": reduced_t.tolist(),
        "broadcast": b.tolist(),
        "groups": (helper.get_group().size(), helper.get_group(1).size(), helper.simple_group_split(2, r, 2).size()),
    }


def test_collectives_behave_as_di_engine_on_two_ranks(run_ranks):
    results = run_ranks(_collective_semantics, 2)
    for rank, out in enumerate(results):
        assert out["avg"] == [1.5, 15.0]  # allreduce averages (ding_dist.allreduce sums)
        assert out["in_place"] == (True, [3.0])  # allreduce_data reduces a tensor in place and returns it
        assert out["avg_data"] == 1.5
        assert out["gathered"] == [[0.0, 0.0], [1.0, -1.0]]
        assert out["async"] == [3.0]  # divided first, then summed: the average of 2 and 4
        assert out["one_contributor"] == ([2.0, 4.0], 1.0)  # divided by the contributors, count left in the flag
        assert out["two_contributors"] == ([3.0, 6.0], [2.0])
        assert out["reduce_number"] == (3.0 if rank == 0 else 2.0)  # the sum on dst, own value elsewhere
        assert out["reduce_tensor"] == ([3.0] if rank == 0 else [2.0])
        assert out["broadcast"] == [7.0]
        assert out["groups"] == (2, 1, 1)


def _positional_init(port: int, backend: str) -> tuple:
    rank, world = comm.get_rank(), comm.get_world_size()
    comm.dist_finalize()
    # DI-engine's order: backend, addr, port (a str), rank, world_size, timeout (a timedelta)
    got = helper.dist_init(backend, "127.0.0.1", str(port), rank, world, datetime.timedelta(seconds=60))
    t = torch.tensor([float(rank)])
    helper.allreduce(t)
    used = str(torch.distributed.get_backend())
    helper.dist_finalize()
    return got, t.item(), used, comm.is_fake()


def test_dist_init_takes_di_engine_positional_arguments(run_ranks):
    results = run_ranks(_positional_init, 2, comm.free_port(), "gloo", heartbeat=False)
    assert results == [((0, 2), 0.5, "gloo", True), ((1, 2), 0.5, "gloo", True)]


@pytest.mark.skipif(torch.cuda.is_available(), reason="nccl is used as asked where CUDA exists")
def test_nccl_without_cuda_falls_back_to_gloo(run_ranks):
    results = run_ranks(_positional_init, 2, comm.free_port(), "nccl", heartbeat=False)
    assert [r[2] for r in results] == ["gloo", "gloo"]


def test_public_names_and_signatures_match_di_engine():
    missing = [name for name in DI_ENGINE_NAMES if not hasattr(helper, name)]
    assert missing == []
    assert list(inspect.signature(helper.dist_init).parameters) == [
        "backend",
        "addr",
        "port",
        "rank",
        "world_size",
        "timeout",
    ]
    assert list(inspect.signature(helper.allreduce_async).parameters) == ["name", "x"]
    assert list(inspect.signature(helper.reduce_data).parameters) == ["x", "dst"]
    assert list(inspect.signature(helper.allreduce_data).parameters) == ["x", "op"]
    assert list(inspect.signature(helper.simple_group_split).parameters) == ["world_size", "rank", "num_groups"]
    assert helper.DDPContext is helper.DistContext
    # DI-engine's synchronize is torch.cuda.synchronize: one optional argument, the device
    sync = inspect.signature(helper.synchronize).parameters
    assert list(sync) == ["device"] and sync["device"].default is None


def _fake_cuda(monkeypatch, available: bool, initialized: bool = True, count: int = 2) -> list:
    """Stand-in for torch.cuda's state: what ``torch.cuda.synchronize`` was called with."""
    calls: list = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: available)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: initialized)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: calls.append(device))
    return calls


def test_synchronize_passes_the_device_to_cuda(monkeypatch):
    calls = _fake_cuda(monkeypatch, available=True)
    helper.synchronize()
    helper.synchronize(None)
    helper.synchronize(1)
    helper.synchronize("cuda:0")
    helper.synchronize(torch.device("cuda", 1))
    helper.synchronize("cuda")
    helper.synchronize("cpu")  # nothing to wait for (torch.cuda.synchronize raises here)
    assert calls == [None, None, torch.device("cuda", 1), torch.device("cuda", 0), torch.device("cuda", 1)] + [
        torch.device("cuda")
    ]
    with pytest.raises(ValueError, match=r"device 2 does not exist; this machine has 2 GPU\(s\)"):
        helper.synchronize(2)
    with pytest.raises(ValueError, match="expected a CUDA or CPU device, got 'meta'"):
        helper.synchronize("meta")
    with pytest.raises(TypeError, match="device must be a torch.device, a str or an int, got True"):
        helper.synchronize(True)
    assert len(calls) == 6


def test_synchronize_without_cuda_returns_for_any_cuda_device(monkeypatch):
    calls = _fake_cuda(monkeypatch, available=False, initialized=False, count=0)
    for device in (None, 0, 3, "cuda:1", torch.device("cuda"), "cpu", torch.device("cpu")):
        helper.synchronize(device)
    assert calls == []
    calls = _fake_cuda(monkeypatch, available=True, initialized=False)  # CUDA not used yet: nothing queued
    helper.synchronize(1)
    helper.synchronize()
    assert calls == []


def test_single_process_runs_where_di_engine_raises():
    @helper.dist_mode
    def main() -> int:
        return helper.get_world_size() * 10

    assert main() == 10  # DI-engine's dist_init raises without a launcher, and its dist_mode drops the value
    with helper.DDPContext():
        cfg = _cfg()
        assert helper.to_ddp_config(cfg) is cfg
    assert cfg.policy.learn.batch_size == 64
    helper.synchronize()  # torch.cuda.synchronize in DI-engine: fails without CUDA
    with pytest.raises(ValueError, match="op must be 'sum' or 'avg'"):
        helper.allreduce_data(1.0, "max")
    with pytest.raises(TypeError, match="int, a float or a torch.Tensor"):
        helper.reduce_data("12", 0)
