"""SAC on Pendulum-v1: env steps and wall time to reach a greedy evaluation of -200, over several seeds.

Run:  python benchmarks/bench_sac.py [--seeds 3] [--nproc 1|2] [--max-env-steps 30000] [--set KEY=VALUE ...]

Each seed trains ``configs/pendulum_sac_config.py`` through the off-policy pipeline (``ding_dist.entry.train``)
until the evaluation mean return reaches ``--threshold`` (the run stops there: ``env.stop_value`` is set
to it) or ``--max-env-steps`` global env steps pass. ``--nproc 2`` runs every seed on two gloo processes
started with :func:`ding_dist.comm.launch` (rank 0's result is reported; both ranks hold the same model).
Every process uses one torch thread.

Prints one line per seed and a summary with medians over seeds: env steps to the threshold (runs that
never reach it count as missing and are reported), best evaluation return, gradient updates and wall
time to the threshold, plus wall time per 1000 env steps. ``--json PATH`` writes the whole record.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parent.parent
CONFIG = REPO / "configs" / "pendulum_sac_config.py"


def first_reach(eval_history: list, threshold: float) -> int | None:
    """Global env steps of the first evaluation whose mean return is at least ``threshold`` (None: never)."""
    for step, mean in eval_history:
        if mean >= threshold:
            return int(step)
    return None


def _train(config: str, seed: int, overrides: list[str], exp_dir: str, max_env_steps: int) -> dict[str, Any]:
    """One training run on the current process group (fake link on one process)."""
    from ding_dist.entry import train

    torch.set_num_threads(1)
    cpu_start = time.process_time()
    result = train(config, seed=seed, overrides=overrides, exp_dir=exp_dir, max_env_steps=max_env_steps)
    result["cpu_time_s"] = time.process_time() - cpu_start
    return result


def run_seed(config: str, seed: int, overrides: list[str], nproc: int, max_env_steps: int, keep: str | None) -> dict:
    """Train one seed on ``nproc`` processes; the rank-0 result dict."""
    with tempfile.TemporaryDirectory(prefix="bench_sac_") as tmp:
        exp_dir = str(Path(keep) / f"seed{seed}_np{nproc}") if keep else tmp
        if nproc == 1:
            return _train(config, seed, overrides, exp_dir, max_env_steps)
        from ding_dist.comm import launch

        return launch(_train, nproc, config, seed, overrides, exp_dir, max_env_steps)[0]


def time_updates(config: str, overrides: list[str], widths: list[int], repeats: int = 7, iters: int = 50) -> dict:
    """Median seconds per ``learn`` call for each hidden width (alternating blocks), and ratios to the first."""
    import gymnasium as gym

    from ding_dist.entry.pipeline import load_config
    from ding_dist.policy.sac import SACPolicy

    cfg = load_config(config, overrides=overrides)
    obs_space = gym.spaces.Box(-8.0, 8.0, (3,))
    act_space = gym.spaces.Box(-2.0, 2.0, (1,))
    n = cfg.policy.learn.batch_size
    gen = torch.Generator().manual_seed(0)
    data = {
        "obs": torch.randn(n, 3, generator=gen),
        "action": torch.rand(n, 1, generator=gen) * 2 - 1,
        "reward": torch.randn(n, generator=gen),
        "next_obs": torch.randn(n, 3, generator=gen),
        "discount": torch.full((n,), 0.99),
    }
    policies = {}
    for width in widths:
        pcfg = copy.deepcopy(cfg.policy)
        pcfg.model.update(actor_hidden_sizes=[width, width], critic_hidden_sizes=[width, width])
        policies[width] = SACPolicy(pcfg, obs_space, act_space)
        for _ in range(5):  # warm up: optimizer state, allocator
            policies[width].learn(data)
    times: dict[int, list[float]] = {w: [] for w in widths}
    for _ in range(repeats):
        for width, policy in policies.items():
            start = time.perf_counter()
            for _ in range(iters):
                policy.learn(data)
            times[width].append((time.perf_counter() - start) / iters)
    ms = {w: statistics.median(t) * 1e3 for w, t in times.items()}
    return {"batch_size": n, "ms_per_update": ms, "ratio_to_first": {w: ms[w] / ms[widths[0]] for w in widths}}


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def summarize(runs: list[dict], threshold: float) -> dict[str, Any]:
    """Medians over seeds of the figures printed by the benchmark."""
    reached = [r for r in runs if r["steps_to_threshold"] is not None]
    stopped = [r for r in reached if r["stopped_by"] == "stop_value"]  # ran exactly up to the threshold
    return {
        "seeds": len(runs),
        "reached": len(reached),
        "threshold": threshold,
        "median_steps_to_threshold": _median([r["steps_to_threshold"] for r in reached]),
        "max_steps_to_threshold": max((r["steps_to_threshold"] for r in reached), default=None),
        "median_best_eval_return": _median([r["best_eval_return"] for r in runs]),
        "median_updates_to_threshold": _median([r["train_iters"] for r in stopped]),
        "median_wall_s_to_threshold": _median([r["wall_time_s"] for r in stopped]),
        "median_cpu_s_to_threshold": _median([r["cpu_time_s"] for r in stopped]),
        "median_wall_s_per_1k_steps": _median([1000 * r["wall_time_s"] / r["env_steps"] for r in runs]),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(CONFIG), help="SAC config file (default: the Pendulum one)")
    parser.add_argument("--seeds", type=int, default=3, help="number of seeds (default 3)")
    parser.add_argument("--first-seed", type=int, default=0, help="seeds are first-seed, first-seed+1, ...")
    parser.add_argument("--nproc", type=int, default=1, help="processes per run (default 1)")
    parser.add_argument("--max-env-steps", type=int, default=30_000, help="global env-step budget per run")
    parser.add_argument("--threshold", type=float, default=-200.0, help="evaluation return to reach")
    parser.add_argument("--no-stop", action="store_true", help="keep training after the threshold")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="config overrides")
    parser.add_argument("--keep", default=None, help="keep experiment folders under this folder")
    parser.add_argument("--json", default=None, help="write seeds and summary to this JSON file")
    parser.add_argument("--progress", action="store_true", help="show the pipeline's progress bar")
    parser.add_argument("--time-updates", nargs="+", type=int, default=None, metavar="WIDTH",
                        help="only time learn() for these hidden widths (no training)")  # fmt: skip
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error(f"--seeds must be >= 1, got {args.seeds}")
    if args.nproc < 1:
        parser.error(f"--nproc must be >= 1, got {args.nproc}")
    if args.max_env_steps < 1:
        parser.error(f"--max-env-steps must be >= 1, got {args.max_env_steps}")
    if args.time_updates is not None:
        if min(args.time_updates) < 1:
            parser.error(f"--time-updates widths must be >= 1, got {args.time_updates}")
        torch.set_num_threads(1)
        timing = time_updates(args.config, args.set, args.time_updates)
        print(json.dumps(timing, indent=2))
        return timing
    stop = "None" if args.no_stop else repr(args.threshold)
    overrides = [f"env.stop_value={stop}", *args.set]

    if not args.progress:
        os.environ.setdefault("TQDM_DISABLE", "1")  # read by tqdm here and in launched ranks
    torch.set_num_threads(1)
    runs = []
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        r = run_seed(args.config, seed, overrides, args.nproc, args.max_env_steps, args.keep)
        reach = first_reach(r["eval_history"], args.threshold)
        run = {
            "seed": seed,
            "steps_to_threshold": reach,
            "best_eval_return": r["best_eval_return"],
            "env_steps": r["env_steps"],
            "train_iters": r["train_iters"],
            "wall_time_s": r["wall_time_s"],
            "cpu_time_s": r["cpu_time_s"],
            "world_size": r["world_size"],
            "stopped_by": r["stopped_by"],
            "eval_history": r["eval_history"],
        }
        runs.append(run)
        shown = "never" if reach is None else f"{reach} env steps"
        print(
            f"seed {seed} nproc {args.nproc}: threshold {args.threshold:g} at {shown}, "
            f"best {r['best_eval_return']:.1f}, {r['train_iters']} updates, {r['wall_time_s']:.1f} s",
            flush=True,
        )
    summary = summarize(runs, args.threshold)
    summary.update(nproc=args.nproc, overrides=args.set, torch_threads=1, cpus=os.cpu_count())
    print(json.dumps(summary, indent=2))
    if args.json:
        path = Path(args.json)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps({"summary": summary, "runs": runs}, indent=2))
        os.replace(tmp, path)
    if summary["reached"] < summary["seeds"]:
        print(f"{summary['seeds'] - summary['reached']} seed(s) did not reach {args.threshold:g}", file=sys.stderr)
    return summary


if __name__ == "__main__":
    summary = main()
    sys.exit(0 if summary.get("reached", 0) == summary.get("seeds", 0) else 1)
