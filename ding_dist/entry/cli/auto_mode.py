"""``ding-dist train CONFIG --nproc auto``: try each way of running on this machine's cores for a short while, then
train in the one with the most env steps per second, and say which and why.

The candidates on ``C`` CPU cores: one process; data-parallel ``--nproc n`` for ``n`` = 2, 4, 8, ... and ``C``
(those the config's envs and batches split into); ``--actors C-1 --learners 1`` for an off-policy policy (an
on-policy one would learn from lagged actors, which changes what it learns). Each runs the config for real in a
temporary folder, with a log point every 256 env steps (or every iteration, if longer) and no evaluation,
checkpoint or stop value, until its log spans ``--probe-seconds`` of training after the first update; then it is
stopped. Its rate is the env steps per second between those log points of its own ``metrics.jsonl``: start-up and
a replay buffer's warm-up are left out, as they do not depend on the mode. The fastest wins, except that a mode
with fewer processes within :data:`MARGIN` of it is taken instead (less to go wrong, nothing to synchronize). Each
of these modes learns as one process does (docs/training.md), so only the speed is at stake.

Example:
    >>> steady_rate([(1000, 1.0, 0), (2000, 2.0, 10), (4000, 3.0, 30), (6000, 4.0, 50)])
    (2000.0, 2.0)
    >>> pick([Probe("1 process", 1, [], 1000.0), Probe("--nproc 2", 2, ["--nproc", "2"], 1030.0)]).label
    '1 process'
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ding_dist.entry.cli.errors import PROG, UsageError

__all__ = ["DEFAULT_PROBE_SECONDS", "MARGIN", "Probe", "candidates", "choose_mode", "pick", "steady_rate"]

#: Seconds of training each mode is measured for, after its first update (``--probe-seconds``).
DEFAULT_PROBE_SECONDS = 20.0
#: A mode with fewer processes within this share of the fastest one is taken instead of it.
MARGIN = 0.05
#: What every probe sets: a log point every 256 env steps or iteration (its clock), no evaluation, no checkpoint,
#: no stop at a return (only its speed is wanted).
PROBE_OVERRIDES = (
    "policy.other.log_freq=256",
    "env.stop_value=None",
    "policy.eval.eval_freq=0",
    "policy.other.checkpoint.freq=0",
    "policy.other.checkpoint.every_minutes=0",
)


@dataclass
class Probe:
    """One way to run: its label, processes, the ``train`` flags that ask for it (``actors``: how many of the
    processes act, 0 for data-parallel), and its measured rate."""

    label: str
    processes: int
    flags: list[str]
    rate: float | None = None  # env steps per second; None: not measured
    note: str = ""  # why it was not measured, or how its run ended
    actors: int = 0


def steady_rate(rows: Sequence[tuple[float, float, float]]) -> tuple[float | None, float]:
    """Env steps per second of a run's log points ``(env_steps, wall_s, train_iters)`` (oldest first), from its first
    point after an update to its last, and the seconds that spans; ``(None, span)`` with fewer than two such points.

    Example:
        >>> steady_rate([(500, 0.5, 0), (1000, 1.5, 4), (3000, 2.5, 20)])
        (2000.0, 1.0)
    """
    learning = [r for r in rows if r[2] > 0]
    if len(learning) < 2:
        return None, 0.0
    (steps0, wall0, _), (steps1, wall1, _) = learning[0], learning[-1]
    span = wall1 - wall0
    return ((steps1 - steps0) / span if span > 0 else None), span


def pick(probes: Sequence[Probe]) -> Probe:
    """The probe to train with: the fastest measured one, or one with fewer processes within :data:`MARGIN` of it;
    the first probe (one process) when none was measured.

    Example:
        >>> pick([Probe("1 process", 1, [], 900.0), Probe("--nproc 2", 2, ["--nproc", "2"], 1200.0)]).label
        '--nproc 2'
    """
    measured = [p for p in probes if p.rate is not None]
    if not measured:
        return probes[0]
    best = max(p.rate for p in measured)
    near = [p for p in measured if p.rate >= best * (1 - MARGIN)]
    return min(near, key=lambda p: p.processes)  # min keeps the first of equals: the order candidates() gives


def candidates(cfg: Any, cores: int, config: Path, args: argparse.Namespace) -> tuple[list[Probe], list[str]]:
    """The modes to try on ``cores`` CPU cores and the lines saying which were left out and why."""
    from ding_dist.config import ConfigError
    from ding_dist.entry.cli.checks import check_local_world, checked_config
    from ding_dist.policy.registry import get_policy_cls

    probes, skipped = [Probe("1 process", 1, [])], []
    if cores < 2:
        return probes, skipped
    sizes, n = [], 2
    while n < cores:
        sizes.append(n)
        n *= 2
    for n in [*sizes, cores]:
        try:
            check_local_world(cfg, n)
        except UsageError as e:
            skipped.append(f"--nproc {n}: {e}")
            continue
        probes.append(Probe(f"--nproc {n}", n, ["--nproc", str(n)]))
    roles = [f"actor_learner.actors={cores - 1}", "actor_learner.learners=1"]
    label = f"--actors {cores - 1} --learners 1"
    policy = cfg.create_config.policy.type
    if get_policy_cls(policy).on_policy:
        skipped.append(f"{label}: {policy} is on-policy, and its actors' policy lag would change what it "
                       "learns")  # fmt: skip
        return probes, skipped
    try:
        trial = argparse.Namespace(**{**vars(args), "overrides": [*args.overrides, *roles]})
        check_local_world(checked_config(config, trial), cores)
    except (UsageError, ConfigError) as e:
        skipped.append(f"{label}: {e}")
    else:
        probes.append(Probe(label, cores, ["--actors", str(cores - 1), "--learners", "1"], actors=cores - 1))
    return probes, skipped


def _rows(folder: Path) -> list[tuple[float, float, float]]:
    """The log points ``(env_steps, wall_s, train_iters)`` a probe's run has written so far."""
    from ding_dist.utils.logging import read_metrics

    try:
        records = read_metrics(folder / "tb")
    except FileNotFoundError:
        return []
    keys = ("time/env_steps", "time/wall_time_s", "time/train_iters")
    return [tuple(float(r[k]) for k in keys) for r in records if all(k in r for k in keys)]


