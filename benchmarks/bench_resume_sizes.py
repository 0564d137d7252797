"""Resume a DQN CartPole run at other world sizes: 4 processes, then 2, then 1, side by side with the same run
left at 4 processes, whole process (``ding-dist train`` / ``ding-dist resume``), per seed.

Prints, per seed: the eval returns of both runs at each evaluation, the replay size (transitions over all
ranks' replay files) at the end of each segment, and the return of the first evaluation after each resize.

Run from the repository root:  python benchmarks/bench_resume_sizes.py [SEEDS] [SEGMENT]
SEEDS defaults to 0,1,2; SEGMENT (env steps per segment) to 6144.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ding_dist.utils import CheckpointManager, load_checkpoint

SEEDS = [int(s) for s in (sys.argv[1] if len(sys.argv) > 1 else "0,1,2").split(",")]
SEGMENT = int(sys.argv[2]) if len(sys.argv) > 2 else 6144
SETS = [
    "env.stop_value=1e9",  # no early stop: every segment runs its budget
    "policy.eval.eval_freq=2048",
    "policy.other.checkpoint.freq=2048",
    "policy.other.replay_buffer.save_in_checkpoint=True",
]
CLI = [sys.executable, "-m", "ding_dist.entry.cli"]


def run(args: list[str]) -> tuple[dict, float]:
    start = time.perf_counter()
    subprocess.run(CLI + args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return args, time.perf_counter() - start


def result(folder: Path) -> dict:
    return json.loads((folder / "result.json").read_text())


def replay_size(folder: Path) -> int:
    """Transitions in the replay files of the newest checkpoint's ranks at its env step (a file of a rank beyond
    the current world, left by an earlier larger one, belongs to an older checkpoint)."""
    state = CheckpointManager(folder / "ckpt").load_latest()
    world, step = len(state["rng"]), int(state["counters"]["env_steps"])
    total = 0
    for rank in range(world):
        for name in (f"replay_rank{rank}.pt", f"replay_rank{rank}.prev.pt"):
            saved = load_checkpoint(folder / "ckpt" / name)
            if saved["env_steps"] == step:
                total += int(saved["buffer"]["rows"]) * int(saved["buffer"]["shape"][1])
                break
        else:
            raise RuntimeError(f"no replay file of rank {rank} at env step {step} in {folder}")
    return total


def main() -> None:
    rows = []
    for seed in SEEDS:
        root = Path(tempfile.mkdtemp())
        resized, straight = root / "resized", root / "straight"
        base = ["train", "cartpole_dqn", "--seed", str(seed), "--set", *SETS]
        run(base + ["--nproc", "4", "--exp-dir", str(straight), "--max-env-steps", str(3 * SEGMENT)])
        run(base + ["--nproc", "4", "--exp-dir", str(resized), "--max-env-steps", str(SEGMENT)])
        sizes = [replay_size(resized)]
        for nproc, steps in ((2, 2 * SEGMENT), (1, 3 * SEGMENT)):
            run(["resume", str(resized), "--nproc", str(nproc), "--max-env-steps", str(steps)])
            sizes.append(replay_size(resized))
        a, b = dict(result(resized)["eval_history"]), dict(result(straight)["eval_history"])
        print(f"seed {seed}: replay size after 4 / 2 / 1 processes: {sizes}")
        print("  env steps   4->2->1   4 throughout")
        for step in sorted(set(a) | set(b)):
            print(f"  {int(step):9d}   {a.get(step, float('nan')):7.1f}   {b.get(step, float('nan')):7.1f}")
        after = [a.get(SEGMENT + 2048), a.get(2 * SEGMENT + 2048)]
        rows.append((seed, sizes, after, a.get(3 * SEGMENT), b.get(3 * SEGMENT)))
    print("\nseed | replay 4/2/1 | first eval after 4->2, 2->1 | final: resized vs 4 throughout")
    for seed, sizes, after, final_a, final_b in rows:
        print(f"{seed} | {sizes} | {after} | {final_a} vs {final_b}")
    finals = [r[3] for r in rows], [r[4] for r in rows]
    medians = statistics.median(finals[0]), statistics.median(finals[1])
    print(f"median final return: resized {medians[0]:.1f}, 4 throughout {medians[1]:.1f}")


if __name__ == "__main__":
    main()
