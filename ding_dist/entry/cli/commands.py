"""The ``ding-dist`` entry: :func:`main`, which parses the arguments and runs one command, and :func:`run`, the console
script. The commands live beside it: train, resume and requeue (:mod:`~ding_dist.entry.cli.train`), eval
(:mod:`~ding_dist.entry.cli.evaluate`), config show and ckpt convert (:mod:`~ding_dist.entry.cli.convert`), plot
(:mod:`~ding_dist.entry.cli.plot`); their input checks in :mod:`~ding_dist.entry.cli.checks`, the ranks' run in
:mod:`~ding_dist.entry.cli.launching`.

Every call the CLI makes into the training side (``ding_dist.entry.pipeline``, ``experiment``, ``roles``,
``services.run_folder``) is imported where it is used (they import torch), except ``PEER_FAILURE``, which the failure
summary of :mod:`ding_dist.entry.cli.local_launch` reads.

Under any launcher (torchrun, or ``srun`` with SLURM variables) ``ding-dist train`` only runs its own rank;
without one, ``--nproc N`` > 1 or ``--max-restarts K`` > 0 starts the ranks through
:mod:`ding_dist.entry.cli.local_launch`. Bad input ends with one line ``ding-dist: error: ...`` on stderr and
exit code 2, before any process is started.

Example:
    >>> from ding_dist.entry.cli import main
    >>> main(["config", "show", "cartpole_dqn"])  # doctest: +SKIP
    0
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import threading
from collections.abc import Sequence
from typing import NoReturn

from ding_dist.config import ConfigError
from ding_dist.entry.cli.checks import resolve_checkpoint
from ding_dist.entry.cli.convert import ckpt_convert, config_show
from ding_dist.entry.cli.errors import (
    EXIT_SIGINT,
    EXIT_USAGE,
    PROG,
    UsageError,
    error_line,
    no_room,
    record_for_launcher,
)
from ding_dist.entry.cli.evaluate import eval_command
from ding_dist.entry.cli.launching import STOP_CODES, checked_env
from ding_dist.entry.cli.parser import build_parser
from ding_dist.entry.cli.train import train_command
from ding_dist.utils.exp_lock import ExperimentInUseError
from ding_dist.utils.logging import get_logger

__all__ = ["main", "run", "resolve_checkpoint"]


def _plot(args: argparse.Namespace) -> int:
    from ding_dist.entry.cli.plot import plot_command

    return plot_command(args)


# ------------------------------------------------------------------------------------------ main
def main(argv: Sequence[str] | None = None) -> int:
    """Run ``ding-dist`` with ``argv`` (default ``sys.argv[1:]``) and return the exit code.

    Example:
        >>> main(["train", "missing_config.py"])  # doctest: +SKIP
        ding-dist: error: config file 'missing_config.py' does not exist
        2
    """
    try:
        return _main(argv)
    except KeyboardInterrupt:  # Ctrl-C while the arguments parse or torch is imported: one line too
        print(f"{PROG}: interrupted (SIGINT)", file=sys.stderr)
        return EXIT_SIGINT


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    from ding_dist.utils.checkpoint import CheckpointError  # torch, imported once the arguments parse

    get_logger("ding_dist")  # rank-aware INFO lines on stderr for the library's loggers
    if args.command == "resume":  # ding-dist resume EXP_DIR: train --resume EXP_DIR
        args.command = "train"
        args.algo = args.env = args.exp_dir = None
    commands = {"train": lambda a: train_command(a, main), "eval": eval_command, "plot": _plot, "config": config_show,
                "ckpt": ckpt_convert}  # fmt: skip
    try:  # the commands that start work check every DING_DIST_* variable first
        with checked_env() if args.command in ("train", "eval") else contextlib.nullcontext():
            return commands[args.command](args)
    except (UsageError, ConfigError, CheckpointError, ExperimentInUseError) as e:
        record_for_launcher(e)
        error_line(" ".join(str(e).split()))
        return EXIT_USAGE
    except KeyboardInterrupt:  # Ctrl-C before the training loop (start-up) or after it: nothing to checkpoint
        if "RANK" not in os.environ:  # a rank leaves it to its launcher, which says it once for all of them
            print(f"{PROG}: interrupted (SIGINT)", file=sys.stderr)
        return EXIT_SIGINT
    except Exception as e:  # a full disk, quota or file-size limit (an OSError, maybe wrapped): one line, exit 2
        message = no_room(e)
        if message is None:
            raise
        record_for_launcher(e)
        error_line(message)
        return EXIT_USAGE
    except SystemExit as e:
        if e.code in STOP_CODES.values():  # the pipeline's stop handlers: envs and writers are closed by now
            name = next(n for n, code in STOP_CODES.items() if code == e.code)
            print(f"{PROG}: stopped by {name}", file=sys.stderr)
            return int(e.code)
        raise


def run() -> NoReturn:
    """The ``ding-dist`` command: :func:`main` on ``sys.argv``, then a quick exit.

    A process that imported torch spends 0.5-1 s tearing its modules down after the last line; a run is
    finished by then (envs, writers, process group closed, result written), so once no non-daemon thread
    is left the exit skips that teardown: atexit handlers run, stdout and stderr are flushed, then
    ``os._exit``. Every rank, and the launcher around them, ends that much sooner.

    Example (the console script ``ding-dist`` is this function)::

        python -m ding_dist.entry.cli config show configs/cartpole_dqn_config.py
    """
    code = main()
    others = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]
    if any(t.is_alive() for t in others):
        sys.exit(code)  # the interpreter joins them (e.g. an executor's idle workers) as usual
    import atexit

    atexit._run_exitfuncs()  # logging's flush, multiprocessing's cleanup, wandb, ...
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
