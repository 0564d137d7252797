"""The experiment: a compiled config, its folder and lock, its roles.

:class:`Experiment` carries the config :func:`~ding_dist.config.load_config` compiled (once per process), the
experiment folder and its lock, the roles of an actor-learner run and the run's limits to the training loops, which
never read a config path again. The folder is :mod:`~ding_dist.entry.exp_folder`'s, torchrun's job ids
:mod:`~ding_dist.entry.torchrun_job`'s and the roles :mod:`~ding_dist.entry.roles`'.

Example::

    cfg = load_config("configs/cartpole_dqn_config.py", overrides=["policy.learn.batch_size=128"])
    with Experiment.open(cfg, max_env_steps=20_000) as exp:   # runs/cartpole_dqn, locked
        exp.exp_dir, exp.roles, exp.on_policy
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from easydict import EasyDict

from ding_dist.comm import broadcast_object, get_rank, get_world_size
from ding_dist.config import is_compiled
from ding_dist.entry.exp_folder import default_exp_dir, holds_run, lock_folder, same_job
from ding_dist.entry.roles import Roles
from ding_dist.entry.torchrun_job import restart_count
from ding_dist.envs.seeding import RunSeeds
from ding_dist.policy import get_policy_cls
from ding_dist.utils.exp_lock import ExperimentLock

__all__ = ["DEFAULT_HEALTH_TIMEOUT_S", "Experiment"]

logger = logging.getLogger(__name__)

#: Default bound (seconds) of the health checks before each evaluation and checkpoint.
DEFAULT_HEALTH_TIMEOUT_S = 60.0


@dataclass
class Experiment:
    """One run of a compiled config on this process: the config, the folder (locked), the roles and the limits.

    Built on every rank by :meth:`open` (rank 0 decides the folder and takes its lock; every rank agrees).
    ``roles`` is None for the data-parallel mode. Close it (or use it as a context manager) to release the lock.

    Example::

        with Experiment.open(load_config("configs/cartpole_ppo_config.py"), max_env_steps=8192) as exp:
            DataParallelLoop(exp).run()
    """

    cfg: EasyDict
    exp_dir: Path
    lock: ExperimentLock
    roles: Roles | None
    rank: int
    world: int
    resume: Path | None = None
    max_env_steps: int | None = None
    health_timeout: float = DEFAULT_HEALTH_TIMEOUT_S
    restarts: int = 0
    rejoined: bool = False
    _closed: bool = field(default=False, repr=False)

    @classmethod
    def open(
        cls,
        cfg: EasyDict,
        *,
        exp_dir: str | os.PathLike | None = None,
        resume: str | os.PathLike | None = None,
        max_env_steps: int | None = None,
        health_timeout: float = DEFAULT_HEALTH_TIMEOUT_S,
    ) -> Experiment:
        """Check the run's limits, choose and lock its folder (``exp_dir``; ``resume``'s; or
        :func:`default_exp_dir`), read its roles. A new run in a folder whose run stopped before its first checkpoint
        moves that run's files to ``<folder>/aborted/<time>/`` (:func:`~ding_dist.entry.exp_folder.set_aside`).
        Raises ``ValueError``/``FileExistsError`` naming the bad value."""
        if not is_compiled(cfg):
            raise TypeError("Experiment.open takes a compiled config (load_config)")
        if max_env_steps is not None and (isinstance(max_env_steps, bool) or max_env_steps < 1):
            raise ValueError(f"max_env_steps must be >= 1 or None, got {max_env_steps}")
        if isinstance(health_timeout, bool) or not isinstance(health_timeout, (int, float)) or not health_timeout > 0:
            raise ValueError(f"health_timeout must be a positive number of seconds, got {health_timeout!r}")
        if max_env_steps is None and cfg.env.stop_value is None:
            logger.warning("neither max_env_steps nor env.stop_value is set: training runs until interrupted")
        rank, world, restarts = get_rank(), get_world_size(), restart_count()
        roles = Roles.from_config(cfg.actor_learner, world)
        if exp_dir is None and resume is None:  # decided (and claimed) once, on rank 0: ranks must agree on it
            exp_dir = broadcast_object(default_exp_dir(cfg.exp_name, cfg.get("seed")) if rank == 0 else None)
        # An elastic re-form starts every worker with the restart count of its own agent (a joining node's is 0,
        # and a membership change counts no restart): rank 0 decides from the folder's job for everyone.
        rejoined = bool(broadcast_object(resume is None and same_job(exp_dir) if rank == 0 else None))
        fresh = resume is None and restarts == 0 and not rejoined
        if fresh and holds_run(exp_dir):
            raise FileExistsError(
                f"exp_dir {str(exp_dir)!r} already holds a run (checkpoints or result.json): "
                "resume it, or choose another folder"
            )
        folder = Path(exp_dir or resume)
        lock = lock_folder(folder, rank, fresh=fresh)  # a fresh run sets aside a run that left no checkpoint
        return cls(cfg, folder, lock, roles, rank, world, None if resume is None else Path(resume), max_env_steps,
                   float(health_timeout), restarts, rejoined)  # fmt: skip

    @property
    def continues(self) -> bool:
        """This segment continues the folder's run from its newest checkpoint: torchrun restarted the workers
        (``--max-restarts``) or the job re-formed at another size (:attr:`rejoined`)."""
        return self.restarts > 0 or self.rejoined

    def seeds(self, start_step: int) -> RunSeeds:
        """The seed streams of this segment (the run seed, the restart, the env step it starts from): a resume
        or a restart never replays earlier episodes or exploration noise."""
        return RunSeeds(self.cfg.seed, restart=self.restarts, start_step=start_step)

    @property
    def policy_type(self) -> str:
        return self.cfg.create_config.policy.type

    @property
    def on_policy(self) -> bool:
        """Whether the config's policy learns from fresh rollouts (PPO, IMPALA) rather than a replay buffer."""
        return get_policy_cls(self.policy_type).on_policy

    @property
    def is_learner(self) -> bool:
        """This rank learns: every rank of a data-parallel run, the learner ranks of an actor-learner one."""
        return self.roles is None or self.roles.is_learner(self.rank)

    def close(self) -> None:
        """Release the folder's lock (once)."""
        if not self._closed:
            self._closed = True
            self.lock.release()

    def __enter__(self) -> Experiment:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
