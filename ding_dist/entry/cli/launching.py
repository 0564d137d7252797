"""Running the ranks of ``ding-dist train``: the environment the launcher hands them, the argv of each rank it starts,
and one rank's run (``pipeline.train`` under a :class:`~ding_dist.comm.DistContext`) with its summary and exit code.

Example:
    >>> from ding_dist.entry.cli.launching import restart_env
    >>> restart_env(0)
    {}
"""

from __future__ import annotations

import argparse
import faulthandler
import logging
import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ding_dist.entry.cli.elastic_launch import SHARE_STORE_ENV
from ding_dist.entry.cli.errors import (
    EXIT_SIGINT,
    EXIT_SIGTERM,
    EXIT_SIGUSR1,
    PROG,
    UsageError,
)

logger = logging.getLogger(__name__)

__all__ = ["DEBUG_ENV", "STOP_CODES", "TIMEOUT_ENV", "checked_env", "child_argv", "env_set", "print_rank0",
           "restart_env", "run_rank", "run_recorded_rank", "train_summary"]  # fmt: skip

# Two of ding_dist.comm.settings.ENV_VARS (named here too: this module imports no torch), set for the ranks.
DEBUG_ENV = "DING_DIST_DEBUG"
TIMEOUT_ENV = "DING_DIST_TIMEOUT"


def print_rank0(text: str) -> None:
    """Print ``text`` (flushed) on rank 0 only."""
    from ding_dist.comm import get_rank

    if get_rank() == 0:
        print(text, flush=True)


@contextmanager
def env_set(values: dict[str, str]) -> Iterator[None]:
    """Set environment variables (inherited by the ranks a launcher starts) and restore them afterwards."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, old in saved.items():
            if old is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = old


@contextmanager
def checked_env() -> Iterator[None]:
    """Every ``DING_DIST_*`` variable checked before a command's work (``ding_dist.comm.settings.ENV_VARS``): a bad
    value is one :class:`UsageError` line naming it, its value and what it takes. An unknown name is one warning
    line naming the closest known one, once per job: in the process the user started, or on rank 0 of a launcher
    that is not ding-dist's; the ranks this command starts inherit ``DING_DIST_ENV_CHECKED`` and stay quiet.

    Example::

        with checked_env():   # DING_DIST_TIMEOUT=abc: "ding-dist: error: DING_DIST_TIMEOUT='abc': expected ..."
            train_command(args, main)
    """
    from ding_dist.comm.settings import ENV_CHECKED_ENV, check_env_values, warn_unknown_env

    try:
        check_env_values()
    except ValueError as e:
        raise UsageError(str(e)) from None
    rank = os.environ.get("RANK", os.environ.get("SLURM_PROCID"))
    if rank is None or (rank in ("0", "") and ENV_CHECKED_ENV not in os.environ):
        warn_unknown_env(prog=PROG)
    with env_set({ENV_CHECKED_ENV: "1"}):
        yield


def child_argv(args: argparse.Namespace, config: Path, exp_dir: Path) -> list[str]:
    # The experiment folder as the user gave it (the ranks share the launcher's working folder, restarted ones too),
    # so every rank shows it as given; the one folder chosen by the launcher, so no rank picks another.
    argv = ["train", str(config), "--exp-dir", str(exp_dir), "--health-timeout", repr(args.health_timeout)]
    if args.seed is not None:
        argv += ["--seed", str(args.seed)]
    if args.overrides:
        argv += ["--set", *args.overrides]
    if args.max_env_steps is not None:
        argv += ["--max-env-steps", str(args.max_env_steps)]
    if args.resume is not None:
        argv += ["--resume", str(args.resume)]
    if args.timeout is not None:
        argv += ["--timeout", repr(args.timeout)]
    if args.debug:
        argv += ["--debug"]
    return argv


def restart_env(max_restarts: int) -> dict[str, str]:
    """Torchrun reuses one TCP store for every restart of the workers by default, so a restarted rank can
    read the gloo addresses the dead generation left there and fail to connect. With store sharing off,
    each generation's rank 0 serves a fresh store on a new port."""
    if max_restarts > 0 and SHARE_STORE_ENV not in os.environ:
        return {SHARE_STORE_ENV: "1"}
    return {}


STOP_CODES = {"SIGINT": EXIT_SIGINT, "SIGTERM": EXIT_SIGTERM, "SIGUSR1": EXIT_SIGUSR1}  # 128 + the signal


def _stacks_on_sigusr2() -> None:
    """A run that seems stuck: ``kill -USR2 PID`` prints every thread's stack to this process's stderr (fd 2)."""
    try:
        faulthandler.register(signal.SIGUSR2, file=sys.__stderr__, all_threads=True)
    except (OSError, RuntimeError, ValueError):  # no stderr with a file descriptor (an embedding host): skip
        logger.debug("no stderr file descriptor: kill -USR2 prints no stacks")


def run_rank(args: argparse.Namespace, cfg: Any) -> int:
    """This process's rank of the job (a world of one without a launcher), on the config compiled once."""
    from ding_dist.comm import DistContext, debug_enabled, set_debug
    from ding_dist.entry import pipeline

    if os.environ.get("TORCHELASTIC_RUN_ID"):  # torchrun's rank (the agent module imports torch's elastic agent)
        from ding_dist.entry.cli.agent import die_with_agent

        die_with_agent()  # a killed agent leaves no orphan (this rank stops as if preempted)
    _stacks_on_sigusr2()
    was_debug = debug_enabled()
    if args.debug:
        set_debug(True)
    try:
        with DistContext():
            result = pipeline.train(
                cfg,
                exp_dir=args.exp_dir,
                max_env_steps=args.max_env_steps,
                resume=args.resume,
                health_timeout=args.health_timeout,
                log_summary=False,  # printed on stdout below
            )
            print_rank0(train_summary(result, args.exp_dir))
            stopped = result.get("stopped_by")  # a preempted run: the shell sees the signal's code
    finally:
        set_debug(was_debug)
    return STOP_CODES.get(stopped, 0)


def run_recorded_rank(args: argparse.Namespace, cfg: Any) -> int:
    """``run_rank`` under torchrun's ``record``: an uncaught exception reaches the launcher's summary."""
    from torch.distributed.elastic.multiprocessing.errors import record

    return record(run_rank)(args, cfg)


def train_summary(result: dict[str, Any], exp_dir: str | None) -> str:
    """What ``ding-dist train`` prints after a run (:func:`~ding_dist.entry.services.summary.run_summary`): steps,
    world size, time, eval returns, result file; why it stopped; its checkpoints; the commands to run next."""
    from ding_dist.entry.services.summary import run_summary

    return "\n".join(run_summary(result, exp_dir))
