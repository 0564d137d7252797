"""Benchmark of the gradient synchronization engine against torch DDP and a per-parameter loop.

Per training step (zero_grad + forward + backward + sync + optimizer step) the median time of:
our engine with each algorithm, torch's DistributedDataParallel, DI-engine's per-parameter loop
(for each parameter: allreduce its gradient, then divide: two operations per tensor) and a
no-communication baseline, on (a) an MLP with 60 parameter tensors and ~5M parameters and (b) the
Nature-DQN conv net on 4x84x84 Atari frames (batch 32). Variants run side by side: interleaved in
rounds inside one run, so machine load drifts hit them alike. Bytes sent per step come from the
engine's counter. Optionally a bucket-size sweep (PNG plot) and a check that the compressed
algorithms still train a small regression problem.

Local mode (spawns both ranks on this machine over localhost gloo):
    python benchmarks/bench_sync.py --sweep --plot docs/img/sync_bucket_size.png --loss-check

One rank per host (MASTER_ADDR/MASTER_PORT from the environment), e.g. across a rate-limited link:
    two-hosts up 100mbit
    two-hosts run 1 python benchmarks/bench_sync.py --rank 1 --world-size 2 &
    two-hosts run 0 python benchmarks/bench_sync.py --rank 0 --world-size 2; wait
    two-hosts down
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ding_dist import comm
from ding_dist.sync import distribute

ALGORITHMS = ("gradient_allreduce", "fp16", "bf16", "bytegrad")
BASELINES = ("ddp", "per_param", "local")
EXTRA = {  # more variants of our engine: name -> (algorithm, options)
    "fp16_sg": ("fp16", {"method": "scatter_gather"}),
    "bf16_sg": ("bf16", {"method": "scatter_gather"}),
    "bytegrad_ef": ("bytegrad", {"error_feedback": True}),
    "sg_allreduce": ("sg_allreduce", {}),
    "bytegrad_p4": ("bytegrad", {"piece_mb": 4.0}),
}
DEFAULT_SWEEP_MB = (0.25, 1.0, 2.5, 5.0, 10.0, 25.0, 100.0)


# ---- models and data ----------------------------------------------------------------------------------
def make_mlp(width: int = 408, layers: int = 30) -> nn.Module:
    """30 Linear layers of 408x408 (+bias): 60 parameter tensors, 5.0M parameters."""
    torch.manual_seed(0)
    mods: list[nn.Module] = []
    for i in range(layers):
        mods.append(nn.Linear(width, width))
        if i < layers - 1:
            mods.append(nn.ReLU())
    return nn.Sequential(*mods)


def make_conv(actions: int = 6) -> nn.Module:
    """The Nature-DQN Q-network (1.7M parameters) on 4x84x84 frames."""
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(4, 32, 8, stride=4),
        nn.ReLU(),
        nn.Conv2d(32, 64, 4, stride=2),
        nn.ReLU(),
        nn.Conv2d(64, 64, 3, stride=1),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(3136, 512),
        nn.ReLU(),
        nn.Linear(512, actions),
    )


MODELS: dict[str, tuple[Callable[[], nn.Module], tuple[int, ...], int]] = {
    # name: (factory, input shape per sample, output size)
    "mlp": (make_mlp, (408,), 408),
    "conv": (make_conv, (4, 84, 84), 6),
}


def batches(name: str, batch: int, rank: int, n: int = 4) -> list[tuple[torch.Tensor, torch.Tensor]]:
    _, shape, n_out = MODELS[name]
    gen = torch.Generator().manual_seed(1000 + rank)
    return [(torch.randn(batch, *shape, generator=gen), torch.randn(batch, n_out, generator=gen)) for _ in range(n)]


# ---- variants -------------------------------------------------------------------------------------------
class Variant:
    """One way of training the model: a step function and, for our engine, the wrapped model."""

    def __init__(self, name: str, step: Callable[[torch.Tensor, torch.Tensor], None], model: Any = None) -> None:
        self.name, self.step, self.model = name, step, model
        self.times: list[float] = []


def _sgd(params) -> torch.optim.Optimizer:
    return torch.optim.SGD(params, lr=1e-4, momentum=0.9)


def build_variant(name: str, base: nn.Module, bucket_size_mb: float = 25.0) -> Variant:
    net = copy.deepcopy(base)
    loss_fn = nn.functional.mse_loss
    if name in BASELINES:
        if name == "ddp":
            net = torch.nn.parallel.DistributedDataParallel(net, bucket_cap_mb=bucket_size_mb)
        opt = _sgd(net.parameters())
        world = comm.get_world_size()
        params = list(net.parameters())

        def step(x: torch.Tensor, y: torch.Tensor) -> None:
            opt.zero_grad()
            loss_fn(net(x), y).backward()
            if name == "per_param":  # DI-engine's loop: two operations per tensor, nothing overlapped
                for p in params:
                    if p.grad is not None:
                        comm.allreduce(p.grad)
                        p.grad.div_(world)
            opt.step()

        return Variant(name, step)
    algorithm, options = EXTRA.get(name, (name, {}))
    model, opt = distribute(net, _sgd(net.parameters()), algorithm, bucket_size_mb=bucket_size_mb, **options)

    def step(x: torch.Tensor, y: torch.Tensor) -> None:
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()

    return Variant(name, step, model)


def run_side_by_side(variants: list[Variant], data, steps: int, warmup: int, rounds: int) -> None:
    """Interleave the variants: ``rounds`` rounds of ``steps // rounds`` timed steps each."""
    for v in variants:
        for i in range(warmup):
            v.step(*data[i % len(data)])
        if v.model is not None:
            v.model.reset_comm_stats()
    per_round = max(1, steps // rounds)
    for _ in range(rounds):
        for v in variants:
            for i in range(per_round):
                comm.barrier()
                t0 = time.perf_counter()
                v.step(*data[i % len(data)])
                v.times.append(time.perf_counter() - t0)


def summarize(variants: list[Variant]) -> dict[str, dict[str, float]]:
    out = {}
    for v in variants:
        entry = {"median_s": statistics.median(v.times), "steps": len(v.times)}
        if v.model is not None:
            stats = v.model.comm_stats()
            entry["bytes_per_step"] = stats["bytes_sent"] / len(v.times)
            entry["collectives_per_step"] = stats["collectives"] / len(v.times)
        out[v.name] = entry
    return out


# ---- the small regression problem ------------------------------------------------------------------
def regression_loss(algorithm: str, steps: int = 80) -> float:
    rank, world = comm.get_rank(), comm.get_world_size()
    gen = torch.Generator().manual_seed(7)
    x_all = torch.randn(512, 6, generator=gen)
    y_all = torch.tanh(x_all @ torch.randn(6, 3, generator=gen)) + 0.05 * torch.randn(512, 3, generator=gen)
    torch.manual_seed(11)
    net = nn.Sequential(nn.Linear(6, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 3))
    model, opt = distribute(net, torch.optim.Adam(net.parameters(), lr=1e-2), algorithm)
    shard = torch.arange(rank, 512, world)
    batch_gen = torch.Generator().manual_seed(1000 + rank)
    for _ in range(steps):
        idx = shard[torch.randint(len(shard), (32,), generator=batch_gen)]
        opt.zero_grad()
        nn.functional.mse_loss(model(x_all[idx]), y_all[idx]).backward()
        opt.step()
    with torch.no_grad():
        return nn.functional.mse_loss(model(x_all), y_all).item()


# ---- one rank's work ------------------------------------------------------------------------------------
def bench_rank(cfg: dict[str, Any]) -> dict[str, Any] | None:
    torch.set_num_threads(1)
    rank = comm.get_rank()
    result: dict[str, Any] = {"world_size": comm.get_world_size(), "config": cfg, "models": {}}
    for name in cfg["models"]:
        base = MODELS[name][0]()
        data = batches(name, cfg["batch"], rank)
        variants = [build_variant(v, base) for v in cfg["variants"]]
        run_side_by_side(variants, data, cfg["steps"], cfg["warmup"], cfg["rounds"])
        result["models"][name] = {
            "params": sum(p.numel() for p in base.parameters()),
            "tensors": len(list(base.parameters())),
            "variants": summarize(variants),
        }
        del variants
    if cfg["sweep"]:
        base = make_mlp()
        data = batches("mlp", cfg["batch"], rank)
        variants = [build_variant("gradient_allreduce", base, mb) for mb in cfg["sweep"]]
        for v, mb in zip(variants, cfg["sweep"]):
            v.name = f"{mb:g}"
        variants += [build_variant("ddp", base), build_variant("per_param", base)]
        run_side_by_side(variants, data, cfg["sweep_steps"], cfg["warmup"], cfg["rounds"])
        result["sweep"] = summarize(variants)
        result["sweep_buckets"] = {v.name: len(v.model.buckets) for v in variants if v.model is not None}
    if cfg["loss_check"]:
        result["loss"] = {algo: regression_loss(algo) for algo in ALGORITHMS}
    return result if rank == 0 else None


# ---- reporting --------------------------------------------------------------------------------------------
def report(result: dict[str, Any]) -> str:
    lines = [f"world size {result['world_size']}, torch threads 1 per rank, link: {result['config']['link']}"]
    for name, info in result["models"].items():
        v = info["variants"]
        ours = v.get("gradient_allreduce", {}).get("median_s")
        ddp = v.get("ddp", {}).get("median_s")
        full_bytes = v.get("gradient_allreduce", {}).get("bytes_per_step")
        lines.append(f"\n[{name}] {info['tensors']} tensors, {info['params'] / 1e6:.2f}M parameters")
        lines.append(f"{'variant':<20}{'median ms':>10}{'/ours':>8}{'/ddp':>8}{'MB/step':>10}{'bytes/fp32':>12}")
        for vname, e in v.items():
            med = e["median_s"]
            r_ours = f"{med / ours:.2f}" if ours else "-"
            r_ddp = f"{med / ddp:.2f}" if ddp else "-"
            mb = f"{e['bytes_per_step'] / 1e6:.2f}" if "bytes_per_step" in e else "-"
            rb = f"{e['bytes_per_step'] / full_bytes:.3f}" if "bytes_per_step" in e and full_bytes else "-"
            lines.append(f"{vname:<20}{med * 1e3:>10.1f}{r_ours:>8}{r_ddp:>8}{mb:>10}{rb:>12}")
        if ours and "per_param" in v:
            lines.append(f"per-parameter loop / ours: {v['per_param']['median_s'] / ours:.2f}x")
    if "sweep" in result:
        lines.append("\n[bucket-size sweep, mlp, gradient_allreduce]")
        base = result["sweep"].get("ddp", {}).get("median_s")
        for k, e in result["sweep"].items():
            nb = result["sweep_buckets"].get(k)
            label = f"{k} MB ({nb} buckets)" if nb else k
            lines.append(f"{label:<24}{e['median_s'] * 1e3:>10.1f} ms{e['median_s'] / base:>8.2f} x ddp")
    if "loss" in result:
        ref = result["loss"]["gradient_allreduce"]
        lines.append("\n[regression loss after 80 Adam steps]")
        for algo, loss in result["loss"].items():
            lines.append(f"{algo:<20}{loss:>10.5f}{loss / ref:>8.3f} x gradient_allreduce")
    return "\n".join(lines)


def plot_sweep(result: dict[str, Any], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sweep = result["sweep"]
    sizes = [k for k in sweep if k not in ("ddp", "per_param")]
    xs = [float(k) for k in sizes]
    ys = [sweep[k]["median_s"] * 1e3 for k in sizes]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(xs, ys, "o-", label="ding_dist gradient_allreduce")
    ax.axhline(sweep["ddp"]["median_s"] * 1e3, color="C1", ls="--", label="torch DDP (25 MB)")
    ax.axhline(sweep["per_param"]["median_s"] * 1e3, color="C3", ls=":", label="per-parameter loop")
    ax.set_xscale("log")
    ax.set_xlabel("bucket size (MB)")
    ax.set_ylabel("median step time (ms)")
    ax.set_title(f"MLP 5M params, 60 tensors, {result['world_size']} gloo ranks ({result['config']['link']})")
    ax.legend()
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp.png"
    fig.savefig(tmp, dpi=110)
    os.replace(tmp, path)


def _write_json(result: dict[str, Any], path: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f, indent=1)
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rank", type=int, help="this host's rank (host mode); omit to spawn all ranks locally")
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--models", default="mlp,conv")
    parser.add_argument("--variants", default=",".join(ALGORITHMS + BASELINES))
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--steps", type=int, default=20, help="timed steps per variant")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--sweep", action="store_true", help="bucket-size sweep on the MLP")
    parser.add_argument("--sweep-sizes", default=",".join(f"{s:g}" for s in DEFAULT_SWEEP_MB))
    parser.add_argument("--sweep-steps", type=int, default=12)
    parser.add_argument("--plot", default=None, help="PNG path for the sweep plot")
    parser.add_argument("--loss-check", action="store_true")
    parser.add_argument("--link", default=None, help="label for the report (default: localhost or MASTER_ADDR)")
    parser.add_argument("--json", default=None, help="write the raw results here")
    args = parser.parse_args(argv)
    for name in args.models.split(","):
        if name not in MODELS:
            parser.error(f"unknown model {name!r}; valid: {', '.join(MODELS)}")
    for name in args.variants.split(","):
        if name not in ALGORITHMS + BASELINES + tuple(EXTRA):
            parser.error(f"unknown variant {name!r}; valid: {', '.join(ALGORITHMS + BASELINES + tuple(EXTRA))}")
    if args.steps < 1 or args.rounds < 1 or args.world_size < 2:
        parser.error("--steps and --rounds must be >= 1 and --world-size >= 2")
    cfg = {
        "models": args.models.split(","),
        "variants": args.variants.split(","),
        "batch": args.batch,
        "steps": args.steps,
        "warmup": args.warmup,
        "rounds": args.rounds,
        "sweep": [float(s) for s in args.sweep_sizes.split(",")] if args.sweep else [],
        "sweep_steps": args.sweep_steps,
        "loss_check": args.loss_check,
        "link": args.link or (f"MASTER_ADDR={os.environ['MASTER_ADDR']}" if args.rank is not None else "localhost"),
    }
    if args.rank is None:
        result = comm.launch(bench_rank, args.world_size, cfg, timeout=1800)[0]
    else:
        comm.dist_init(backend="gloo", rank=args.rank, world_size=args.world_size)
        try:
            result = bench_rank(cfg)
        finally:
            comm.dist_finalize()
        if result is None:
            return 0
    print(report(result))
    if args.json:
        _write_json(result, args.json)
    if args.plot and "sweep" in result:
        plot_sweep(result, args.plot)
        print(f"\nplot written to {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
