"""Small networks: our engine vs torch DDP vs one hand-written flat allreduce, 2 gloo ranks.

Run:  python benchmarks/bench_sync_small.py [--rounds 3000] [--rows bagua,mlp,minatar] [--hidden 128] [--batch 64]

RL policies are tiny, so a training step is bound by the latency of one collective, not by bandwidth, and
whatever the engine does per step on top of it shows. Two rows:

- ``bagua``: Bagua's test network (2 -> 10 -> 50 -> 4, 770 parameters), SGD lr 0.01, batch 4, MSE, the
  network and settings of Bagua's ``test_model_switch``;
- ``mlp``: a DQN-sized MLP (4 -> 128 -> 128 -> 2, 17k parameters), Adam, batch 64;
- ``minatar`` (not in the default rows): the MinAtar network of the PPO and DQN rows (a 16-filter 3x3 conv on a
  6x10x10 0/1 grid, a 128-unit layer, 6 outputs: 133k parameters), Adam, batch ``--batch`` per rank (512 is
  SpaceInvaders PPO's minibatch of 1,024 on 2 ranks).

Per training step (zero_grad + forward + backward + sync + optimizer step): the engine (default options: the
non-finite skip is on), the engine without the non-finite check, torch's DistributedDataParallel, a manual
"flatten, one allreduce, unflatten" after backward, the local step without communication, and one bare
allreduce of the same number of floats. The variants run interleaved, step by step (the order rotates each
round), so they see the same machine load; the ratio column is the median over rounds of each variant's time
divided by DDP's time in the same round (robust to load that drifts), the ms column the plain median.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

import ding_dist as dd


class BaguaNet(nn.Module):
    """Bagua's test network: 2 -> 10 (no bias) -> 50 -> 4 (no bias), ReLU, softmax."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(2, 10, bias=False)
        self.fc2 = nn.Linear(10, 50, bias=True)
        self.fc3 = nn.Linear(50, 4, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x))))), dim=1)


def _mlp(hidden: int) -> nn.Module:
    return nn.Sequential(
        nn.Linear(4, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 2)
    )  # fmt: skip


def _row(name: str, hidden: int, batch: int) -> tuple[Callable[[], nn.Module], Callable, torch.Tensor, torch.Tensor]:
    """(network factory, optimizer factory, inputs, targets) of a row."""
    gen = torch.Generator().manual_seed(0)
    if name == "bagua":
        return BaguaNet, lambda ps: torch.optim.SGD(ps, lr=0.01), torch.randn(4, 2, generator=gen), torch.randn(4, 4)
    if name == "minatar":
        from ding_dist.policy.encoders import MinAtarCNN

        def minatar_net() -> nn.Module:
            return nn.Sequential(MinAtarCNN((6, 10, 10)), nn.Linear(128, 6))

        grid = (torch.rand(batch, 6, 10, 10, generator=gen) < 0.2).to(torch.uint8)
        return minatar_net, lambda ps: torch.optim.Adam(ps), grid, torch.zeros(batch, 6)
    x = torch.randn(batch, 4, generator=gen)
    return lambda: _mlp(hidden), lambda ps: torch.optim.Adam(ps), x, torch.zeros(batch, 2)


def _step_fn(model: nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor, manual=False):
    params = list(model.parameters())

    def step() -> None:
        optimizer.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
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


def _measure(rounds: int, rows: list[str], hidden: int, batch: int) -> dict:
    out = {}
    for row in rows:
        make_net, make_opt, x, y = _row(row, hidden, batch)

        def fresh(make_net: Callable[[], nn.Module] = make_net) -> nn.Module:
            torch.manual_seed(0)
            return make_net()

        variants: dict[str, Callable[[], None]] = {}
        net = fresh()
        variants["ours"] = _step_fn(*dd.distribute(net, make_opt(net.parameters())), x, y)
        net = fresh()
        variants["ours, no NaN check"] = _step_fn(
            *dd.distribute(net, make_opt(net.parameters()), skip_nonfinite=False), x, y
        )
        net = fresh()
        variants["torch DDP"] = _step_fn(DistributedDataParallel(net), make_opt(net.parameters()), x, y)
        net = fresh()
        variants["manual flat allreduce"] = _step_fn(net, make_opt(net.parameters()), x, y, manual=True)
        net = fresh()
        variants["local (no sync)"] = _step_fn(net, make_opt(net.parameters()), x, y)
        n_params = sum(p.numel() for p in net.parameters())
        floats = torch.ones(n_params)
        variants["bare allreduce"] = lambda f=floats: dist.all_reduce(f)
        names = list(variants)
        times: dict[str, list[float]] = {name: [] for name in names}
        for i in range(rounds):
            for name in names[i % len(names) :] + names[: i % len(names)]:
                start = time.perf_counter()
                variants[name]()
                times[name].append(time.perf_counter() - start)
        warm = rounds // 10
        ddp = times["torch DDP"][warm:]
        out[row] = {
            "params": n_params,
            "ms": {k: statistics.median(v[warm:]) * 1e3 for k, v in times.items()},
            "ratio": {k: statistics.median(a / b for a, b in zip(v[warm:], ddp)) for k, v in times.items()},
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3000)
    parser.add_argument("--rows", default="bagua,mlp", help="comma-separated: bagua, mlp, minatar")
    parser.add_argument("--hidden", type=int, default=128, help="hidden width of the mlp row")
    parser.add_argument("--batch", type=int, default=64, help="batch of the mlp row")
    args = parser.parse_args()
    rows = [r.strip() for r in args.rows.split(",") if r.strip()]
    unknown = sorted(set(rows) - {"bagua", "mlp", "minatar"})
    if unknown:
        parser.error(f"unknown rows {unknown}; choose from bagua, mlp, minatar")
    results = dd.launch(_measure, 2, args.rounds, rows, args.hidden, args.batch, timeout=3600)[0]
    for row, result in results.items():
        what = {
            "bagua": "Bagua's test network, SGD, batch 4",
            "mlp": f"MLP 4-{args.hidden}-{args.hidden}-2, Adam, batch {args.batch}",
            "minatar": f"MinAtar network, Adam, batch {args.batch} per rank",
        }[row]
        print(f"2 gloo ranks, {what} ({result['params']} parameters), {args.rounds} interleaved rounds")
        print(f"{'variant':<24}{'ms/step':>10}{'/ DDP':>10}")
        for name, value in result["ms"].items():
            print(f"{name:<24}{value:>10.3f}{result['ratio'][name]:>10.3f}")
        ms = result["ms"]
        sync = ms["ours"] - ms["local (no sync)"]
        print(f"sync cost of ours: {sync:.3f} ms/step = {sync / ms['bare allreduce']:.2f}x one bare allreduce\n")


if __name__ == "__main__":
    main()
