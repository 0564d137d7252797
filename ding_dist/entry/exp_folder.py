"""The experiment folder: whether it holds a run, whether that run is this torchrun job's, the default folder of a
new run (chosen and claimed at once, so runs started together never share one), the files of a run that stopped
before its first checkpoint moved aside for a new one, and rank 0's lock on the folder
(:class:`~ding_dist.utils.exp_lock.ExperimentLock`) that every rank agrees on.

Example:
    >>> import tempfile
    >>> from ding_dist.entry.exp_folder import holds_run
    >>> holds_run(tempfile.mkdtemp())
    False
"""

from __future__ import annotations

import logging
import os
import re
import time
from pathlib import Path

from ding_dist.comm import broadcast_object
from ding_dist.entry.torchrun_job import JOB_FILE, job_id
from ding_dist.utils.exp_lock import ExperimentLock
from ding_dist.utils.fileio import atomic_write_text, shown_path

__all__ = [
    "ABORTED",
    "RUN_FILES",
    "default_exp_dir",
    "holds_run",
    "is_run_folder",
    "lock_folder",
    "release_claim",
    "same_job",
    "set_aside",
]

logger = logging.getLogger(__name__)

#: What a run writes into its folder (``config_resume<N>.py``/``.json`` too): a folder with none of them is no run.
RUN_FILES = ("config.py", "config.json", "tb", "ckpt", "result.json", "inference.json", "wandb", JOB_FILE)
#: Where a new run moves the files of a run that stopped before its first checkpoint: ``<folder>/aborted/<time>/``.
#: ``ding-dist plot`` reads a run from its own folder and ``tb/`` only, so the new run's curves never include them.
ABORTED = "aborted"
_RESUME_FILE = re.compile(r"^config_resume\d+\.(py|json)$")
_TEMP_FILE = re.compile(r"^\.(config\.py|config\.json|result\.json|inference\.json|config_resume\d+\.(py|json))\.\d+\.")
_MAX_SUFFIX = 1000  # ``_2`` ... of a default folder name taken in the same second
_CREATED: set[Path] = set()  # default folders this process created: release_claim removes them again when empty


def holds_run(folder: str | os.PathLike) -> bool:
    """True when ``folder`` already holds a training run (a checkpoint or a result.json).

    Example::

        holds_run("runs/cartpole_dqn")
    """
    folder = Path(folder)
    return (folder / "result.json").exists() or any((folder / "ckpt").glob("ckpt_*.pt"))


