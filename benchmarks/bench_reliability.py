"""Time dead-rank detection, restart, SIGTERM and frozen-rank detection of `ding-dist train --nproc 2` (Linux:
finds ranks in /proc), and the heartbeat's cost per training step.

Run from the repository root:  python benchmarks/bench_reliability.py [RUNS] [SECTIONS]
RUNS defaults to 5; SECTIONS is a comma list of kill,restart,sigterm,hang,freeze,step (default: all).
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
SECTIONS = set((sys.argv[2] if len(sys.argv) > 2 else "kill,restart,sigterm,hang,freeze,step").split(","))
PPO_CONFIG = "configs/cartpole_ppo_config.py"
# PPO: a checkpoint to wait for, and no early stop at the return threshold.
PPO_FAST = ["policy.other.checkpoint.freq=2048", "env.stop_value=1e9", "policy.other.log_freq=1024"]
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


def trial(hurt: str, *flags: str, delay: float = 0.0, config: str = CONFIG, overrides: list = FAST) -> dict:
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
        *overrides,
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
    found["named"] = [line for line in text.splitlines() if "stopped making progress" in line][:1]
    return found


def report(name: str, trials: list[dict]) -> None:
    print(f"{name}: exit codes {[t['code'] for t in trials]}")
    for key in ("exit_s", "resumed_s"):
        if values := [t[key] for t in trials if key in t]:
            print(f"  {key}: median {statistics.median(values):.2f} s (min {min(values):.2f}, max {max(values):.2f})")
    if lost := [t["failed_at"] - t["resumed_at"] for t in trials if "failed_at" in t and "resumed_at" in t]:
        print(f"  env steps lost: {sorted(lost)} (median {statistics.median(lost):.0f})")
    print(f"  last line: {trials[-1]['last'][:150]}")
    if trials[-1]["named"]:
        print(f"  heartbeat line: {trials[-1]['named'][0][:200]}")


# ------------------------------------------------------------------------- heartbeat cost per step
BLOCK, CYCLES = 300, 20  # steps per block; blocks cycle off / 2 s / 0.01 s, so load drifts hit all alike
PERIODS = {"off": 0.0, "2 s (default)": 2.0, "0.01 s (stress)": 0.01}


def _train_steps(store_of_launcher: bool) -> dict[str, list[float]]:
    """Per-step seconds of a small PPO-sized update (4-64-64-2 MLP, batch 128, gradient allreduce), by
    heartbeat period; the heartbeat is restarted at each block (outside the timed steps)."""
    import torch

    import ding_dist as dd

    address = dd.comm.current_heartbeat().address if store_of_launcher else None
    dd.comm.stop_heartbeat()
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(4, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64), torch.nn.Tanh(), torch.nn.Linear(64, 2)
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    model, optimizer = dd.distribute(model, optimizer)
    x = torch.randn(128, 4)
    times: dict[str, list[float]] = {name: [] for name in PERIODS}
    for block in range(CYCLES * len(PERIODS) + 1):
        name = list(PERIODS)[block % len(PERIODS)]
        dd.comm.stop_heartbeat()
        if PERIODS[name] > 0:  # store=None: beat into the group's store and watch the peer
            dd.comm.start_heartbeat(PERIODS[name], 10.0, store=address)
        for _ in range(BLOCK):
            start = time.perf_counter()
            loss = model(x).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if block > 0:  # the first block warms up
                times[name].append(time.perf_counter() - start)
    dd.comm.stop_heartbeat()
    return times


def heartbeat_cost(rounds: int) -> None:
    from ding_dist.comm import launch

    print(f"heartbeat cost per step: 2 ranks, {BLOCK}-step blocks cycling {list(PERIODS)} x {CYCLES}, rank 0")
    for watched, what in ((True, "launcher watches (ding-dist train)"), (False, "ranks watch each other")):
        ratios: dict[str, list[float]] = {name: [] for name in PERIODS}
        medians: dict[str, list[float]] = {name: [] for name in PERIODS}
        for _ in range(rounds):
            times = launch(_train_steps, 2, watched, heartbeat=watched, timeout=600)[0]
            for name in PERIODS:
                medians[name].append(statistics.median(times[name]))
                ratios[name].append(medians[name][-1] / statistics.median(times["off"]))
        print(f"  {what}:")
        for name in PERIODS:
            per_run = ", ".join(f"{r:.3f}" for r in ratios[name])
            print(f"    {name}: median step {statistics.median(medians[name]) * 1e6:.0f} us, "
                  f"ratio to off {per_run}")  # fmt: skip


def beat_cost() -> None:
    """One beat as the thread makes it (a JSON value and one TCPStore set over loopback), in microseconds."""
    import json
    from datetime import timedelta

    import torch.distributed as dist

    server = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=10))
    client = dist.TCPStore("127.0.0.1", server.port, is_master=False, timeout=timedelta(seconds=10))
    times = []
    for seq in range(5000):
        start = time.perf_counter()
        value = json.dumps({"seq": seq, "pid": os.getpid(), "host": "h", "state": "alive", "gen": 0})
        client.set("ding_dist/heartbeat/0", value)
        times.append(time.perf_counter() - start)
    print(f"one beat (json + TCPStore.set, loopback): median {statistics.median(times) * 1e6:.1f} us")


if __name__ == "__main__":
    random.seed(0)
    if "kill" in SECTIONS:
        report("SIGKILL rank 1", [trial("SIGKILL", "--max-env-steps", "400000") for _ in range(RUNS)])
    if "restart" in SECTIONS:
        report(
            "SIGKILL rank 1 at a random time, --max-restarts 3",
            [
                trial("SIGKILL", "--max-env-steps", "20000", "--max-restarts", "3", delay=random.uniform(0, 1))
                for _ in range(RUNS)
            ],
        )
    if "sigterm" in SECTIONS:
        report("SIGTERM to ding-dist", [trial("SIGTERM", "--max-env-steps", "400000") for _ in range(RUNS)])
    if "hang" in SECTIONS:  # without the heartbeat: the collective timeout, the health check, torchrun's grace
        os.environ["DING_DIST_HEARTBEAT_S"] = "0"
        report(
            "SIGSTOP rank 1, heartbeat off (DING_DIST_HEARTBEAT_S=0), --timeout 10 --health-timeout 5",
            [trial("SIGSTOP", "--max-env-steps", "400000", "--timeout", "10", "--health-timeout", "5")],
        )
        os.environ.pop("DING_DIST_HEARTBEAT_S")
    if "freeze" in SECTIONS:  # the frozen-rank case: PPO, DING_DIST_TIMEOUT=30, the default heartbeat (2 s, 10 s)
        report(
            "SIGSTOP rank 1 of PPO, --timeout 30, default heartbeat",
            [
                trial("SIGSTOP", "--max-env-steps", "400000", "--timeout", "30", config=PPO_CONFIG, overrides=PPO_FAST)
                for _ in range(RUNS)
            ],
        )
    if "step" in SECTIONS:
        beat_cost()
        heartbeat_cost(3)
