"""``ding-dist eval``: a checkpoint's greedy episodes, its summary (``--json``: one record per episode) and its
recordings (``--video OUT.mp4``, ``--gif OUT.gif``: the evaluated episodes, played again from their seeds).

Example:
    >>> from ding_dist.entry.cli import main
    >>> main(["eval", "--ckpt", "runs/cartpole_dqn"])  # doctest: +SKIP
    0
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ding_dist.entry.cli.checks import (
    CheckpointChoice,
    check_config,
    checked_config,
    choose_checkpoint,
    name_the_config,
)
from ding_dist.entry.cli.errors import (
    PROG,
    UsageError,
    refuse_unwritable,
)
from ding_dist.entry.cli.launching import print_rank0

__all__ = ["eval_command"]


def _eval_config(args: argparse.Namespace) -> Path:
    """``eval``'s CONFIG: as given, else the saved config (as data) of the run ``--ckpt`` belongs to."""
    if args.config is not None:
        return check_config(args.config)
    from ding_dist.entry.services.run_folder import find_run_config

    found = find_run_config(args.ckpt)  # the run's config as data: nothing of a copied folder runs
    if found is None:
        raise UsageError(f"--ckpt {args.ckpt!r} is not in a run folder with a saved config.json: "
                         f"{name_the_config(args.ckpt, 'eval')}")  # fmt: skip
    return check_config(str(found))


def eval_command(args: argparse.Namespace) -> int:
    """``ding-dist eval``: evaluate ``--ckpt`` (and record it with ``--video``/``--gif``); the exit code."""
    choice = choose_checkpoint(args.ckpt, getattr(args, "which", None))  # a missing checkpoint is reported as such
    config = _eval_config(args)
    if getattr(args, "gif", None) and Path(args.gif).suffix.lower() != ".gif":
        raise UsageError(f"--gif must end in .gif, got {args.gif!r}")
    if args.video and Path(args.video).suffix.lower() != ".mp4":
        raise UsageError(f"--video must end in .mp4, got {args.video!r}")
    for flag, out in (("--video", args.video), ("--gif", getattr(args, "gif", None))):
        if out:
            refuse_unwritable(out, flag)  # before the evaluation and the rendering
    from ding_dist.comm import DistContext
    from ding_dist.entry import pipeline

    cfg = checked_config(config, args)  # once: the evaluation and the recordings share it
    if choice.why is not None and not args.json:
        print_rank0(f"evaluating {choice.path} ({choice.why})")
    recording = args.video or getattr(args, "gif", None)
    with DistContext():
        out = pipeline.evaluate(cfg, str(choice.path), episodes=args.episodes, seed=args.seed,
                                replay=_recorder(cfg, args) if recording else None)  # fmt: skip
        if args.json:
            print_rank0(json.dumps(_eval_record(out, choice, args.seed)))
        else:
            print_rank0(
                f"checkpoint {choice.path}: mean_return {out['mean_return']:.3f} +/- {out['std_return']:.3f} "
                f"over {len(out.get('returns', [])) or args.episodes} episodes (seed {args.seed})"
            )
    return 0


def _recorder(cfg: Any, args: argparse.Namespace) -> Callable[[Any, dict[str, Any]], None]:
    """``eval --video OUT.mp4`` / ``--gif OUT.gif``: after the evaluation, its policy plays the first evaluated
    episode again (all K with ``--episodes K``) from its reset seed, back to back in the one file named
    (:mod:`ding_dist.entry.cli.video`); the files go to the result's ``videos`` and ``gifs``."""

    def record(policy: Any, result: dict[str, Any]) -> None:
        from ding_dist.entry.cli.video import record_episodes, record_gif

        count = len(result["seeds"]) if getattr(args, "episodes_given", False) else 1
        seeds = result["seeds"][:count]
        if any(s is None for s in seeds):  # an env that runs its own seed stream: nothing to play again
            raise UsageError(f"env {cfg.env.get('id')!r}: the evaluated episodes have no seeds of their own, so "
                             "they cannot be recorded")  # fmt: skip
        for flag, out, key, write in (("--video", args.video, "videos", record_episodes),
                                      ("--gif", getattr(args, "gif", None), "gifs", record_gif)):  # fmt: skip
            if not out:
                continue
            try:
                made = write(cfg, policy, out, seeds)
            except ValueError as e:
                raise UsageError(str(e)) from None
            result.setdefault(key, []).append(str(made.path))
            _compare(made, result["lengths"][:count], result["returns"][:count], flag)
            if not args.json:
                print_rank0(f"wrote {made.path} ({_episodes_text(made.lengths, len(result['seeds']))})")

    return record


def _episodes_text(lengths: list[int], evaluated: int) -> str:
    """``evaluated episode 1 of 10: 146 steps`` or ``the 3 evaluated episodes: 146, 166, 195 steps``."""
    if len(lengths) == 1:
        return f"evaluated episode 1 of {evaluated}: {lengths[0]} steps"
    return f"the {len(lengths)} evaluated episodes: {', '.join(map(str, lengths))} steps"


def _compare(made: Any, lengths: list[int], returns: list[float], flag: str) -> None:
    """One warning line when the recorded episodes are not the evaluated ones (a policy or env that does not
    play the same episode twice from one seed)."""
    same = made.lengths == lengths and all(math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-6)
                                           for a, b in zip(made.returns, returns))  # fmt: skip
    if not same:
        print(
            f"{PROG}: warning: {flag} {made.path}: the recorded episodes ({made.lengths} steps, returns "
            f"{[round(r, 3) for r in made.returns]}) differ from the evaluated ones ({lengths} steps, returns "
            f"{[round(r, 3) for r in returns]}): the policy or the env does not play the same episode twice from "
            "one seed",
            file=sys.stderr,
            flush=True,
        )


def _eval_record(out: dict[str, Any], choice: CheckpointChoice, seed: int) -> dict[str, Any]:
    """``eval --json``: the summary, which checkpoint and why, and one ``{"return", "length", "seed"}`` per episode
    (``seed``: its reset seed, which the recordings play again)."""
    episodes = [{"return": float(r), "length": int(n), "seed": s}
                for r, n, s in zip(out["returns"], out["lengths"], out["seeds"])]  # fmt: skip
    return {
        "checkpoint": str(choice.path),
        "which": choice.which,
        "why": choice.why,
        "seed": seed,
        "videos": out.get("videos", []),
        "gifs": out.get("gifs", []),
        "mean_return": float(out["mean_return"]),
        "std_return": float(out["std_return"]),
        "episodes": episodes,
    }
