"""Start-up: how long ``ding-dist train`` takes to reach its first env step, next to ``import torch, gymnasium``.

Each variant is a fresh process, timed from just before it is started until a line it writes on stderr (read line by
line): the time the user waits for that point. Each is also timed until it exits.

- ``import torch, gymnasium``: ``python -c "import torch, gymnasium"``, then a line (the floor any torch RL process
  pays);
- ``+ one torch.optim.Adam step``: the same plus one step of torch's Adam, then a line: a torch optimizer's first call
  imports ``torch._dynamo`` (and sympy), so this is where a process that trains with torch's optimizers as they come
  reaches its first step (ding_dist's optimizers leave that import out: ``ding_dist.optim.eager``);
- ``cartpole_ppo``: ``ding-dist train cartpole_ppo --max-env-steps 256`` until the line its training loop logs right
  before the first collect (``... exp dir ...``);
- ``minatar_ppo`` (``--minatar``): ``ding-dist train --algo ppo --env MinAtar/Breakout-v1`` with 64 envs, until that
  line (the process is then killed: only its start-up is measured).

The exit times include the interpreter's teardown, which ``ding-dist`` skips (``os._exit`` once the run is done) and a
plain ``python -c`` does not (0.5-1 s with torch loaded): compare the first-line columns. The variants run interleaved
(A, B, C, A, B, C, ...) ``--reps`` times; medians are printed with their ratio to ``import torch, gymnasium`` (its
first line). Every run writes into a temporary folder. ``--tree DIR`` adds the cartpole rows of the ding_dist found in
``DIR`` (``PYTHONPATH=DIR``: e.g. a copy of the package before a change), in the same rounds.

Run:  python benchmarks/bench_startup.py [--reps 5] [--minatar] [--tree /tmp/before]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LOOP_MARK = ", exp dir "  # the training loop's line before its first collect (data-parallel and learner loops)
READY = "bench_startup: ready"
IMPORT = "import torch, gymnasium"
STEP = "p = torch.zeros(1, requires_grad=True); o = torch.optim.Adam([p]); p.sum().backward(); o.step()"


def cli() -> list[str]:
    """The ``ding-dist`` console script of this interpreter's environment (else ``python -m`` the CLI)."""
    beside = Path(sys.executable).parent / "ding-dist"
    if beside.exists():
        return [str(beside)]
    found = shutil.which("ding-dist")
    return [found] if found else [sys.executable, "-m", "ding_dist.entry.cli"]


def python_c(code: str) -> list[str]:
    """``python -c code`` that writes :data:`READY` on stderr once ``code`` ran."""
    return [sys.executable, "-c", f"{code}\nimport sys; print({READY!r}, file=sys.stderr, flush=True)"]


def time_to_line(argv: list[str], cwd: Path, mark: str, wait: bool = True, tree: str | None = None):
    """Seconds from starting ``argv`` (with ``PYTHONPATH=tree`` when given) until it writes a line holding ``mark``
    on stderr, and until it exits (``wait``; it must succeed) or None (killed once the line came)."""
    env = dict(os.environ, PYTHONPATH=tree) if tree else None
    start = time.monotonic()
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)  # fmt: skip
    first, tail = None, []
    assert proc.stderr is not None
    for line in proc.stderr:
        tail = [*tail[-20:], line]
        if first is None and mark in line:
            first = time.monotonic() - start
            if not wait:
                os.killpg(proc.pid, signal.SIGKILL)
                break
    code = proc.wait()
    total = time.monotonic() - start
    if first is None or (wait and code != 0):
        raise RuntimeError(f"{' '.join(argv)} exited with {code} before {mark!r}:\n{''.join(tail)}")
    return first, total if wait else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=5, help="runs of each variant, interleaved (medians printed)")
    parser.add_argument("--minatar", action="store_true", help="also MinAtar Breakout PPO (64 envs)")
    parser.add_argument("--tree", help="also the cartpole rows of the ding_dist in this folder (PYTHONPATH)")
    args = parser.parse_args(argv)
    ding = cli()
    first: dict[str, list[float]] = {}
    exits: dict[str, list[float]] = {}

    def add(name: str, times: tuple[float, float | None]) -> None:
        first.setdefault(name, []).append(times[0])
        if times[1] is not None:
            exits.setdefault(name, []).append(times[1])

    with tempfile.TemporaryDirectory(prefix="bench_startup_") as tmp:
        work = Path(tmp)
        for rep in range(args.reps):
            add(IMPORT, time_to_line(python_c(IMPORT), work, READY))
            add("+ one torch.optim.Adam step", time_to_line(python_c(f"{IMPORT}; {STEP}"), work, READY))
            cmd = [*ding, "train", "cartpole_ppo", "--max-env-steps", "256", "--exp-dir", f"cartpole_{rep}"]
            add("ding-dist train cartpole_ppo", time_to_line(cmd, work, LOOP_MARK))
            if args.tree:
                cmd[-1] = f"tree_cartpole_{rep}"
                add("ding-dist train cartpole_ppo (--tree)", time_to_line(cmd, work, LOOP_MARK, tree=args.tree))
            if args.minatar:
                cmd = [*ding, "train", "--algo", "ppo", "--env", "MinAtar/Breakout-v1", "--max-env-steps", "1",
                       "--set", "env.collector_env_num=64", "--exp-dir", f"minatar_{rep}"]  # fmt: skip
                add("ding-dist train minatar ppo (64 envs)", time_to_line(cmd, work, LOOP_MARK, wait=False))
    base = statistics.median(first[IMPORT])
    print(f"{'variant':<40} {'first line s':>12} {'min-max':>11} {'/ import':>9} {'exit s':>7}")
    for name, values in first.items():
        med = statistics.median(values)
        done = f"{statistics.median(exits[name]):7.2f}" if name in exits else f"{'-':>7}"
        print(f"{name:<40} {med:>12.2f} {min(values):>5.2f}-{max(values):<5.2f} {med / base:>8.2f}x {done}")
    print(f"({args.reps} runs each, interleaved; medians; first line: the import's end, or the training loop's line "
          "before its first env step; '/ import': over 'import torch, gymnasium')")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
