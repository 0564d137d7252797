"""Does ``--nproc auto`` train in the mode that is fastest over a whole run, and what does its probe cost?

For each row of ``bench_speed.py`` (the parity rows cut to a short budget): ``ding-dist train CONFIG --nproc auto``
as a user runs it (the probe, then the run in the mode it picked), and then every mode the probe tried run as a
whole at the same budget with its flags given. Each is one whole process, timed as a user waits. Printed per row: the
probe's rate of each mode and the whole run's wall time over one process's, the mode the probe picked, the fastest
whole run, and the auto run's wall time (probe included) over the fastest whole run's.

Run:  python benchmarks/bench_auto_mode.py [--rows spaceinvaders_ppo,breakout_dqn] [--budget N]
      [--probe-seconds 20] [--reps 1] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_speed as speed  # noqa: E402

_MODE_LINE = re.compile(r"^ding-dist:   (1 process|--nproc \d+|--actors \d+ --learners \d+)\s+([\d,]+) env steps/s")
_CHOSEN = re.compile(r"^ding-dist: --nproc auto: training with (.+?) \(")


def _flags(label: str) -> list[str]:
    return [] if label == "1 process" else label.split()


def run(name: str, config: Path, folder: Path, budget: int, extra: list[str], tag: str) -> tuple[float, str]:
    """Wall time of one whole ``ding-dist train`` of the row, and its output."""
    exp = folder / f"{name}_{tag}_{time.monotonic_ns()}"
    log = folder / f"{exp.name}.log"
    cmd = [sys.executable, "-m", "ding_dist.entry.cli", "train", str(config), "--seed", "0", "--exp-dir", str(exp),
           "--max-env-steps", str(budget), "--set", "env.stop_value=None", *extra]  # fmt: skip
    return speed._timed(cmd, log), log.read_text()


def bench_row(name: str, folder: Path, budget: int, probe_s: float, reps: int) -> dict:
    config, _ = speed._config(name, folder)
    autos, probes, picks, walls = [], [], [], {}
    for rep in range(reps):
        wall, out = run(name, config, folder, budget, ["--nproc", "auto", "--probe-seconds", str(probe_s)], "auto")
        autos.append(wall)
        probe = {m[1]: float(m[2].replace(",", "")) for m in map(_MODE_LINE.match, out.splitlines()) if m}
        chosen = [m[1] for m in map(_CHOSEN.match, out.splitlines()) if m]
        probes.append(probe)
        picks.append(chosen[0] if chosen else "?")
        for label in probe:  # the same modes as whole runs, in the probe's order
            walls.setdefault(label, []).append(run(name, config, folder, budget, _flags(label), f"m{rep}")[0])
        print(f"  {name} rep {rep + 1}/{reps}: picked {picks[-1]}; auto {wall:.1f} s; "
              + ", ".join(f"{k} {v[-1]:.1f} s" for k, v in walls.items()), flush=True)  # fmt: skip
    med = {k: statistics.median(v) for k, v in walls.items()}
    fastest = min(med, key=med.get)
    return {"budget": budget, "probe_seconds": probe_s, "picks": picks, "probe_rates": probes,
            "wall_s": med, "auto_wall_s": statistics.median(autos), "fastest": fastest}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", default="spaceinvaders_ppo,breakout_dqn,hopper_sac",
                        help=f"comma-separated rows of {', '.join(speed.ROWS)}")  # fmt: skip
    parser.add_argument("--budget", type=int, default=None, help="env steps of every row (default: each row's own)")
    parser.add_argument("--probe-seconds", type=float, default=20.0, help="--probe-seconds of the auto runs")
    parser.add_argument("--reps", type=int, default=1, help="interleaved repetitions (medians are printed)")
    parser.add_argument("--json", default=None, help="also write the figures here")
    args = parser.parse_args()
    rows = args.rows.split(",")
    unknown = [r for r in rows if r not in speed.ROWS]
    if unknown:
        parser.error(f"unknown rows {unknown}; expected some of {', '.join(speed.ROWS)}")
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench_auto_mode_") as tmp:
        for name in rows:
            budget = args.budget or speed.ROWS[name][1]
            results[name] = bench_row(name, Path(tmp), budget, args.probe_seconds, args.reps)
    print("\n| row | mode | probe: env steps/s over 1 process | whole run: wall over 1 process |")
    print("|---|---|---|---|")
    for name, r in results.items():
        one_rate = statistics.median(p.get("1 process", float("nan")) for p in r["probe_rates"])
        for label, wall in r["wall_s"].items():
            rate = statistics.median(p.get(label, float("nan")) for p in r["probe_rates"])
            mark = " (fastest)" if label == r["fastest"] else ""
            print(f"| {name} | {label}{mark} | {rate / one_rate:.2f} | {wall / r['wall_s']['1 process']:.2f} |")
    print("\n| row | budget | auto picked | fastest whole run | auto (probe included) / fastest |")
    print("|---|---|---|---|---|")
    for name, r in results.items():
        print(f"| {name} | {r['budget']:,} | {', '.join(r['picks'])} | {r['fastest']} | "
              f"{r['auto_wall_s'] / r['wall_s'][r['fastest']]:.2f} |")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
