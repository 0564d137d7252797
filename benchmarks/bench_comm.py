"""ding_dist collectives vs raw torch.distributed on 2 gloo ranks, plus the fake-link call cost.

Run:  python benchmarks/bench_comm.py [--nproc 2] [--repeats 15] [--max-mb 100]

For each message size the two implementations run interleaved, call by call (so both see the same
machine load); the script prints the median time per call of each and the ratio ours / raw.
"""

from __future__ import annotations

import argparse
import statistics
import time
import timeit

import torch
import torch.distributed as dist

import ding_dist as dd

SIZES = [4, 1 << 10, 64 << 10, 1 << 20, 16 << 20, 100 << 20]


def _measure(sizes: list[int], repeats: int) -> list[dict]:
    """Per size and op: ``samples`` pairs of calls, raw and ours back to back (order alternating),
    each call timed on its own; the medians of the two series and their ratio."""
    rows = []
    pairs = {
        "allreduce": (lambda t: dist.all_reduce(t), lambda t: dd.allreduce(t)),
        "allreduce avg": (lambda t: (dist.all_reduce(t), t.div_(2)), lambda t: dd.allreduce(t, op="avg")),
        "broadcast": (lambda t: dist.broadcast(t, src=0), lambda t: dd.broadcast(t, src=0)),
    }
    for nbytes in sizes:
        tensor = torch.ones(max(1, nbytes // 4), dtype=torch.float32)
        samples = max(repeats, min(400, (64 << 20) // max(nbytes, 1)))
        for name, (raw, ours) in pairs.items():
            for _ in range(3):
                raw(tensor), ours(tensor)  # warm up connections and buffers
            times: dict[str, list[float]] = {"raw": [], "ours": []}
            dist.barrier()
            for i in range(samples):
                order = [("raw", raw), ("ours", ours)] if i % 2 == 0 else [("ours", ours), ("raw", raw)]
                for key, fn in order:
                    start = time.perf_counter()
                    fn(tensor)
                    times[key].append(time.perf_counter() - start)
            rows.append(
                {
                    "op": name,
                    "bytes": nbytes,
                    "samples": samples,
                    "raw_us": statistics.median(times["raw"]) * 1e6,
                    "ours_us": statistics.median(times["ours"]) * 1e6,
                }
            )
    return rows


def _fake_link_cost() -> dict:
    t = torch.ones(8)
    number = 20000
    ours = min(timeit.repeat(lambda: dd.allreduce(t), number=number, repeat=7)) / number
    empty = min(timeit.repeat(lambda: None, number=number, repeat=7)) / number
    bcast = min(timeit.repeat(lambda: dd.broadcast(t), number=number, repeat=7)) / number
    return {"allreduce_us": ours * 1e6, "broadcast_us": bcast * 1e6, "empty_call_us": empty * 1e6}


def _human(nbytes: int) -> str:
    for unit, size in (("MB", 1 << 20), ("KB", 1 << 10)):
        if nbytes >= size:
            return f"{nbytes // size} {unit}"
    return f"{nbytes} B"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=15, help="minimum timed pairs per size")
    parser.add_argument("--max-mb", type=float, default=100)
    args = parser.parse_args()
    sizes = [s for s in SIZES if s <= args.max_mb * (1 << 20)]

    fake = _fake_link_cost()
    print(
        f"fake link: allreduce {fake['allreduce_us']:.2f} us/call, broadcast {fake['broadcast_us']:.2f} us/call "
        f"(an empty Python call: {fake['empty_call_us']:.3f} us), best of 7 x 20000 calls"
    )

    rows = dd.launch(_measure, args.nproc, sizes, args.repeats, timeout=3600)[0]
    print(f"\n{args.nproc} gloo ranks on localhost; median per call over >= {args.repeats} interleaved pairs (rank 0)")
    print(f"{'op':<14}{'size':>8}{'raw us':>12}{'ours us':>12}{'ours/raw':>10}")
    for row in rows:
        ratio = row["ours_us"] / row["raw_us"]
        print(f"{row['op']:<14}{_human(row['bytes']):>8}{row['raw_us']:>12.1f}{row['ours_us']:>12.1f}{ratio:>10.3f}")


if __name__ == "__main__":
    main()
