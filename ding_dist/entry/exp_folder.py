"""The experiment folder: whether it holds a run, whether that run is this torchrun job's, the default folder of a
new run, and rank 0's lock on it (:class:`~ding_dist.utils.exp_lock.ExperimentLock`) that every rank agrees on.

Example:
    >>> import tempfile
    >>> from ding_dist.entry.exp_folder import holds_run
    >>> holds_run(tempfile.mkdtemp())
    False
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from ding_dist.comm import broadcast_object
from ding_dist.entry.torchrun_job import JOB_FILE, job_id
from ding_dist.utils.exp_lock import ExperimentInUseError, ExperimentLock
from ding_dist.utils.fileio import atomic_write_text

__all__ = ["default_exp_dir", "holds_run", "lock_folder", "same_job"]

logger = logging.getLogger(__name__)


def holds_run(folder: str | os.PathLike) -> bool:
    """True when ``folder`` already holds a training run (a checkpoint or a result.json).

    Example::

        holds_run("runs/cartpole_dqn")
    """
    folder = Path(folder)
    return (folder / "result.json").exists() or any((folder / "ckpt").glob("ckpt_*.pt"))


def same_job(folder: str | os.PathLike) -> bool:
    """True when ``folder`` holds a run written by this worker's torchrun job: the job re-formed (an elastic node
    joined or left, or a SLURM requeue launched it again with the same ``--rdzv-id``) and continues that run.

    Example::

        same_job("runs/cartpole_dqn")  # False in a plain process
    """
    job = job_id()
    marker = Path(folder) / JOB_FILE
    try:
        return job is not None and holds_run(folder) and marker.read_text(encoding="utf-8").strip() == job
    except OSError:
        return False


def default_exp_dir(exp_name: str) -> Path:
    """``runs/<exp_name>``, or ``runs/<exp_name>_<yymmdd_HHMMSS>`` when that folder already holds a run.

    Example::

        default_exp_dir("cartpole_dqn")  # Path("runs/cartpole_dqn") the first time
    """
    base = Path("runs") / exp_name
    if not holds_run(base) or same_job(base):
        return base
    stamped = base.with_name(f"{base.name}_{time.strftime('%y%m%d_%H%M%S')}")
    logger.info("%s already holds a run; this one goes to %s (resume=%s continues the old one)", base, stamped, base)
    return stamped


def lock_folder(folder: Path, rank: int) -> ExperimentLock:
    """Rank 0 creates the folder and takes its lock; every rank raises if another live run holds it."""
    lock = ExperimentLock(folder, job=job_id())
    error = None
    if rank == 0:
        try:
            lock.acquire()
            job = job_id()
            if job is not None:  # the folder's run belongs to this job: a re-formed job continues it (same_job)
                atomic_write_text(folder / JOB_FILE, job + "\n")
        except ExperimentInUseError as e:
            error = str(e)
    error = broadcast_object(error)
    if error is not None:
        raise ExperimentInUseError(error)
    return lock