def _run_entries(folder: Path) -> list[Path]:
    """The entries of ``folder`` a run wrote (:data:`RUN_FILES`, ``config_resume<N>`` files, their temp files)."""
    try:
        names = sorted(os.listdir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [folder / n for n in names if n in RUN_FILES or _RESUME_FILE.match(n) or _TEMP_FILE.match(n)]


def is_run_folder(folder: str | os.PathLike) -> bool:
    """True when ``folder`` holds anything a run writes (config, ``tb/``, ``ckpt/``, ...), finished or not.

    Example:
        >>> import tempfile
        >>> is_run_folder(tempfile.mkdtemp())
        False
    """
    return bool(_run_entries(Path(folder)))


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


def _claim(folder: Path) -> bool:
    """Claim ``folder`` for a new run (created when missing; see :meth:`ExperimentLock.claim`)."""
    created = not folder.exists()
    if not ExperimentLock(folder).claim():
        return False
    if created:
        _CREATED.add(folder)
    if holds_run(folder):  # a run that ended between our look and our claim
        release_claim(folder)
        return False
    return True


_RESUME_HINT = "ding-dist resume {folder}, or resume='{folder}' from Python,"  # Experiment.open: CLI ranks, or Python


def default_exp_dir(exp_name: str, seed: int | None = None, *, resume_hint: str = _RESUME_HINT) -> Path:
    """The folder of a new run, claimed for it: ``runs/<exp_name>`` when it is free, else
    ``runs/<exp_name>_seed<seed>_<yymmdd_HHMMSS>`` (no ``seed<seed>_`` without a seed), then ``..._2``, ``_3``, ...
    when that one is taken too. A folder is free when it holds no run (no checkpoint, no result.json) and no live
    run holds or claimed it; the claim (:meth:`ExperimentLock.claim`) is atomic, so runs started in the same second
    get different folders, and the run that locks the folder takes the claim over (:func:`release_claim` drops it
    when no run does). A folder of this torchrun job's run is its own (:func:`same_job`). When ``runs/<exp_name>``
    holds a run, one log line says where this one goes, and with a checkpoint there ``resume_hint`` (``{folder}``:
    that folder) says how to continue the old one.

    Example::

        default_exp_dir("cartpole_dqn", seed=1)  # Path("runs/cartpole_dqn") the first time
    """
    base = Path("runs") / exp_name
    if same_job(base) or (not holds_run(base) and _claim(base)):
        return base
    stamp = time.strftime("%y%m%d_%H%M%S")
    stamped = base.with_name(f"{base.name}_seed{seed}_{stamp}" if seed is not None else f"{base.name}_{stamp}")
    for n in range(1, _MAX_SUFFIX + 1):
        chosen = stamped if n == 1 else stamped.with_name(f"{stamped.name}_{n}")
        if not holds_run(chosen) and _claim(chosen):
            break
    else:
        raise FileExistsError(f"no free experiment folder {shown_path(stamped)}[_2.._{_MAX_SUFFIX}]: give one")
    if holds_run(base):
        ckpt = any((base / "ckpt").glob("ckpt_*.pt"))
        hint = f" ({resume_hint.format(folder=shown_path(base))} continues the old one)" if ckpt else ""
        logger.info("%s already holds a run%s; this one goes to %s", shown_path(base), hint, shown_path(chosen))
    else:
        logger.info("%s is in use by another run; this one goes to %s", shown_path(base), shown_path(chosen))
    return chosen


def release_claim(folder: str | os.PathLike) -> None:
    """Drop this process's claim of ``folder`` (:func:`default_exp_dir`) when no run took it over, and the folder
    too when this process created it and it is empty; a folder a run locked is left alone.

    Example::

        release_claim(default_exp_dir("cartpole_dqn"))  # runs/cartpole_dqn as it was
    """
    folder = Path(folder)
    ExperimentLock(folder).unclaim()
    if folder in _CREATED:
        _CREATED.discard(folder)
        try:
            folder.rmdir()  # only when empty
        except OSError:
            pass


def set_aside(folder: str | os.PathLike) -> Path | None:
    """Move the files of a run that stopped before its first checkpoint out of a new run's way: into
    ``<folder>/aborted/<yymmdd_HHMMSS>/`` (``_2`` ... when taken), logged in one line; None when there were none. Only
    the run's own files move (:data:`RUN_FILES`); the caller holds the folder's lock, so that run is gone.

    Example::

        set_aside("runs/k9")  # Path("runs/k9/aborted/250101_120000") after a run killed before its first checkpoint
    """
    folder = Path(folder)
    entries = _run_entries(folder)
    if not entries:
        return None
    (folder / ABORTED).mkdir(exist_ok=True)
    stamp = time.strftime("%y%m%d_%H%M%S")
    for n in range(1, _MAX_SUFFIX + 1):
        dest = folder / ABORTED / (stamp if n == 1 else f"{stamp}_{n}")
        try:
            dest.mkdir()
            break
        except FileExistsError:
            continue
    else:
        raise FileExistsError(f"no free folder {shown_path(folder / ABORTED / stamp)}[_2.._{_MAX_SUFFIX}]")
    for entry in entries:
        os.rename(entry, dest / entry.name)
    logger.warning(
        "%s held a run that stopped before its first checkpoint (no ckpt, no result.json); its files are moved to %s",
        shown_path(folder), shown_path(dest),
    )  # fmt: skip
    return dest


def lock_folder(folder: Path, rank: int, fresh: bool = False) -> ExperimentLock:
    """Rank 0 creates the folder and takes its lock; every rank raises if another live run holds it. A ``fresh``
    run (not a resume, restart or re-formed job) refuses a folder that holds a run and sets aside (:func:`set_aside`)
    the files of one that stopped before its first checkpoint, before it writes any of its own."""
    lock = ExperimentLock(folder, job=job_id())
    error: BaseException | None = None
    if rank == 0:
        try:
            lock.acquire()
            try:
                if fresh and holds_run(folder):  # a run that ended in the folder since the caller looked
                    raise FileExistsError(
                        f"exp_dir {str(folder)!r} already holds a run (checkpoints or result.json): "
                        "resume it, or choose another folder"
                    )
                if fresh:
                    set_aside(folder)
                job = job_id()
                if job is not None:  # the folder's run belongs to this job: a re-formed job continues it (same_job)
                    atomic_write_text(folder / JOB_FILE, job + "\n")
            except BaseException:
                lock.release()
                raise
        except OSError as e:  # ExperimentInUseError, FileExistsError, a disk that refuses a write
            error = e
    sent = broadcast_object(None if error is None else (type(error), str(error)))
    if error is not None:
        raise error
    if sent is not None:
        kind, text = sent
        raise (kind if isinstance(kind, type) and issubclass(kind, OSError) else OSError)(text)
    return lock
