"""optimizer.step() time: FusedOptimizer(do_flatten=True) vs the plain torch optimizer.

Run:  python benchmarks/bench_fused_optimizer.py [--layers 60] [--width 32] [--repeats 15] [--device cpu]

The model is a stack of ``layers`` Linear(width, width) layers (2 * layers small parameter tensors, the
shape of typical RL networks). For Adam and SGD with momentum it times ``step()`` in two situations:

* ``in-place grads``: gradients persist between steps (``zero_grad(set_to_none=False)``); the fused
  optimizer finds them already in its flat gradient buffer;
* ``fresh grads``: every step starts from new gradient tensors, as after ``zero_grad()`` (set_to_none, the
  torch default) and backward; the fused optimizer first copies them into its flat buffer (one ``cat``).

Fused and unfused steps run in alternating blocks so both see the same machine load; the script prints
the median time per step of each and the ratio fused / unfused (below 1 means fused is faster).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch import nn

from ding_dist.optim import FusedOptimizer

OPTIMIZERS = {
    "adam": (torch.optim.Adam, dict(lr=1e-3)),
    "sgd_momentum": (torch.optim.SGD, dict(lr=1e-2, momentum=0.9)),
}


def make_model(layers: int, width: int, device: str) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(*[nn.Linear(width, width) for _ in range(layers)]).to(device)


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_block(
    model: nn.Module, opt: torch.optim.Optimizer, grads: list[torch.Tensor], fresh: bool, iters: int
) -> float:
    """Seconds per step(); with ``fresh`` each step gets newly allocated gradient tensors (not timed)."""
    params = list(model.parameters())
    total = 0.0
    for _ in range(iters):
        if fresh or params[0].grad is None:
            for p, g in zip(params, grads):
                p.grad = g.clone()
        _sync(str(grads[0].device))
        start = time.perf_counter()
        opt.step()
        _sync(str(grads[0].device))
        total += time.perf_counter() - start
    return total / iters


def bench(name: str, layers: int, width: int, device: str, fresh: bool, repeats: int, iters: int) -> dict:
    cls, kwargs = OPTIMIZERS[name]
    plain_model, fused_model = make_model(layers, width, device), make_model(layers, width, device)
    plain = cls(plain_model.parameters(), **kwargs)
    fused = FusedOptimizer(cls(fused_model.parameters(), **kwargs), do_flatten=True)
    gen = torch.Generator().manual_seed(1)
    grads = [torch.randn(p.shape, generator=gen).to(device) for p in plain_model.parameters()]
    for opt, model in ((plain, plain_model), (fused, fused_model)):  # warm up: state allocation, caches
        time_block(model, opt, grads, fresh, 3)
    plain_times, fused_times = [], []
    for _ in range(repeats):
        plain_times.append(time_block(plain_model, plain, grads, fresh, iters))
        fused_times.append(time_block(fused_model, fused, grads, fresh, iters))
    for a, b in zip(plain_model.parameters(), fused_model.parameters()):  # same math, same result
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    plain_ms, fused_ms = statistics.median(plain_times) * 1e3, statistics.median(fused_times) * 1e3
    return dict(plain_ms=plain_ms, fused_ms=fused_ms, ratio=fused_ms / plain_ms)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=60, help="Linear layers (2 parameter tensors each)")
    parser.add_argument("--width", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=15, help="alternating timing blocks per variant")
    parser.add_argument("--iters", type=int, default=10, help="steps per timing block")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    n_tensors = 2 * args.layers
    n_elems = args.layers * (args.width * args.width + args.width)
    print(
        f"device={args.device} threads={args.threads} torch={torch.__version__} "
        f"tensors={n_tensors} elements={n_elems} repeats={args.repeats}x{args.iters} steps"
    )
    print(f"{'optimizer':<14}{'grads':<17}{'unfused ms':>12}{'fused ms':>12}{'fused/unfused':>15}")
    for name in OPTIMIZERS:
        for fresh in (False, True):
            r = bench(name, args.layers, args.width, args.device, fresh, args.repeats, args.iters)
            label = "fresh grads" if fresh else "in-place grads"
            print(f"{name:<14}{label:<17}{r['plain_ms']:>12.3f}{r['fused_ms']:>12.3f}{r['ratio']:>15.3f}")


if __name__ == "__main__":
    main()
