"""``hierarchical=True`` (gradient_allreduce, bytegrad) and hierarchical ``local_sgd`` on 4 gloo ranks
declared as 2 nodes of 2 (``LOCAL_WORLD_SIZE=2``, ``LOCAL_RANK=rank % 2``).

``ding_dist.launch`` starts its ranks with the environment of its process server, so each rank
re-initializes its process group with those variables set (``dist_finalize``, then ``dist_init``: the
launcher's settings are read again, as under torchrun).

Tolerances (docs/sync.md): hierarchical ``gradient_allreduce`` equals the flat one within 1e-6 after 10
SGD steps (a different order of additions), bitwise when every partial sum is exact; ``bytegrad``
hierarchical within 0.1 of full-precision ``gradient_allreduce`` after 20 Adam steps (as flat
``bytegrad``), its partial-pass average within 2 % of the gradients' range.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
from torch import nn

from ding_dist import comm
from ding_dist.comm import free_port, launch
from ding_dist.sync import distribute

from .test_async_local_sgd import LR, local_sgd_reference

NODES, LOCAL = 2, 2
BYTEGRAD_PARAM_TOL = 0.1
BYTEGRAD_PARTIAL_TOL = 0.02


def _reinit(port: int, local_size: int) -> None:
    rank, world = comm.get_rank(), comm.get_world_size()
    comm.barrier()  # every rank is done with the old group (rank 0 serves its store) before it goes
    comm.dist_finalize()
    os.environ["LOCAL_WORLD_SIZE"] = str(local_size)
    os.environ["LOCAL_RANK"] = str(rank % local_size)
    comm.dist_init(backend="gloo", addr="127.0.0.1", port=port, rank=rank, world_size=world, timeout=30)


def _flat(params) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1).clone() for p in params])


def _linear_sgd(algorithm: str, data: list[tuple[torch.Tensor, torch.Tensor]], loss_fn, **options) -> dict:
    torch.manual_seed(0)
    net = nn.Linear(4, 1)
    opt = torch.optim.SGD(net.parameters(), lr=LR)
    model, opt = distribute(net, opt, algorithm, **options)
    w0 = _flat(net.parameters())
    model.reset_comm_stats()
    for x, y in data:
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
    stats = model.comm_stats()
    model.close()
    return {"w0": w0, "w": _flat(net.parameters()), "stats": stats}


def _mse(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return ((out - y) ** 2).mean()


def _sum(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return out.sum()


class Heads(nn.Module):
    """Ranks 0-2 use ``a`` (2 producers on node 0, 1 on node 1), rank 3 uses ``b``; ``never`` is unused."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(1)
        self.trunk = nn.Linear(4, 8)
        self.a = nn.Linear(8, 2)
        self.b = nn.Linear(8, 2)
        self.never = nn.Linear(8, 2)

    def forward(self, x: torch.Tensor, head: str) -> torch.Tensor:
        return getattr(self, head)(torch.tanh(self.trunk(x)))


def _partial_grads(algorithm: str, **options) -> dict:
    rank = comm.get_rank()
    net = Heads()
    model, _ = distribute(net, None, algorithm, **options)
    gen = torch.Generator().manual_seed(7 + rank)
    model(torch.randn(16, 4, generator=gen), "a" if rank < 3 else "b").pow(2).mean().backward()
    grads = {name: (None if p.grad is None else p.grad.clone()) for name, p in net.named_parameters()}
    model.close()
    return grads


def _mlp_adam(algorithm: str, steps: int = 20, **options) -> torch.Tensor:
    rank = comm.get_rank()
    torch.manual_seed(3)
    net = nn.Sequential(nn.Linear(6, 32), nn.Tanh(), nn.Linear(32, 3))
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    model, opt = distribute(net, opt, algorithm, **options)
    gen = torch.Generator().manual_seed(100 + rank)
    for _ in range(steps):
        x, y = torch.randn(16, 6, generator=gen), torch.randn(16, 3, generator=gen)
        opt.zero_grad()
        ((model(x) - y) ** 2).mean().backward()
        opt.step()
    model.close()
    return _flat(net.parameters())


def _local_sgd_data(rank: int, steps: int = 10) -> list[tuple[torch.Tensor, torch.Tensor]]:
    gen = torch.Generator().manual_seed(50 + rank)
    return [(torch.randn(8, 4, generator=gen), torch.randn(8, 1, generator=gen)) for _ in range(steps)]


