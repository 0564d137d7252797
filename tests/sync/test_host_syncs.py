"""The engine never reads a device value back to the host in backward, and at most once per step.

A read-back (``.item()``, ``.tolist()``, ``bool(t)``, ...) makes the host wait for the device, i.e.
for the collectives; torch DDP never does so in backward. Two instruments count them, on CPU tensors:

- a ``TorchDispatchMode`` sees ``aten._local_scalar_dense``, what ``.item()``, ``bool(t)``,
  ``float(t)`` dispatch to; the mode is active inside autograd hooks and callbacks too;
- ``.tolist()`` on a CPU tensor reads memory without reaching the dispatcher, and a
  ``TorchFunctionMode`` (which would see the method) is not active inside backward; so the sync
  package reads in bulk only through ``read_host``, which counts its reads (``host_reads``), and a
  source check keeps every ``.tolist()``/``.numpy()`` of the package inside it.

Each count is compared with the same model and optimizer run locally, without ``distribute``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

import ding_dist.sync
from ding_dist import comm
from ding_dist.sync import QAdamOptimizer, distribute
from ding_dist.sync.bucket import host_reads, read_host

WORLD = 2
STEPS = 4


class _ScalarReads(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten._local_scalar_dense.default:
            self.count += 1
        return func(*args, **(kwargs or {}))


def _reads(fn) -> int:
    """Device-to-host reads made by ``fn()``: scalar reads plus ``read_host``'s bulk reads."""
    before = host_reads()
    with _ScalarReads() as scalars:
        fn()
    return scalars.count + host_reads() - before


class _Heads(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.body = nn.Sequential(nn.Linear(6, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh())
        self.head = nn.Linear(32, 3)
        self.other = nn.Linear(32, 3)

    def forward(self, x: torch.Tensor, use_other: bool = False) -> torch.Tensor:
        h = self.body(x)
        return self.head(h) + self.other(h) if use_other else self.head(h)


def _optimizer(name: str, net: nn.Module) -> torch.optim.Optimizer:
    if name == "qadam":
        return QAdamOptimizer(net.parameters(), lr=1e-2, warmup_steps=2)
    return torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)


def count_reads(algorithm: str, opt_name: str, partial: bool = False, **options) -> list[dict[str, int]]:
    """Per step: host reads in backward and in ``optimizer.step()``, distributed vs local."""
    rank = comm.get_rank()
    out = []
    net, local = _Heads(), _Heads()
    model, opt = distribute(net, _optimizer(opt_name, net), algorithm, bucket_size_mb=0.002, **options)
    local_opt = _optimizer(opt_name, local)
    gen = torch.Generator().manual_seed(rank)
    for _ in range(STEPS):
        x, y = torch.randn(8, 6, generator=gen), torch.randn(8, 3, generator=gen)
        use_other = partial and rank == 1  # partial: rank 0 gives `other` no gradient at all
        row = {}
        for key, m, o in (("ours", model, opt), ("local", local, local_opt)):
            o.zero_grad()
            loss = ((m(x, use_other) if partial else m(x, True)) - y).pow(2).mean()
            row[f"{key}_backward"] = _reads(loss.backward)
            row[f"{key}_step"] = _reads(o.step)
        out.append(row)
    return out


CASES = {
    "gradient_allreduce": ("gradient_allreduce", "sgd", {}),
    "fp16": ("fp16", "sgd", {}),
    "bf16": ("bf16", "sgd", {}),
    "bf16_sg": ("bf16", "sgd", {"method": "scatter_gather"}),
    "bytegrad_ef": ("bytegrad", "sgd", {"error_feedback": True}),
    "sg_allreduce": ("sg_allreduce", "sgd", {}),
    "qadam": ("qadam", "qadam", {}),  # steps 3 and 4 run after warm-up (8-bit momentum)
}


def suite() -> dict:
    out = {key: count_reads(algo, opt, **options) for key, (algo, opt, options) in CASES.items()}
    out["partial"] = count_reads("gradient_allreduce", "sgd", partial=True)
    out["partial_bytegrad"] = count_reads("bytegrad", "sgd", partial=True)
    return out


@pytest.fixture(scope="module")
def results():
    return comm.launch(suite, WORLD, timeout=180, comm_timeout=30)


def test_instruments_see_reads_inside_backward():
    t = torch.arange(3.0)
    assert _reads(lambda: t.sum().item()) == 1
    assert _reads(lambda: bool(t[0] == 0)) == 1
    assert _reads(lambda: read_host([t, t[:1]])) == 1  # one read per device
    assert _reads(lambda: t + 1) == 0
    w = nn.Parameter(torch.ones(3))

    def hook(p: torch.Tensor) -> None:
        p.grad.sum().item()

    w.register_post_accumulate_grad_hook(hook)
    assert _reads(lambda: (w * 2).sum().backward()) == 1  # the dispatch mode reaches autograd hooks


def test_bulk_reads_of_the_sync_package_all_go_through_read_host():
    root = Path(ding_dist.sync.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.Attribute) and node.attr in ("tolist", "numpy"):
                    found.append((path.name, fn.name, node.attr))
    assert found == [("bucket.py", "read_host", "tolist")]


@pytest.mark.parametrize("key", sorted(CASES))
def test_no_read_in_backward_and_one_per_step(results, key):
    for r in results:
        for step in r[key]:
            assert step["ours_backward"] == 0 and step["local_backward"] == 0
            assert step["ours_step"] == step["local_step"] + 1  # the non-finite verdict, read once


@pytest.mark.parametrize("key", ["partial", "partial_bytegrad"])
def test_partial_backward_reads_the_counts_once(results, key):
    # rank 0 produced no gradient for `other`: it must learn whether another rank did (rank 1 did)
    for rank, r in enumerate(results):
        for step in r[key]:
            assert step["ours_backward"] == (1 if rank == 0 else 0)
            assert step["ours_step"] == step["local_step"] + 1


def test_world_of_one_reads_once_per_step():
    net, local = _Heads(), _Heads()
    model, opt = distribute(net, _optimizer("sgd", net))
    local_opt = _optimizer("sgd", local)
    x, y = torch.randn(8, 6), torch.randn(8, 3)
    reads = {}
    for key, m, o in (("ours", model, opt), ("local", local, local_opt)):
        o.zero_grad()
        loss = (m(x, True) - y).pow(2).mean()
        reads[key] = (_reads(loss.backward), _reads(o.step))
    assert reads["ours"] == (0, reads["local"][1] + 1)  # the check in optimizer.step(): one read
