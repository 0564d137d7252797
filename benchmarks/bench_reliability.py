"""Time dead-rank detection, restart and SIGTERM of `ding-dist train --nproc 2` (Linux: finds ranks in /proc).

Run from the repository root:  python benchmarks/bench_reliability.py [RUNS]   (default 5)
"""

import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CONFIG, RUNS = "configs/cartpole_dqn_config.py", int(sys.argv[1]) if len(sys.argv) > 1 else 5
FAST = [
    "policy.learn.learning_starts=0",
    "policy.learn.update_per_collect=16",
    "env.n_evaluator_episode=2",
    "policy.other.checkpoint.freq=512",
    "policy.other.log_freq=256",
]


def rank_pid(launcher: int, rank: int) -> int:
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            ppid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
            if ppid == launcher and f"RANK={rank}".encode() in open(f"/proc/{pid}/environ", "rb").read().split(b"\0"):
                return int(pid)
        except (OSError, IndexError):
            pass
    raise RuntimeError(f"no rank {rank} under pid {launcher}")


def trial(hurt: str, *flags: str, delay: float = 0.0) -> dict:
    folder = Path(tempfile.mkdtemp())
    log = folder / "out.txt"
    cmd = [
        sys.executable,
        "-m",
        "ding_dist.entry.cli",
        "train",
        CONFIG,
        "--nproc",
        "2",
        "--exp-dir",
        str(folder / "exp"),
        *flags,
        "--set",
        *FAST,
    ]
    with open(log, "w") as out:
        job = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=dict(os.environ, OMP_NUM_THREADS="1")
        )
        while not list((folder / "exp" / "ckpt").glob("ckpt_*.pt")):  # hurt it after its first checkpoint
            time.sleep(0.01)
        time.sleep(delay)
        t0 = time.monotonic()
        os.kill(job.pid if hurt == "SIGTERM" else rank_pid(job.pid, 1), getattr(signal, hurt))
        found: dict = {}
        while job.poll() is None:
            if "resumed_s" not in found and (
                m := re.search(r"resumed at env step (\d+)", log.read_text("utf-8", "replace"))
            ):
                found.update(resumed_s=time.monotonic() - t0, resumed_at=int(m.group(1)))
            time.sleep(0.01)
    found.update(exit_s=time.monotonic() - t0, code=job.returncode)
    text = log.read_text("utf-8", "replace")
    if m := re.search(r"(?:a collective failed at env step|stopping at env step) (\d+)", text):
        found["failed_at"] = int(m.group(1))
    found["last"] = [line for line in text.splitlines() if line.startswith("ding-dist:")][-1]
    return found


def report(name: str, trials: list[dict]) -> None:
    print(f"{name}: exit codes {[t['code'] for t in trials]}")
    for key in ("exit_s", "resumed_s"):
        if values := [t[key] for t in trials if key in t]:
            print(f"  {key}: median {statistics.median(values):.2f} s (min {min(values):.2f}, max {max(values):.2f})")
    if lost := [t["failed_at"] - t["resumed_at"] for t in trials if "failed_at" in t and "resumed_at" in t]:
        print(f"  env steps lost: {sorted(lost)} (median {statistics.median(lost):.0f})")
    print(f"  last line: {trials[-1]['last'][:150]}")


if __name__ == "__main__":
    random.seed(0)
    report("SIGKILL rank 1", [trial("SIGKILL", "--max-env-steps", "400000") for _ in range(RUNS)])
    report(
        "SIGKILL rank 1 at a random time, --max-restarts 3",
        [
            trial("SIGKILL", "--max-env-steps", "20000", "--max-restarts", "3", delay=random.uniform(0, 1))
            for _ in range(RUNS)
        ],
    )
    report("SIGTERM to ding-dist", [trial("SIGTERM", "--max-env-steps", "400000") for _ in range(RUNS)])
    report(
        "SIGSTOP rank 1 (hang), --timeout 10 --health-timeout 5",
        [trial("SIGSTOP", "--max-env-steps", "400000", "--timeout", "10", "--health-timeout", "5")],
    )
