"""``distribute(model, optimizer)`` hands every rank rank 0's optimizer state (real gloo ranks).

Each rank builds its optimizer with its own hyper-parameters and steps it a different number of times
on its own data before wrapping, so momentum buffers, Adam moments and step counters all differ. After
``distribute`` every rank must hold rank 0's state exactly (including "no state yet"), and 10
synchronized steps must give bitwise identical parameters on both ranks, equal to a one-process run
that replays rank 0's history and then steps on the average of both ranks' gradients.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from ding_dist import comm
from ding_dist.optim import FusedOptimizer
from ding_dist.sync import QAdamOptimizer, distribute

WORLD = 2
SYNCED_STEPS = 10


# ---- code shared by the ranks and the one-process reference (module level: run by comm.launch) ----------
def _net(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))


def _optimizer(name: str, net: nn.Module, rank: int) -> torch.optim.Optimizer:
    """Hyper-parameters differ per rank: rank 0's must win everywhere."""
    if name == "sgd":
        return torch.optim.SGD(net.parameters(), lr=0.05 + 0.01 * rank, momentum=0.9 - 0.2 * rank, weight_decay=0.01)
    if name == "adam":
        return torch.optim.Adam(net.parameters(), lr=1e-2 * (1 + rank), betas=(0.9, 0.99 - 0.01 * rank))
    if name == "fused_adam":
        return FusedOptimizer(torch.optim.Adam(net.parameters(), lr=1e-2 * (1 + rank)), do_flatten=True)
    if name == "qadam":
        return QAdamOptimizer(net.parameters(), lr=1e-2, weight_decay=0.01 * (1 + rank), warmup_steps=3)
    raise ValueError(name)


def _batch(gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(8, 6, generator=gen), torch.randn(8, 3, generator=gen)


def _loss(net: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return ((net(x) - y) ** 2).mean()


def _prestep(net: nn.Module, opt: torch.optim.Optimizer, rank: int, steps: int) -> None:
    gen = torch.Generator().manual_seed(500 + rank)
    for _ in range(steps):
        x, y = _batch(gen)
        opt.zero_grad()
        _loss(net, x, y).backward()
        opt.step()


def _flat(net: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1).clone() for p in net.parameters()])


def _snapshot(opt: torch.optim.Optimizer) -> dict:
    """The optimizer's state dict, tensors cloned (pickled back to the test)."""
    sd = opt.state_dict()
    state = {
        k: {n: (v.clone() if isinstance(v, torch.Tensor) else v) for n, v in s.items()} for k, s in sd["state"].items()
    }
    groups = [{k: v for k, v in g.items() if k != "params"} for g in sd["param_groups"]]
    extra = {k: v for k, v in sd.items() if k not in ("state", "param_groups")}
    return {"state": state, "groups": groups, "extra": extra}


def run(name: str, prestep: tuple[int, ...]) -> dict:
    """``prestep[r]``: optimizer steps rank ``r`` takes alone before ``distribute``."""
    rank = comm.get_rank()
    net = _net(seed=rank)
    opt = _optimizer(name, net, rank)
    _prestep(net, opt, rank, prestep[rank])
    model, opt = distribute(net, opt)
    after_wrap = _snapshot(opt)
    wrap_collectives = model.comm_stats()["collectives"]
    gen = torch.Generator().manual_seed(100 + rank)
    for _ in range(SYNCED_STEPS):
        x, y = _batch(gen)
        opt.zero_grad()
        _loss(model, x, y).backward()
        opt.step()
    return {
        "after_wrap": after_wrap,
        "wrap_collectives": wrap_collectives,
        "params": _flat(net),
        "steps_done": getattr(opt, "steps_done", None),
    }


def mismatched_optimizers() -> str | None:
    """Rank 0 passes SGD, rank 1 Adam: every rank must raise before any state is sent."""
    rank = comm.get_rank()
    net = _net(seed=0)
    opt = torch.optim.SGD(net.parameters(), lr=0.1) if rank == 0 else torch.optim.Adam(net.parameters())
    try:
        distribute(net, opt)
    except ValueError as exc:
        return str(exc)
    return None


CASES = {
    "sgd": ("sgd", (2, 3)),
    "adam": ("adam", (2, 3)),
    "sgd_lazy_rank0": ("sgd", (0, 3)),  # rank 0 has no state yet: nobody may keep any
    "adam_lazy_rank0": ("adam", (0, 2)),
    "fused_adam": ("fused_adam", (2, 3)),
    "qadam": ("qadam", (4, 1)),  # rank 0 is past warm-up, rank 1 is not: they must agree on the phase
}


def suite() -> dict:
    out = {key: run(name, prestep) for key, (name, prestep) in CASES.items()}
    out["mismatch"] = mismatched_optimizers()
    return out


def reference(name: str, prestep_rank0: int) -> torch.Tensor:
    """One process: rank 0's net and history, then steps on the two ranks' averaged gradient."""
    net = _net(seed=0)
    opt = _optimizer(name, net, rank=0)
    _prestep(net, opt, 0, prestep_rank0)
    gens = [torch.Generator().manual_seed(100 + r) for r in range(WORLD)]
    for _ in range(SYNCED_STEPS):
        grads = []
        for gen in gens:
            x, y = _batch(gen)
            opt.zero_grad()
            _loss(net, x, y).backward()
            grads.append([p.grad.clone() for p in net.parameters()])
        for p, g0, g1 in zip(net.parameters(), *grads):
            p.grad = g0 * (1.0 / WORLD) + g1 * (1.0 / WORLD)  # what gradient_allreduce computes on 2 ranks
        opt.step()
    return _flat(net)


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


# ---- the tests -------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def results():
    return comm.launch(suite, WORLD, timeout=180, comm_timeout=30)


@pytest.mark.parametrize("key", sorted(CASES))
def test_every_rank_holds_rank0_optimizer_state_after_wrap(results, key):
    name, prestep = CASES[key]
    net = _net(seed=0)
    expected = _optimizer(name, net, rank=0)
    _prestep(net, expected, 0, prestep[0])
    want = _snapshot(expected)
    for r in results:
        assert _same(r[key]["after_wrap"], want)
    assert (len(want["state"]) == 0) == (prestep[0] == 0)


@pytest.mark.parametrize("key", ["sgd", "adam", "sgd_lazy_rank0", "adam_lazy_rank0"])
def test_state_travels_in_one_broadcast_per_dtype(results, key):
    # the parameters' float32 broadcast, plus one float32 broadcast of all state tensors when there are any
    expected = 1 if key.endswith("lazy_rank0") else 2
    assert [r[key]["wrap_collectives"] for r in results] == [expected] * WORLD


def test_mismatched_optimizers_raise_on_every_rank(results):
    for r in results:
        assert r["mismatch"] == (
            "optimizers differ across ranks: rank 0 has [('SGD', [4])], rank 1 has [('Adam', [4])] "
            "(type and param-group sizes of each optimizer passed to distribute)"
        )


@pytest.mark.parametrize("key", sorted(CASES))
def test_synchronized_steps_stay_bitwise_identical(results, key):
    first = results[0][key]["params"]
    assert torch.equal(results[1][key]["params"], first)
    assert results[1][key]["steps_done"] == results[0][key]["steps_done"]


@pytest.mark.parametrize("key", ["sgd", "adam", "sgd_lazy_rank0", "adam_lazy_rank0", "fused_adam"])
def test_synchronized_steps_match_one_process_reference(results, key):
    name, prestep = CASES[key]
    assert torch.equal(results[0][key]["params"], reference(name, prestep[0]))
