"""ding_dist collectives vs raw torch.distributed on 2 gloo ranks, plus the fake-link call cost.

Run:  python benchmarks/bench_comm.py [--nproc 2] [--repeats 15] [--max-mb 100]

For each message size the two implementations run interleaved, call by call in rotating order (so both
see the same machine load); the script prints the median time per call of each, the ratio ours / raw,
and the ratio of two identical raw series (A/A), which shows how much of a difference is noise.
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
    """Per size and op: ``samples`` rounds of raw, raw again and ours back to back (order rotating),
    each call timed on its own; the medians of the three series."""
    rows = []
    pairs = {
        "allreduce": (lambda t: dist.all_reduce(t), lambda t: dd.allreduce(t)),
        "allreduce avg": (lambda t: (dist.all_reduce(t), t.div_(2)), lambda t: dd.allreduce(t, op="avg")),
        "broadcast": (lambda t: dist.broadcast(t, src=0), lambda t: dd.broadcast(t, src=0)),
    }
    for nbytes in sizes:
        tensor = torch.ones(max(1, nbytes // 4), dtype=torch.float32)
        samples = max(repeats, min(400, (1 << 30) // max(nbytes, 1)))
        for name, (raw, ours) in pairs.items():
            for _ in range(3):
                raw(tensor), ours(tensor)  # warm up connections and buffers
            # "raw" twice: the A/A ratio of the two raw series shows the noise floor of the measurement
            series = [("raw", raw), ("raw_again", raw), ("ours", ours)]
            times: dict[str, list[float]] = {key: [] for key, _ in series}
            dist.barrier()
            for i in range(samples):
                for key, fn in series[i % 3 :] + series[: i % 3]:  # rotate: no series owns a position
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
                    "raw_again_us": statistics.median(times["raw_again"]) * 1e6,
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
    parser.add_argument("--repeats", type=int, default=15, help="minimum timed rounds per size")
    parser.add_argument("--max-mb", type=float, default=100)
    args = parser.parse_args()
    sizes = [s for s in SIZES if s <= args.max_mb * (1 << 20)]

    fake = _fake_link_cost()
    print(
        f"fake link: allreduce {fake['allreduce_us']:.2f} us/call, broadcast {fake['broadcast_us']:.2f} us/call "
        f"(an empty Python call: {fake['empty_call_us']:.3f} us), best of 7 x 20000 calls"
    )

    rows = dd.launch(_measure, args.nproc, sizes, args.repeats, timeout=3600)[0]
    print(f"\n{args.nproc} gloo ranks on localhost; median per call over >= {args.repeats} interleaved rounds (rank 0)")
    print(f"{'op':<14}{'size':>8}{'raw us':>12}{'ours us':>12}{'ours/raw':>10}{'raw/raw (A/A)':>15}")
    for row in rows:
        ratio, noise = row["ours_us"] / row["raw_us"], row["raw_again_us"] / row["raw_us"]
        print(
            f"{row['op']:<14}{_human(row['bytes']):>8}{row['raw_us']:>12.1f}{row['ours_us']:>12.1f}"
            f"{ratio:>10.3f}{noise:>15.3f}"
        )


if __name__ == "__main__":
    main()