def suite(port: int) -> dict:
    _reinit(port, LOCAL)
    rank = comm.get_rank()
    out: dict = {"local": (comm.get_local_rank(), comm.get_local_size())}
    gen = torch.Generator().manual_seed(10 + rank)
    data = [(torch.randn(8, 4, generator=gen), torch.randn(8, 1, generator=gen)) for _ in range(10)]
    exact = [(torch.randint(-4, 5, (8, 4), generator=gen).float(), torch.zeros(8, 1)) for _ in range(10)]
    out["flat"] = _linear_sgd("gradient_allreduce", data, _mse)
    out["hier"] = _linear_sgd("gradient_allreduce", data, _mse, hierarchical=True)
    out["flat_exact"] = _linear_sgd("gradient_allreduce", exact, _sum)
    out["hier_exact"] = _linear_sgd("gradient_allreduce", exact, _sum, hierarchical=True)
    out["data"] = {"x": torch.stack([x for x, _ in data]), "y": torch.stack([y for _, y in data])}
    out["partial_flat"] = _partial_grads("gradient_allreduce")
    out["partial_hier"] = _partial_grads("gradient_allreduce", hierarchical=True)
    out["partial_bytegrad"] = _partial_grads("bytegrad", hierarchical=True)
    out["adam_allreduce"] = _mlp_adam("gradient_allreduce")
    out["adam_bytegrad"] = _mlp_adam("bytegrad", hierarchical=True)
    out["adam_bytegrad_ef"] = _mlp_adam("bytegrad", hierarchical=True, error_feedback=True)
    ldata = _local_sgd_data(rank)
    out["ldata"] = {"x": torch.stack([x for x, _ in ldata]), "y": torch.stack([y for _, y in ldata])}
    out["local_12_w2"] = _linear_sgd("local_sgd", ldata, _mse, warmup_steps=2, periods={2: 1, 4: 3})
    out["local_22_44"] = _linear_sgd("local_sgd", ldata, _mse, periods={2: 2, 4: 4})
    # one node of 4: hierarchical is the flat algorithm (one collective per step)
    _reinit(port + 1, 4)
    out["one_node"] = _linear_sgd("gradient_allreduce", data, _mse, hierarchical=True)
    # 3 ranks per node do not divide 4: the same clear error on every rank, nothing hangs
    _reinit(port + 2, 3)
    try:
        distribute(nn.Linear(2, 2), None, "bytegrad", hierarchical=True)
        out["bad_layout"] = None
    except ValueError as exc:
        out["bad_layout"] = str(exc)
    return out


@pytest.fixture(scope="module")
def results():
    return launch(suite, NODES * LOCAL, free_port(), timeout=240, comm_timeout=30)


def test_ranks_see_two_nodes_of_two(results):
    assert [r["local"] for r in results] == [(0, 2), (1, 2), (0, 2), (1, 2)]


def test_hierarchical_takes_the_node_path(results):
    # one bucket, 10 steps: leaders reduce + allreduce + broadcast, the others reduce + broadcast
    assert [r["hier"]["stats"]["collectives"] for r in results] == [30, 20, 30, 20]
    assert [r["flat"]["stats"]["collectives"] for r in results] == [10] * 4
    assert [r["one_node"]["stats"]["collectives"] for r in results] == [10] * 4


def test_hierarchical_gradient_allreduce_equals_flat(results):
    for r in results:
        torch.testing.assert_close(r["hier"]["w"], r["flat"]["w"], rtol=0, atol=1e-6)
        assert torch.equal(r["hier_exact"]["w"], r["flat_exact"]["w"])  # exact partial sums: the same bits
        assert torch.equal(r["hier"]["w"], results[0]["hier"]["w"])  # and the same on every rank


def test_hierarchical_gradient_allreduce_matches_numpy_reference(results):
    runs = [{"w0": r["hier"]["w0"], "x": r["data"]["x"], "y": r["data"]["y"]} for r in results]
    expected = local_sgd_reference(runs, warmup=10, schedule=lambda s: [])  # 10 steps of gradient averaging
    np.testing.assert_allclose(results[0]["hier"]["w"].double().numpy(), expected[0], rtol=0, atol=1e-5)


def test_hierarchical_partial_pass_averages_over_producers(results):
    for r in results:
        flat, hier, quant = r["partial_flat"], r["partial_hier"], r["partial_bytegrad"]
        for name, g in flat.items():
            if name.startswith("never"):
                assert g is None and hier[name] is None and quant[name] is None
                continue
            torch.testing.assert_close(hier[name], g, rtol=0, atol=1e-6)
            spread = float(g.max() - g.min()) or 1.0
            assert float((quant[name] - g).abs().max()) <= BYTEGRAD_PARTIAL_TOL * spread, name
    for key in ("partial_hier", "partial_bytegrad"):
        first = results[0][key]
        assert all(torch.equal(r[key]["a.weight"], first["a.weight"]) for r in results)


@pytest.mark.parametrize("case", ["adam_bytegrad", "adam_bytegrad_ef"])
def test_hierarchical_bytegrad_close_to_allreduce(results, case):
    for r in results:
        err = float((r[case] - r["adam_allreduce"]).abs().max())
        assert err <= BYTEGRAD_PARAM_TOL, err
        assert torch.equal(r[case], results[0][case])


def _hierarchical_schedule(levels: dict[int, int], warmup: int, world: int):
    """torch's HierarchicalModelAverager: at s >= warmup, the largest period dividing s averages its groups."""

    def schedule(s: int) -> list[list[int]]:
        if s < warmup:
            return []
        for size, period in sorted(levels.items(), key=lambda kv: -kv[1]):
            if s % period == 0:
                return [list(range(start, start + size)) for start in range(0, world, size)]
        return []

    return schedule


@pytest.mark.parametrize(
    ("case", "levels", "warmup"), [("local_12_w2", {2: 1, 4: 3}, 2), ("local_22_44", {2: 2, 4: 4}, 0)]
)
def test_hierarchical_local_sgd_matches_numpy_reference(results, case, levels, warmup):
    runs = [{"w0": r[case]["w0"], "x": r["ldata"]["x"], "y": r["ldata"]["y"]} for r in results]
    expected = local_sgd_reference(runs, warmup, _hierarchical_schedule(levels, warmup, len(runs)))
    for rank, r in enumerate(results):
        np.testing.assert_allclose(r[case]["w"].double().numpy(), expected[rank], rtol=0, atol=1e-5)


def test_a_layout_that_does_not_fit_is_the_same_error_everywhere(results):
    messages = [r["bad_layout"] for r in results]
    assert all(m == messages[0] for m in messages)
    assert "same number of ranks on every node" in messages[0]
