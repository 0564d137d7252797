"""Small RL networks: our engine vs torch DDP vs one hand-written flat allreduce, 2 gloo ranks.

Run:  python benchmarks/bench_sync_small.py [--rounds 300] [--hidden 128] [--batch 64]

RL policies are tiny (DQN on CartPole: ~17k parameters), so a training step is bound by the latency
of one collective, not by bandwidth. This checks that the engine adds nothing on top of that floor:
per training step (zero_grad + forward + backward + sync + Adam step) the median time of the engine,
torch's DistributedDataParallel, a manual "flatten, one allreduce, unflatten" after backward, the
local step without communication, and one bare allreduce of the same number of floats. The variants
run interleaved, step by step, so they see the same machine load.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import ding_dist as dd


def _net(hidden: int) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(4, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, hidden), torch.nn.ReLU(),
        torch.nn.Linear(hidden, 2),
    )  # fmt: skip


def _step_fn(model: torch.nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor, manual: bool = False):
    params = list(model.parameters())

    def step() -> None:
        loss = model(x).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        if manual:
            flat = torch.cat([p.grad.reshape(-1) for p in params])
            dist.all_reduce(flat)
            flat /= dist.get_world_size()
            offset = 0
            for p in params:
                p.grad.copy_(flat[offset : offset + p.numel()].view_as(p))
                offset += p.numel()
        optimizer.step()

    return step


def _measure(rounds: int, hidden: int, batch: int) -> dict:
    x = torch.randn(batch, 4)
    variants = {}
    net = _net(hidden)
    model, opt = dd.distribute(net, torch.optim.Adam(net.parameters()))
    variants["ours"] = _step_fn(model, opt, x)
    net = _net(hidden)
    variants["torch DDP"] = _step_fn(DistributedDataParallel(net), torch.optim.Adam(net.parameters()), x)
    net = _net(hidden)
    variants["manual flat allreduce"] = _step_fn(net, torch.optim.Adam(net.parameters()), x, manual=True)
    net = _net(hidden)
    variants["local (no sync)"] = _step_fn(net, torch.optim.Adam(net.parameters()), x)
    n_params = sum(p.numel() for p in net.parameters())
    floats = torch.ones(n_params)
    variants["bare allreduce"] = lambda: dist.all_reduce(floats)
    names = list(variants)
    times: dict[str, list[float]] = {name: [] for name in names}
    for i in range(rounds):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            start = time.perf_counter()
            variants[name]()
            times[name].append(time.perf_counter() - start)
    warm = rounds // 10
    return {"params": n_params, "ms": {k: statistics.median(v[warm:]) * 1e3 for k, v in times.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()
    result = dd.launch(_measure, 2, args.rounds, args.hidden, args.batch, timeout=1800)[0]
    ms = result["ms"]
    print(f"2 gloo ranks, MLP with {result['params']} parameters, batch {args.batch}, median of {args.rounds} steps")
    print(f"{'variant':<24}{'ms/step':>10}{'/ ours':>10}")
    for name, value in ms.items():
        print(f"{name:<24}{value:>10.3f}{value / ms['ours']:>10.2f}")
    sync = ms["ours"] - ms["local (no sync)"]
    print(f"sync cost of ours: {sync:.3f} ms/step = {sync / ms['bare allreduce']:.2f}x one bare allreduce")


if __name__ == "__main__":
    main()
