"""What a checkpoint costs on every shipped config: the part the training loop waits for, and the write behind it.

A checkpoint is taken in two parts: the loop copies the policy's state (networks, optimizers, normalizers) and the
RNG states to the CPU (``snapshot``, the only part on the hot path), then a background thread writes that copy
atomically (``save_checkpoint``: temp file, fsync, rename). For each shipped config this builds its policy on one
process, then prints the median over ``--reps`` of each part, the file's size, and the loop's share of the default
interval (``policy.other.checkpoint.every_minutes``, 10 minutes): how much slower a run gets from the default.

Run:  python benchmarks/bench_checkpoint_cost.py [--only cartpole_dqn,pong_dqn] [--reps 20]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from ding_dist.config import load_config
from ding_dist.entry.factories import build_policy, env_manager
from ding_dist.envs import make_vec_env
from ding_dist.utils import capture_rng_state, save_checkpoint
from ding_dist.utils.background_save import snapshot

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = sorted(p.name.removesuffix("_config.py") for p in (ROOT / "configs").glob("*_config.py"))


def measure(name: str, reps: int, folder: Path) -> dict:
    cfg = load_config(ROOT / "configs" / f"{name}_config.py")
    venv = make_vec_env(cfg.env, 1, env_manager(cfg), training=True)
    try:
        policy = build_policy(cfg, venv.single_observation_space, venv.single_action_space)
    finally:
        venv.close()
    loop, write = [], []
    path = folder / f"{name}.pt"
    for _ in range(reps):
        start = time.perf_counter()
        copy = snapshot({"policy": policy.state_dict(), "rng": [capture_rng_state()]})
        loop.append(time.perf_counter() - start)
        start = time.perf_counter()
        save_checkpoint(copy, path)
        write.append(time.perf_counter() - start)
    every_s = 60.0 * float(cfg.policy.other.checkpoint.every_minutes)
    loop_s = statistics.median(loop)
    return {"config": name, "loop_ms": 1e3 * loop_s, "write_ms": 1e3 * statistics.median(write),
            "mb": path.stat().st_size / 2**20, "share": loop_s / every_s if every_s else 0.0}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="comma-separated config names (default: every shipped config)")
    parser.add_argument("--reps", type=int, default=20, help="checkpoints per config (the median is printed)")
    args = parser.parse_args()
    names = [n for n in args.only.split(",") if n] or SHIPPED
    print(f"{'config':<28} {'loop ms':>8} {'write ms':>9} {'MB':>7} {'loop / 10 min':>14}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            try:
                row = measure(name, args.reps, Path(tmp))
            except Exception as e:  # an env whose extra is not installed: named, the rest go on
                print(f"{name:<28} skipped: {type(e).__name__}: {str(e).splitlines()[0][:80]}")
                continue
            print(f"{row['config']:<28} {row['loop_ms']:8.2f} {row['write_ms']:9.1f} {row['mb']:7.2f} "
                  f"{row['share']:14.1e}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