def _stop(proc: subprocess.Popen, grace_s: float = 60.0) -> None:
    """Stop a probe's run as Ctrl-C would (SIGTERM: every rank stops after its iteration), then kill what is left,
    also when a second Ctrl-C comes while it stops."""
    try:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=grace_s)
    except (subprocess.TimeoutExpired, ProcessLookupError):
        pass
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # its ranks and env workers too, should any outlive it
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()


def _last_line(path: Path) -> str:
    try:
        lines = [line.strip() for line in path.read_text(encoding="utf-8", errors="replace").splitlines()]
    except OSError:
        return ""
    lines = [line for line in lines if line]
    errors = [line for line in lines if "error" in line.lower()]
    return (errors or lines or [""])[-1][:200]


def _measure(probe: Probe, argv: list[str], folder: Path, seconds: float) -> None:
    """Run ``argv`` (a ``ding-dist train`` of this probe) in ``folder`` until its log spans ``seconds`` after its
    first update, it ends, or a cap of start-up plus three times ``seconds`` passes; set the probe's rate."""
    out = folder.with_suffix(".log")  # beside the run's folder, which the run makes
    cap = 60.0 + 3 * seconds
    with open(out, "wb") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip
        start = time.monotonic()
        try:
            while True:
                ended = proc.poll() is not None
                rate, span = steady_rate(_rows(folder))
                if ended or span >= seconds or time.monotonic() - start > cap:
                    break
                time.sleep(0.5)
        finally:
            _stop(proc)
    probe.rate = rate
    if ended and proc.returncode != 0:
        probe.rate, probe.note = None, f"failed (exit code {proc.returncode}): {_last_line(out)}"
    elif rate is None:
        probe.note = "not measured: fewer than two log points after its first update " + (
            "before its run ended" if ended else f"in {cap:.0f} s"
        )
    elif span < seconds:
        probe.note = f"measured over {span:.1f} s"


def choose_mode(config: Path, cfg: Any, args: argparse.Namespace, cores: int, seconds: float) -> Probe:
    """Probe the modes :func:`candidates` gives for ``config`` (compiled as ``cfg`` with ``args``' seed and
    overrides) on ``cores`` cores, ``seconds`` each, printing a line per mode; return the one :func:`pick` takes."""
    probes, skipped = candidates(cfg, cores, config, args)
    if len(probes) == 1:
        print(f"{PROG}: --nproc auto: one process ({cores} CPU core{'s' if cores > 1 else ''}"
              f"{'; ' + '; '.join(skipped) if skipped else ''})", file=sys.stderr, flush=True)  # fmt: skip
        return probes[0]
    print(f"{PROG}: --nproc auto: trying {len(probes)} ways to run on {cores} CPU cores, about {seconds:g} s of "
          "training each (--probe-seconds), then training in the fastest", file=sys.stderr, flush=True)  # fmt: skip
    for line in skipped:
        print(f"{PROG}:   left out {line}", file=sys.stderr, flush=True)
    base = [sys.executable, "-m", "ding_dist.entry.cli", "train", str(config), "--seed", str(int(cfg.seed))]
    base += ["--set", *args.overrides, *PROBE_OVERRIDES]
    if (cfg.policy.other.get("replay_buffer") or {}).get("save_in_checkpoint"):  # the stop's checkpoint: no replay
        base.append("policy.other.replay_buffer.save_in_checkpoint=False")
    width = max(len(p.label) for p in probes)
    with tempfile.TemporaryDirectory(prefix="ding-dist-probe-") as tmp:
        for i, probe in enumerate(probes):
            folder = Path(tmp) / f"mode{i}"
            _measure(probe, [*base, *probe.flags, "--exp-dir", str(folder)], folder, seconds)
            ratio = "" if probe.rate is None or probes[0].rate is None else f"  {probe.rate / probes[0].rate:.2f}x"
            shown = f"{probe.rate:,.0f} env steps/s{ratio}" if probe.rate is not None else ""
            print(f"{PROG}:   {probe.label:<{width}}  {shown}{'  ' if shown and probe.note else ''}{probe.note}",
                  file=sys.stderr, flush=True)  # fmt: skip
    chosen = pick(probes)
    fastest = max((p for p in probes if p.rate is not None), key=lambda p: p.rate, default=None)
    why = ("no mode was measured" if fastest is None else "the fastest" if chosen is fastest
           else f"within {MARGIN:.0%} of {fastest.label}, with fewer processes")  # fmt: skip
    print(f"{PROG}: --nproc auto: training with {chosen.label} ({why})", file=sys.stderr, flush=True)
    return chosen
