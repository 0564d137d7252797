"""CartPole-v1 time to a greedy evaluation return of 475 through the CLI: 1 process vs 2 processes per sync algorithm.

Every run is one ``ding-dist train CONFIG --seed S --exp-dir TMP [--nproc 2 --set policy.sync.algorithm=A
--set policy.sync.options.K=V ...]`` process; its figure is the wall time of that whole process (interpreter
start, imports, torchrun and rendezvous for 2 processes, training, evaluations, the final checkpoint),
measured here around it, and ``result.json``'s env steps and ``stopped_by``. A run counts as solved when
``stopped_by`` is ``stop_value`` (the config's ``env.stop_value``, 475 in the shipped CartPole configs;
``--set env.stop_value=475`` is added when a config says otherwise). Runs are capped at
``--max-env-steps``; an unsolved run's wall time still enters the median (so the median is a lower
bound then) and the report says how many solved.

Per seed, the variants run back to back in an order that rotates by one per seed, so machine-load drifts
hit them alike. Report: per policy and variant the median over seeds of the wall time, and its ratio to
the 1-process median.

Run:  python benchmarks/bench_time_to_solve.py [--policies ppo,dqn] [--seeds 0,1,2] [--json out.json]
Variants: ``--variants 1p,gradient_allreduce,local_sgd:period=4,...`` (``1p`` is one process, the default
``gradient_allreduce``; every other entry is an algorithm on 2 processes with ``:key=value`` options).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = {p: ROOT / "configs" / f"cartpole_{p}_config.py" for p in ("ppo", "dqn")}
TARGET = 475.0
DEFAULT_VARIANTS = (
    "1p",
    "gradient_allreduce",
    "decentralized",
    "low_precision_decentralized",
    "local_sgd:period=4",
    "async",
)


def cli() -> list[str]:
    """The ``ding-dist`` console script of this interpreter's environment (else ``python -m`` the CLI)."""
    beside = Path(sys.executable).parent / "ding-dist"
    if beside.exists():
        return [str(beside)]
    found = shutil.which("ding-dist")
    return [found] if found else [sys.executable, "-m", "ding_dist.entry.cli"]


def parse_variant(spec: str) -> tuple[int, list[str]]:
    """``'1p'`` -> (1, []); ``'local_sgd:period=4'`` -> (2, ['policy.sync.algorithm=local_sgd', ...])."""
    if spec == "1p":
        return 1, []
    algorithm, _, rest = spec.partition(":")
    sets = [f"policy.sync.algorithm={algorithm}"]
    for item in filter(None, rest.split(",")):
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"variant {spec!r}: option {item!r} is not key=value")
        sets.append(f"policy.sync.options.{key}={value}")
    return 2, sets


def stop_value_override(config: Path) -> list[str]:
    from ding_dist.entry import load_config

    cfg = load_config(str(config))
    return [] if cfg.env.get("stop_value") == TARGET else [f"env.stop_value={TARGET:g}"]


def run_once(config: Path, seed: int, spec: str, max_env_steps: int, log_dir: Path | None, tag: str = "") -> dict:
    nproc, sets = parse_variant(spec)
    sets = sets + stop_value_override(config)
    with tempfile.TemporaryDirectory(prefix="ttsolve_") as tmp:
        exp_dir = Path(tmp) / "run"
        cmd = [*cli(), "train", str(config), "--seed", str(seed), "--exp-dir", str(exp_dir)]
        cmd += ["--max-env-steps", str(max_env_steps)]
        if nproc > 1:
            cmd += ["--nproc", str(nproc)]
        if sets:
            cmd += ["--set", *sets]
        load = os.getloadavg()[0]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if log_dir is not None:
            name = f"{config.stem}_{spec.replace(':', '_').replace(',', '_').replace('=', '')}_seed{seed}{tag}.log"
            (log_dir / name).write_text(" ".join(cmd) + "\n\n" + proc.stdout + proc.stderr)
        result_file = exp_dir / "result.json"
        if proc.returncode != 0 or not result_file.exists():
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-5:]
            return {"ok": False, "wall_s": wall, "load1": load, "error": f"exit {proc.returncode}", "tail": tail}
        res = json.loads(result_file.read_text())
    return {
        "ok": True,
        "wall_s": wall,
        "train_wall_s": res.get("wall_time_s"),
        "env_steps": res.get("env_steps"),
        "solved": res.get("stopped_by") == "stop_value",
        "best_eval_return": res.get("best_eval_return"),
        "load1": load,
        "command": " ".join(cmd[len(cli()) :]),
    }


