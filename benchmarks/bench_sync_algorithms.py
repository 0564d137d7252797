"""Step time of every synchronization algorithm, relative to ``gradient_allreduce``, and with a straggler.

Per training step (zero_grad + forward + backward + sync + SGD-with-momentum step, one torch thread per
rank) on bench_sync.py's two models: (a) an MLP of 30 Linear 408x408 layers (60 tensors, 5.0M parameters)
and (b) the Nature-DQN conv net on 4x84x84 frames (1.7M parameters), batch 32 per rank.

A *block* is ``--steps`` consecutive steps of one variant, timed as a whole (barrier, then the steps; the
block's time / steps is its step time), so algorithms that communicate every k-th step (``local_sgd``
period 4, a ``communication_interval``) are charged their average step, not their cheap median step.
Every round runs one block of each variant, in an order that rotates by one each round (the same on
every rank), so load drifts hit the variants alike; the figure is the median over rounds of the block
step times (rank 0; every rank's medians are in ``--json``). ``async`` runs its background thread only
during its own blocks (``resume()`` before, ``abort()`` after, outside the timing). ``local`` is the
same step with no communication at all (the compute floor).

``--straggler``: the last rank sleeps after every step for as long as its own no-communication step
takes (measured on every rank at once right before each straggler block, so it follows load drifts),
so it is 2x slower per step. Every variant runs interleaved with and
without that sleep; the report gives the fast rank's (rank 0) steps per second with the straggler,
relative to ``gradient_allreduce``'s, relative to the slow rank's (1.0: the fast rank is bound to the slow
rank's pace; 2.0: it runs free at twice that pace), and relative to its own rate without the straggler.
Both ranks share this machine's cores, so while the slow rank sleeps the fast one may compute faster.

Local mode (spawns both ranks on this machine over localhost gloo):
    python benchmarks/bench_sync_algorithms.py --json /tmp/algos_local.json
    python benchmarks/bench_sync_algorithms.py --straggler --json /tmp/algos_straggler.json

One rank per host (MASTER_ADDR/MASTER_PORT from the environment), e.g. across a rate-limited link:
    bash benchmarks/two_hosts.sh bench_sync_algorithms.py 100mbit --json algos_100mbit.json

The plot (step time per algorithm, one panel per model, one bar per run given):
    python benchmarks/bench_sync_algorithms.py --plot docs/img/sync_algorithms.png \\
        --plot-from /tmp/algos_local.json,/tmp/algos_100mbit.json
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import time
from typing import Any

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_sync import MODELS, batches  # noqa: E402  (the same models and per-rank data as bench_sync.py)

from ding_dist import comm  # noqa: E402
from ding_dist.sync import distribute  # noqa: E402

# name -> (algorithm, options); None: no communication
VARIANTS: dict[str, tuple[str, dict[str, Any]] | None] = {
    "gradient_allreduce": ("gradient_allreduce", {}),
    "bytegrad": ("bytegrad", {}),
    "decentralized": ("decentralized", {}),  # topology complete, communication_interval 1
    "decentralized_i4": ("decentralized", {"communication_interval": 4}),
    "low_precision_decentralized": ("low_precision_decentralized", {}),
    "local_sgd": ("local_sgd", {"period": 4}),
    "async": ("async", {}),  # sync_interval_ms 500
    "local": None,
}
DEFAULT_VARIANTS = (
    "gradient_allreduce",
    "bytegrad",
    "decentralized",
    "low_precision_decentralized",
    "local_sgd",
    "async",
    "local",
)
REFERENCE = "gradient_allreduce"


class Variant:
    """One way of training the model: its step and, for ``async``, how to pause its thread."""

    def __init__(self, name: str, base: nn.Module, async_interval_ms: float) -> None:
        self.name = name
        net = copy.deepcopy(base)
        opt = torch.optim.SGD(net.parameters(), lr=1e-4, momentum=0.9)
        spec = VARIANTS[name]
        self.model: Any = net
        if spec is not None:
            algorithm, options = spec
            options = dict(options)
            if algorithm == "async":
                options["sync_interval_ms"] = async_interval_ms
            self.model, opt = distribute(net, opt, algorithm, **options)
        self.opt = opt
        self.is_async = spec is not None and spec[0] == "async"
        self.period = spec[1].get("period", spec[1].get("communication_interval", 1)) if spec else 1
        self.pause()
        # block step times in seconds, per condition ("plain" or "straggler")
        self.times: dict[str, list[float]] = {"plain": [], "straggler": []}

    def step(self, x: torch.Tensor, y: torch.Tensor) -> None:
        self.opt.zero_grad()
        nn.functional.mse_loss(self.model(x), y).backward()
        self.opt.step()

    def pause(self) -> None:
        if self.is_async:
            self.model.abort()

    def go(self) -> None:
        if self.is_async:
            self.model.resume()


def _block(v: Variant, data, steps: int, sleep_s: float) -> float:
    """Time ``steps`` steps of ``v`` on this rank (seconds per step); the background thread runs only here."""
    v.go()
    comm.barrier()
    t0 = time.perf_counter()
    for i in range(steps):
        v.step(*data[i % len(data)])
        if sleep_s:
            time.sleep(sleep_s)
    elapsed = time.perf_counter() - t0
    v.pause()
    return elapsed / steps


def _local_step_s(v: Variant, data, steps: int = 5) -> float:
    """Median time of one step of ``v`` (no communication) on this rank, every rank computing at once."""
    comm.barrier()
    times = []
    for i in range(steps):
        t0 = time.perf_counter()
        v.step(*data[i % len(data)])
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bench_rank(cfg: dict[str, Any]) -> dict[str, Any] | None:
    torch.set_num_threads(1)
    rank, world = comm.get_rank(), comm.get_world_size()
    slow_rank = world - 1
    conditions = ("plain", "straggler") if cfg["straggler"] else ("plain",)
    result: dict[str, Any] = {"world_size": world, "config": cfg, "models": {}}
    for name in cfg["models"]:
        base = MODELS[name][0]()
        data = batches(name, cfg["batch"], rank)
        calib = Variant("local", base, 0) if cfg["straggler"] else None
        sleeps: list[float] = []
        variants = [Variant(v, base, cfg["async_interval_ms"]) for v in cfg["variants"]]
        for v in variants:  # warm-up; local_sgd's blocks then end on an averaging step
            warm = cfg["warmup"] + (1 - cfg["warmup"]) % v.period
            v.go()
            for i in range(warm):
                v.step(*data[i % len(data)])
            v.pause()
        jobs = [(v, c) for v in variants for c in conditions]
        for r in range(cfg["rounds"]):
            for k in range(len(jobs)):
                v, cond = jobs[(k + r) % len(jobs)]
                extra = 0.0
                if cond == "straggler":  # the slow rank's own step time now, measured right before the block
                    sleeps.append(comm.allgather_object(_local_step_s(calib, data))[slow_rank])
                    extra = sleeps[-1] if rank == slow_rank else 0.0
                v.times[cond].append(_block(v, data, cfg["steps"], extra))
        mine = {v.name: {c: v.times[c] for c in conditions} for v in variants}
        everyone = comm.allgather_object(mine)
        result["models"][name] = {
            "params": sum(p.numel() for p in base.parameters()),
            "tensors": len(list(base.parameters())),
            "straggler_sleep_s": statistics.median(sleeps) if sleeps else 0.0,
            "straggler_sleeps_s": sleeps,
            "slow_rank": slow_rank,
            "times": everyone,  # [rank][variant][condition] -> block step times (s)
        }
        del variants
    return result if rank == 0 else None


# ---- reporting --------------------------------------------------------------------------------------------
def medians(info: dict[str, Any], rank: int, cond: str) -> dict[str, float]:
    return {v: statistics.median(t[cond]) for v, t in info["times"][rank].items() if t.get(cond)}


def report(result: dict[str, Any]) -> str:
    cfg = result["config"]
    lines = [
        f"world size {result['world_size']}, 1 torch thread per rank, link: {cfg['link']}; "
        f"blocks of {cfg['steps']} steps, median of {cfg['rounds']} interleaved rounds (rank 0)"
    ]
    for name, info in result["models"].items():
        lines.append(f"\n[{name}] {info['tensors']} tensors, {info['params'] / 1e6:.2f}M parameters")
        plain = medians(info, 0, "plain")
        ref = plain.get(REFERENCE)
        others = [medians(info, r, "plain") for r in range(1, result["world_size"])]
        lines.append(f"{'variant':<30}{'ms/step':>10}{'/ ' + REFERENCE:>22}{'other ranks ms':>16}")
        for v, med in plain.items():
            rel = f"{med / ref:.3f}" if ref else "-"
            other = ",".join(f"{o[v] * 1e3:.1f}" for o in others)
            lines.append(f"{v:<30}{med * 1e3:>10.1f}{rel:>22}{other:>16}")
        if not cfg["straggler"]:
            continue
        slow = info["slow_rank"]
        strag = medians(info, 0, "straggler")
        slow_strag = medians(info, slow, "straggler")
        ref_rate = 1.0 / strag[REFERENCE] if REFERENCE in strag else None
        lines.append(
            f"\n[{name}, straggler] rank {slow} sleeps after each step for as long as its no-communication step "
            f"takes (measured before each block; median {info['straggler_sleep_s'] * 1e3:.1f} ms): 2x slower per step"
        )
        lines.append(
            f"{'variant':<30}{'fast steps/s':>13}{'slow steps/s':>13}{'fast / ' + REFERENCE:>27}"
            f"{'fast / slow':>13}{'fast: with / without':>22}"
        )
        for v, med in strag.items():
            fast_rate = 1.0 / med
            rel = f"{fast_rate / ref_rate:.2f}" if ref_rate else "-"
            keep = plain[v] / med  # the fast rank's rate with the straggler / without it
            lockstep = slow_strag[v] / med  # the fast rank's rate / the slow rank's: 1.0 = bound to it
            lines.append(
                f"{v:<30}{fast_rate:>13.1f}{1.0 / slow_strag[v]:>13.1f}{rel:>27}{lockstep:>13.2f}{keep:>22.2f}"
            )
    return "\n".join(lines)


LABELS = {
    "gradient_allreduce": "gradient\nallreduce",
    "bytegrad": "bytegrad",
    "decentralized": "decentralized",
    "decentralized_i4": "decentralized\ninterval 4",
    "low_precision_decentralized": "low-precision\ndecentralized",
    "local_sgd": "local_sgd\nperiod 4",
    "async": "async\n500 ms",
    "local": "local\n(no sync)",
}


def plot(results: list[dict[str, Any]], path: str) -> None:
    """One panel per model; per algorithm one bar per run (link), height = step time / gradient_allreduce."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    model_names = list(dict.fromkeys(m for r in results for m in r["models"]))
    fig, axes = plt.subplots(len(model_names), 1, figsize=(10, 3.6 * len(model_names)), squeeze=False)
    width = 0.8 / len(results)
    for ax, model in zip(axes[:, 0], model_names):
        runs = [r for r in results if model in r["models"]]
        variants = list(dict.fromkeys(v for r in runs for v in r["models"][model]["times"][0]))
        for j, r in enumerate(results):
            if model not in r["models"]:
                continue
            med = medians(r["models"][model], 0, "plain")
            ref = med[REFERENCE]
            xs = [i + (j - (len(results) - 1) / 2) * width for i, v in enumerate(variants) if v in med]
            ys = [med[v] / ref for v in variants if v in med]
            bars = ax.bar(xs, ys, width, label=f"{r['config']['link']} ({REFERENCE}: {ref * 1e3:.0f} ms/step)")
            for b, v in zip(bars, [v for v in variants if v in med]):
                ax.annotate(
                    f"{med[v] * 1e3:.0f}",
                    (b.get_x() + b.get_width() / 2, b.get_height()),
                    ha="center",
                    va="bottom",
                    fontsize=7,
                )
        ax.set_xticks(range(len(variants)), [LABELS.get(v, v) for v in variants], fontsize=8)
        ax.axhline(1.0, color="grey", lw=0.8, ls="--")
        ax.set_ylabel(f"step time / {REFERENCE}")
        r0 = next(r for r in results if model in r["models"])
        info = r0["models"][model]
        ax.set_title(f"{model}: {info['params'] / 1e6:.2f}M parameters, 2 gloo ranks (labels: ms per step)")
        ax.legend(fontsize=8)
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
    parser.add_argument("--variants", default=",".join(DEFAULT_VARIANTS), help=f"from {', '.join(VARIANTS)}")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--steps", type=int, default=8, help="steps per timed block (a multiple of 4)")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--async-interval-ms", type=float, default=500.0, help="async's sync_interval_ms")
    parser.add_argument("--straggler", action="store_true", help="also run with the last rank 2x slower per step")
    parser.add_argument("--link", default=None, help="label for the report (default: localhost or MASTER_ADDR)")
    parser.add_argument("--json", default=None, help="write the raw results here")
    parser.add_argument("--plot", default=None, help="PNG path: plot the --plot-from results (no benchmark run)")
    parser.add_argument("--plot-from", default=None, help="comma list of --json files to plot")
    args = parser.parse_args(argv)
    if args.plot:
        if not args.plot_from:
            parser.error("--plot needs --plot-from")
        results = []
        for p in args.plot_from.split(","):
            with open(p) as f:
                results.append(json.load(f))
        plot(results, args.plot)
        print(f"plot written to {args.plot}")
        return 0
    for name in args.models.split(","):
        if name not in MODELS:
            parser.error(f"unknown model {name!r}; valid: {', '.join(MODELS)}")
    for name in args.variants.split(","):
        if name not in VARIANTS:
            parser.error(f"unknown variant {name!r}; valid: {', '.join(VARIANTS)}")
    if args.steps < 1 or args.steps % 4 or args.rounds < 1 or args.world_size < 2:
        parser.error("--steps must be a positive multiple of 4, --rounds >= 1 and --world-size >= 2")
    cfg = {
        "models": args.models.split(","),
        "variants": args.variants.split(","),
        "batch": args.batch,
        "steps": args.steps,
        "warmup": args.warmup,
        "rounds": args.rounds,
        "async_interval_ms": args.async_interval_ms,
        "straggler": args.straggler,
        "link": args.link or (f"MASTER_ADDR={os.environ['MASTER_ADDR']}" if args.rank is not None else "localhost"),
        "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "loadavg_start": os.getloadavg(),
    }
    if args.rank is None:
        result = comm.launch(bench_rank, args.world_size, cfg, timeout=3600)[0]
    else:
        comm.dist_init(backend="gloo", rank=args.rank, world_size=args.world_size)
        try:
            result = bench_rank(cfg)
        finally:
            comm.dist_finalize()
        if result is None:
            return 0
    result["loadavg_end"] = os.getloadavg()
    print(report(result))
    print(f"\nload average (1, 5, 15 min): start {cfg['loadavg_start']}, end {result['loadavg_end']}")
    if args.json:
        _write_json(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
