"""The ``ding-dist`` command line: train, evaluate and plot.

::

    ding-dist train configs/cartpole_dqn_config.py                    # one process (fake link)
    ding-dist train configs/cartpole_dqn_config.py --nproc 2          # 2 local processes via torchrun
    torchrun --nproc_per_node 2 -m ding_dist.entry.cli train CONFIG   # same, launched by hand
    ding-dist eval configs/cartpole_dqn_config.py --ckpt runs/cartpole_dqn/ckpt
    ding-dist plot runs/cartpole_dqn --out curve.png
    ding-dist plot runs/dqn_s1 runs/dqn_s2 runs/dqn_s3 --smooth 3   # seeds: mean and 95% band

``--nproc N`` with N > 1 (or ``--max-restarts K`` with K > 0) hands the job to torch's own launcher
(``torch.distributed.run``, i.e. torchrun, with ``--standalone``), which starts N copies of
``ding-dist train`` without ``--nproc``; each copy finds torchrun's RANK/WORLD_SIZE and runs its rank.
``dist_init`` picks gloo on CPU and nccl on GPUs. Under any launcher (torchrun, or ``srun`` with SLURM
variables) ``ding-dist train`` only runs its own rank.

Reliability (docs/reliability.md): ``--timeout`` bounds every collective (``DING_DIST_TIMEOUT``),
``--health-timeout`` the health checks before each evaluation and checkpoint, ``--max-restarts`` lets
torchrun restart the ranks after a failure (training continues from the newest complete checkpoint),
``--debug`` checks every collective and compares the networks across ranks. When a rank fails, the job
ends with a summary naming the rank that failed first, how (exit code or signal) and its error's first
line. SIGINT ends with exit code 130, SIGTERM with 143, after every rank has stopped.

Bad input (missing files, bad ``--set`` syntax, bad or negative numbers, unknown config keys, env ids
that do not exist, a bad ``DING_DIST_*`` variable, an output file whose folder does not exist) ends with one
line ``ding-dist: error: ...`` on stderr and exit code 2, before any process is started; a misspelt
``DING_DIST_*`` name is one warning line naming the closest known one.

The package: :mod:`~ding_dist.entry.cli.parser` (the arguments), :mod:`~ding_dist.entry.cli.commands` (``main``
and ``run``), one module per command family (:mod:`~ding_dist.entry.cli.train`: train, resume, requeue;
:mod:`~ding_dist.entry.cli.evaluate`; :mod:`~ding_dist.entry.cli.convert`: config show, ckpt convert),
:mod:`~ding_dist.entry.cli.checks` (their input checks), :mod:`~ding_dist.entry.cli.launching` (the ranks' run),
:mod:`~ding_dist.entry.cli.local_launch` (the local launcher and its failure summary),
:mod:`~ding_dist.entry.cli.plot` (its run folders read by :mod:`~ding_dist.entry.cli.run_folders`),
:mod:`~ding_dist.entry.cli.video` (eval's recordings) and :mod:`~ding_dist.entry.cli.errors`. Importing it imports
no torch (``ding-dist --help`` answers at once).
"""

from __future__ import annotations

import os
import sys
from typing import Any, NoReturn

# load_curves and plot_curves (ding_dist.entry.cli.plot) are importable from here too, see __getattr__
__all__ = ["build_parser", "main", "run", "UsageError", "resolve_checkpoint"]
_LAZY = {"main": "commands", "resolve_checkpoint": "checks", "UsageError": "errors", "build_parser": "parser",
         "load_curves": "plot", "plot_curves": "plot"}  # fmt: skip


def run() -> NoReturn:
    """The ``ding-dist`` command (:func:`ding_dist.entry.cli.commands.run`); a Ctrl-C while its modules load is one
    line and exit code 130, as later."""
    try:
        from ding_dist.entry.cli.commands import run as run_command
    except KeyboardInterrupt:
        sys.stderr.write("ding-dist: interrupted (SIGINT)\n")
        os._exit(130)
    run_command()


def __getattr__(name: str) -> Any:
    """The CLI's names, imported on first use: a Ctrl-C at start-up meets :func:`run`'s handler, not an import."""
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(f"ding_dist.entry.cli.{_LAZY[name]}"), name)
        if _LAZY[name] != "plot":
            globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