def bench(policies: list[str], variants: list[str], seeds: list[int], max_env_steps: int, log_dir) -> dict:
    runs: dict[str, dict[str, list[dict]]] = {p: {v: [] for v in variants} for p in policies}
    for p in policies:
        for i, seed in enumerate(seeds):
            order = variants[i % len(variants) :] + variants[: i % len(variants)]
            for v in order:
                r = run_once(CONFIGS[p], seed, v, max_env_steps, log_dir)
                r["seed"] = seed
                runs[p][v].append(r)
                status = "solved" if r.get("solved") else "unsolved" if r["ok"] else f"FAILED {r['error']}"
                print(
                    f"{p} {v:<32} seed {seed}: {r['wall_s']:6.1f} s whole process, "
                    f"{r.get('env_steps', '-')} env steps, {status} (load {r['load1']:.2f})",
                    flush=True,
                )
                if not r["ok"]:
                    print("   " + "\n   ".join(r["tail"]), flush=True)
    summary: dict[str, dict[str, dict]] = {}
    for p in policies:
        summary[p] = {}
        for v in variants:
            rs = runs[p][v]
            summary[p][v] = {
                "median_wall_s": statistics.median(r["wall_s"] for r in rs),
                "median_train_wall_s": statistics.median(r.get("train_wall_s") or float("nan") for r in rs),
                "median_env_steps": statistics.median(r.get("env_steps") or 0 for r in rs),
                "solved": sum(bool(r.get("solved")) for r in rs),
                "runs": len(rs),
            }
        base = summary[p].get("1p", {}).get("median_wall_s")
        for v in variants:
            summary[p][v]["ratio_vs_1p"] = summary[p][v]["median_wall_s"] / base if base else None
    return {"runs": runs, "summary": summary}


def startup_floor(policies: list[str], seeds: list[int], log_dir) -> dict:
    """Whole-process wall time of a run of one 256-step iteration, 1 and 2 processes: what start-up costs."""
    floor: dict[str, dict[str, float]] = {}
    for p in policies:
        times: dict[str, list[float]] = {"1p": [], "2p": []}
        for i, seed in enumerate(seeds):
            for v in ("1p", "gradient_allreduce") if i % 2 == 0 else ("gradient_allreduce", "1p"):
                r = run_once(CONFIGS[p], seed, v, 256, log_dir, tag="_floor")
                times["1p" if v == "1p" else "2p"].append(r["wall_s"])
        floor[p] = {k: statistics.median(v) for k, v in times.items()}
    return floor


def report(out: dict, seeds: list[int]) -> str:
    lines = [f"\nCartPole-v1 time to {TARGET:g}, whole-process wall time, median of seeds {seeds}"]
    lines.append(f"{'policy':<6} {'variant':<32}{'wall s':>8}{'/ 1p':>7}{'train s':>9}{'env steps':>11}{'solved':>8}")
    for p, rows in out["summary"].items():
        for v, s in rows.items():
            ratio = f"{s['ratio_vs_1p']:.2f}" if s["ratio_vs_1p"] is not None else "-"
            lines.append(
                f"{p:<6} {v:<32}{s['median_wall_s']:>8.1f}{ratio:>7}{s['median_train_wall_s']:>9.1f}"
                f"{s['median_env_steps']:>11.0f}{s['solved']:>5}/{s['runs']}"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policies", default="ppo,dqn", help="comma list of ppo,dqn")
    parser.add_argument("--variants", default=",".join(DEFAULT_VARIANTS), help="';'-separated when options have commas")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--max-env-steps", type=int, default=100_000)
    parser.add_argument(
        "--startup-floor",
        action="store_true",
        help="also time 1 and 2 processes running one 256-step iteration (start-up, one collection, one evaluation)",
    )
    parser.add_argument("--log-dir", default=None, help="keep every run's output here")
    parser.add_argument("--json", default=None, help="write every run and the summary here")
    args = parser.parse_args(argv)
    policies = args.policies.split(",")
    for p in policies:
        if p not in CONFIGS:
            parser.error(f"unknown policy {p!r}; valid: {', '.join(CONFIGS)}")
    variants = args.variants.split(";") if ";" in args.variants else args.variants.split(",")
    for v in variants:
        try:
            parse_variant(v)
        except ValueError as exc:
            parser.error(str(exc))
    seeds = [int(s) for s in args.seeds.split(",")]
    log_dir = Path(args.log_dir) if args.log_dir else None
    if log_dir is not None:
        log_dir.mkdir(parents=True, exist_ok=True)
    started, load_start = time.strftime("%Y-%m-%d %H:%M:%S %Z"), os.getloadavg()
    out = bench(policies, variants, seeds, args.max_env_steps, log_dir)
    out.update(started=started, loadavg_start=load_start, loadavg_end=os.getloadavg(), seeds=seeds)
    print(report(out, seeds))
    if args.startup_floor:
        out["startup_floor"] = startup_floor(policies, seeds, log_dir)
        for p, f in out["startup_floor"].items():
            print(
                f"start-up floor, {p} (one 256-step iteration, whole process, median): 1p {f['1p']:.1f} s, "
                f"2p {f['2p']:.1f} s (gradient_allreduce)"
            )
    loads = [r["load1"] for rows in out["runs"].values() for rs in rows.values() for r in rs]
    print(
        f"\nstarted {started}; 1-min load average at the runs' starts: median {statistics.median(loads):.2f}, "
        f"range {min(loads):.2f}-{max(loads):.2f} (2 cores)"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
