"""The summary a finished run gives its user: what it trained, why it stopped, its checkpoints, what to run next.

The CLI prints these lines on stdout after a run; :func:`ding_dist.entry.train` logs them (rank 0), so a script
gets the same account.

Example:
    >>> lines = run_summary({"env_steps": 512, "train_iters": 32, "world_size": 1, "wall_time_s": 2.5,
    ...     "best_eval_return": 9.2, "last_eval_return": 9.2, "stopped_by": "max_env_steps", "exp_dir": "runs/x",
    ...     "checkpoint": {"last": "runs/x/ckpt/ckpt_000000512.pt", "best": "runs/x/ckpt/best.pt"}})
    >>> print("\\n".join(lines[1:]))
    stopped by max_env_steps: the run's budget of env steps was reached
    checkpoints: runs/x/ckpt/ckpt_000000512.pt (last), runs/x/ckpt/best.pt (best eval return 9.20)
    next: ding-dist eval --ckpt runs/x  |  ding-dist resume runs/x --max-env-steps 1024
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ding_dist.entry.threads import cpu_cores
from ding_dist.utils.fileio import shown_path

__all__ = ["COLLECT_BOUND", "STOP_REASONS", "run_summary", "time_lines"]

#: What each ``result["stopped_by"]`` that is not a signal means, in words.
STOP_REASONS = {
    "max_env_steps": "the run's budget of env steps was reached",
    "stop_value": "an evaluation reached env.stop_value",
}


#: A one-process run whose env stepping and acting took at least this share of its loop gets the hint that more
#: processes would share that work (each steps 1/N of the envs; the learning is the same at every world size).
COLLECT_BOUND = 0.5

#: The phases of ``result["phases_s"]`` in the order shown, with their names in words.
_PHASES = {"startup": "start-up", "collect": "collect", "learn": "learn", "wait_data": "waiting for data",
           "publish": "publishing weights", "eval": "eval", "log": "log", "checkpoint": "checkpoint",
           "other": "other"}  # fmt: skip


def time_lines(phases: Mapping[str, float], world_size: int = 1, cores: int | None = None) -> list[str]:
    """Where a run's time went (rank 0's clock): the start-up, then each phase of the loop with its share of the loop;
    for a one-process run whose collecting took at least :data:`COLLECT_BOUND` of the loop on a machine of several
    cores (``cores``, default: this process's), a second line saying that more processes would share it.

    Example:
        >>> time_lines({"startup": 3.0, "collect": 6.0, "learn": 3.0, "other": 0.01}, cores=4)[0]
        'time: start-up 3.0 s; loop: collect 6.0 s (67%), learn 3.0 s (33%)'
        >>> time_lines({"startup": 3.0, "collect": 6.0, "learn": 3.0}, cores=4)[1][:61]
        'hint: stepping the envs and acting took 67% of the loop; with'
    """
    loop = {k: float(v) for k, v in phases.items() if k != "startup" and isinstance(v, (int, float))}
    total = sum(loop.values())
    if total <= 0:
        return []
    shown = [(k, v) for k, v in _ordered(loop) if v >= 0.05 or k in ("collect", "learn")]
    parts = [f"{_PHASES.get(k, k)} {v:.1f} s ({100 * v / total:.0f}%)" for k, v in shown]
    head = (
        f"time: start-up {float(phases['startup']):.1f} s; "
        if isinstance(phases.get("startup"), (int, float))
        else "time: "
    )
    lines = [head + "loop: " + ", ".join(parts)]
    share = loop.get("collect", 0.0) / total
    cores = cpu_cores() if cores is None else cores
    if world_size == 1 and cores > 1 and share >= COLLECT_BOUND:
        lines.append(
            f"hint: stepping the envs and acting took {100 * share:.0f}% of the loop; with {cores} cores, "
            f"--nproc N (N <= {cores}, dividing the envs) steps 1/N of them in each process, the same learning, "
            "or --actors N-1 --learners 1 takes them off the learner"
        )
    return lines


def _ordered(loop: Mapping[str, float]) -> list[tuple[str, float]]:
    known = [(k, loop[k]) for k in _PHASES if k in loop]
    return known + [(k, v) for k, v in loop.items() if k not in _PHASES]


def _num(value: Any) -> str:
    return f"{value:.2f}" if isinstance(value, (int, float)) else str(value)


def run_summary(result: Mapping[str, Any], exp_dir: str | os.PathLike | None = None) -> list[str]:
    """The lines that close a run, from its result (``train()``'s return, ``result.json``): one line of what it
    trained; where the time went (:func:`time_lines`); why it stopped; the checkpoints written (last and best); the
    commands to evaluate or continue it.

    Example::

        print("\\n".join(run_summary(train("configs/cartpole_ppo_config.py"))))
    """
    folder = result.get("exp_dir") or exp_dir
    where = f"; result: {shown_path(Path(folder) / 'result.json')}" if folder else ""
    lines = [
        f"trained {result.get('env_steps')} env steps ({result.get('train_iters')} train iters, "
        f"world size {result.get('world_size')}) in {_num(result.get('wall_time_s'))} s; "
        f"eval return best {_num(result.get('best_eval_return'))}, last {_num(result.get('last_eval_return'))}{where}"
    ]
    lines += time_lines(result.get("phases_s") or {}, int(result.get("world_size") or 1))
    stopped = str(result.get("stopped_by"))
    if stopped in STOP_REASONS:
        lines.append(f"stopped by {stopped}: {STOP_REASONS[stopped]}")
    else:  # a signal (SIGTERM, SIGUSR1, Ctrl-C): the run saved the step it reached
        lines.append(f"stopped by {stopped} at env step {result.get('env_steps')}, checkpointed")
    ckpt = result.get("checkpoint") or {}
    shown = []
    if ckpt.get("last"):
        shown.append(f"{shown_path(ckpt['last'])} (last)")
    if ckpt.get("best"):
        shown.append(f"{shown_path(ckpt['best'])} (best eval return {_num(result.get('best_eval_return'))})")
    if shown:
        lines.append("checkpoints: " + ", ".join(shown))
    if folder and shown:
        run = shown_path(folder)
        steps = int(result.get("env_steps") or 0)
        more = f"--max-env-steps {2 * steps}" if steps else "--max-env-steps N"
        if stopped == "stop_value":
            more = f"--set env.stop_value=None {more}"
        elif stopped != "max_env_steps":  # stopped by a signal: the run continues to its own budget
            more = ""
        resume = f"ding-dist resume {run}" + (f" {more}" if more else "")
        lines.append(f"next: ding-dist eval --ckpt {run}  |  {resume}")
    return lines
