"""Torchrun's job as a worker sees it: the job's rendezvous id (``--rdzv-id``) and how many times the elastic agent
restarted the workers.

Example:
    >>> from ding_dist.entry.torchrun_job import job_id, restart_count
    >>> job_id() is None or isinstance(job_id(), str)
    True
"""

from __future__ import annotations

import os

__all__ = ["JOB_ENV", "JOB_FILE", "RESTART_ENV", "job_id", "restart_count"]


#: Set by torchrun's elastic agent in the workers it starts: 0 at first, then 1, 2, ... after restarts.
RESTART_ENV = "TORCHELASTIC_RESTART_COUNT"


#: Set by torchrun in the workers it starts: the job's rendezvous id (``--rdzv-id``; a fresh uuid per launch with
#: ``--standalone`` and ``ding-dist --nproc``). A folder whose run was written by the same job is continued.
JOB_ENV = "TORCHELASTIC_RUN_ID"


JOB_FILE = ".job"


def job_id() -> str | None:
    """This worker's torchrun job (its rendezvous id), or None outside torchrun or without an id.

    Example::

        job_id()  # None in a plain process; "my_job" under torchrun --rdzv-id my_job
    """
    job = os.environ.get(JOB_ENV, "")
    return job if job and job.lower() != "none" else None  # torchrun's default rdzv id is the string "none"


def restart_count() -> int:
    """How many times torchrun's elastic agent has restarted this job's workers (0 outside torchrun).

    Example::

        restart_count()  # 0 in a plain process; 1 in the workers of the first restart
    """
    raw = os.environ.get(RESTART_ENV, "0") or "0"
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"environment variable {RESTART_ENV} must be an integer, got {raw!r}") from None
