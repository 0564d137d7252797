"""``ding-dist eval``: a checkpoint's greedy episodes, its summary (``--json``: one record per episode) and its
recordings (``--video OUT.mp4``, ``--gif OUT.gif``).

Example:
    >>> from ding_dist.entry.cli import main
    >>> main(["eval", "--ckpt", "runs/cartpole_dqn"])  # doctest: +SKIP
    0
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ding_dist.entry.cli.checks import check_config, compile_config, name_the_config, resolve_checkpoint
from ding_dist.entry.cli.errors import (
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

    resolve_checkpoint(args.ckpt)  # a missing checkpoint is reported as such
    found = find_run_config(args.ckpt)  # the run's config as data: nothing of a copied folder runs
    if found is None:
        raise UsageError(f"--ckpt {args.ckpt!r} is not in a run folder with a saved config.json: "
                         f"{name_the_config(args.ckpt, 'eval')}")  # fmt: skip
    return check_config(str(found))


def eval_command(args: argparse.Namespace) -> int:
    """``ding-dist eval``: evaluate ``--ckpt`` (and record it with ``--video``/``--gif``); the exit code."""
    config = _eval_config(args)
    ckpt = resolve_checkpoint(args.ckpt)
    if getattr(args, "gif", None) and Path(args.gif).suffix.lower() != ".gif":
        raise UsageError(f"--gif must end in .gif, got {args.gif!r}")
    if args.video and Path(args.video).suffix.lower() != ".mp4":
        raise UsageError(f"--video must end in .mp4, got {args.video!r}")
    for flag, out in (("--video", args.video), ("--gif", getattr(args, "gif", None))):
        if out:
            refuse_unwritable(out, flag)  # before the evaluation and the rendering
    from ding_dist.comm import DistContext
    from ding_dist.entry import pipeline

    cfg = compile_config(config, args)  # once: the evaluation and the recordings share it
    with DistContext():
        out = pipeline.evaluate(cfg, str(ckpt), episodes=args.episodes, seed=args.seed)
        if args.video:
            out["videos"] = [str(p) for p in _record_video(cfg, ckpt, args)]
        if getattr(args, "gif", None):
            out["gifs"] = [str(p) for p in _record_video(cfg, ckpt, args, gif=True)]
        if args.json:
            print_rank0(json.dumps(_eval_record(out, ckpt, args.seed)))
        else:
            print_rank0(
                f"checkpoint {ckpt}: mean_return {out['mean_return']:.3f} +/- {out['std_return']:.3f} "
                f"over {len(out.get('returns', [])) or args.episodes} episodes (seed {args.seed})"
            )
    return 0


def _record_video(cfg: Any, ckpt: Path, args: argparse.Namespace, gif: bool = False) -> list[Path]:
    """``eval --video OUT.mp4`` (or ``--gif OUT.gif`` with ``gif``): the checkpoint's greedy episodes, one
    unless ``--episodes`` was given, back to back in the one file named (:mod:`ding_dist.entry.cli.video`)."""
    from ding_dist.entry.cli.video import record_episodes, record_gif
    from ding_dist.entry.factories import build_policy
    from ding_dist.envs import make_env
    from ding_dist.utils.checkpoint import load_checkpoint

    probe = make_env(cfg.env.get("id"), entry_point=cfg.env.get("entry_point"), env_kwargs=cfg.env.get("env_kwargs"))
    try:
        policy = build_policy(cfg, probe.observation_space, probe.action_space, device="cpu")
    finally:
        probe.close()
    policy.load_state_dict(load_checkpoint(ckpt)["policy"])
    episodes = args.episodes if getattr(args, "episodes_given", False) else 1
    try:
        if gif:
            paths = [record_gif(cfg, policy, args.gif, episodes=episodes, seed=args.seed)]
        else:
            paths = [record_episodes(cfg, policy, args.video, episodes=episodes, seed=args.seed)]
    except ValueError as e:
        raise UsageError(str(e)) from None
    if not args.json:
        seeds = f"seed {args.seed}" if episodes == 1 else f"seeds {args.seed}..{args.seed + episodes - 1}"
        print_rank0(f"wrote {paths[0]} ({episodes} episode{'s' * (episodes > 1)}, {seeds})")
    return paths


def _eval_record(out: dict[str, Any], ckpt: Path, seed: int) -> dict[str, Any]:
    """``eval --json``: the summary and one ``{"return", "length"}`` per episode."""
    episodes = [{"return": float(r), "length": int(n)} for r, n in zip(out["returns"], out["lengths"])]
    return {
        "checkpoint": str(ckpt),
        "seed": seed,
        "videos": out.get("videos", []),
        "gifs": out.get("gifs", []),
        "mean_return": float(out["mean_return"]),
        "std_return": float(out["std_return"]),
        "episodes": episodes,
    }
