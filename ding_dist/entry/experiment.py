"""The experiment: a config compiled once, its folder and lock, its roles; and building a run's parts.

:func:`load_config` is the one way from a config (a file path, a ``(main_config, create_config)`` tuple, or an
already compiled config) to the compiled global config; :class:`Experiment` carries that compiled config, the
experiment folder and its lock, the roles of an actor-learner run and the run's limits to the training loops,
which never read a config path again. The config is compiled against the defaults of its env, its policy and
the ``actor_learner`` section (:mod:`~ding_dist.entry.roles`).

Example::

    cfg = load_config("configs/cartpole_dqn_config.py", overrides=["policy.learn.batch_size=128"])
    with Experiment.open(cfg, max_env_steps=20_000) as exp:   # runs/cartpole_dqn, locked
        exp.exp_dir, exp.roles, exp.on_policy
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from easydict import EasyDict

from ding_dist.comm import broadcast_object, get_rank, get_world_size, resolve_device
from ding_dist.config import check_sync_config, compile_config, read_config, translate_if_ding
from ding_dist.data.frame_replay import FrameReplayBuffer, replay_buffer_for
from ding_dist.data.prioritized import PrioritizedReplayBuffer
from ding_dist.data.replay import ReplayBuffer
from ding_dist.data.sequence_replay import SequenceReplayBuffer
from ding_dist.entry.roles import Roles, actor_learner_default_config, check_actor_learner_config
from ding_dist.envs import env_default_config
from ding_dist.envs.seeding import RunSeeds
from ding_dist.policy import Policy, get_policy_cls
from ding_dist.utils.exp_lock import ExperimentInUseError, ExperimentLock
from ding_dist.utils.fileio import atomic_write_text

__all__ = [
    "ConfigArg",
    "Experiment",
    "RESTART_ENV",
    "build_policy",
    "cpu_cores",
    "default_exp_dir",
    "default_threads",
    "env_manager",
    "holds_run",
    "is_compiled",
    "job_id",
    "same_job",
    "load_config",
    "make_replay_buffer",
    "replay_capacity",
    "restart_count",
]

logger = logging.getLogger(__name__)

ConfigArg = str | os.PathLike | tuple[Mapping, Mapping] | EasyDict

#: Set by torchrun's elastic agent in the workers it starts: 0 at first, then 1, 2, ... after restarts.
RESTART_ENV = "TORCHELASTIC_RESTART_COUNT"
#: Set by torchrun in the workers it starts: the job's rendezvous id (``--rdzv-id``; a fresh uuid per launch with
#: ``--standalone`` and ``ding-dist --nproc``). A folder whose run was written by the same job is continued.
JOB_ENV = "TORCHELASTIC_RUN_ID"
JOB_FILE = ".job"
#: Default bound (seconds) of the health checks before each evaluation and checkpoint.
DEFAULT_HEALTH_TIMEOUT_S = 60.0


def is_compiled(config: Any) -> bool:
    """True for a config :func:`load_config` returned (it holds its ``create_config``), False for a path or a
    ``(main_config, create_config)`` pair.

    Example::

        is_compiled(load_config("configs/cartpole_dqn_config.py"))  # True
    """
    return isinstance(config, Mapping) and "create_config" in config and "policy" in config


def load_config(config: ConfigArg, *, seed: int | None = None, overrides: Sequence[str] = ()) -> EasyDict:
    """The compiled global config (not per-rank sizes): read, translated when it is a DI-engine file, merged over
    the defaults of its env and policy, checked. A config that is compiled already comes back as it is (a copy).

    Example::

        cfg = load_config("configs/cartpole_dqn_config.py", overrides=["policy.learn.batch_size=128"])
    """
    if is_compiled(config):
        if seed is not None or overrides:
            raise ValueError("this config is compiled already: give seed and overrides when it is compiled")
        return EasyDict(config)
    if isinstance(config, (str, os.PathLike)):
        main, create = read_config(config)
    elif isinstance(config, tuple) and len(config) == 2:
        main, create = EasyDict(config[0]), EasyDict(config[1] or {})
    else:
        raise TypeError(
            f"config must be a path to a Python config file, (main_config, create_config) or a compiled config, "
            f"got {config!r:.120}"
        )
    main, create, overrides = translate_if_ding(main, create, overrides, config)  # DI-engine files: ding_dialect.py
    policy_type = (create.get("policy") or {}).get("type")
    if policy_type is None:
        raise ValueError("create_config.policy.type is missing; set it to one of the registered policies")
    defaults = {
        "env": env_default_config(),
        "policy": get_policy_cls(policy_type).default_config(),
        "actor_learner": actor_learner_default_config(),
    }
    cfg = compile_config(main, create, defaults=defaults, seed=seed, overrides=overrides)
    check_sync_config(cfg.policy.sync)
    check_actor_learner_config(cfg.actor_learner)
    return cfg


def holds_run(folder: str | os.PathLike) -> bool:
    """True when ``folder`` already holds a training run (a checkpoint or a result.json).

    Example::

        holds_run("runs/cartpole_dqn")
    """
    folder = Path(folder)
    return (folder / "result.json").exists() or any((folder / "ckpt").glob("ckpt_*.pt"))


def job_id() -> str | None:
    """This worker's torchrun job (its rendezvous id), or None outside torchrun or without an id.

    Example::

        job_id()  # None in a plain process; "my_job" under torchrun --rdzv-id my_job
    """
    job = os.environ.get(JOB_ENV, "")
    return job if job and job.lower() != "none" else None  # torchrun's default rdzv id is the string "none"


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
        :func:`default_exp_dir`), read its roles. Raises ``ValueError``/``FileExistsError`` naming the bad value."""
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
        if exp_dir is None and resume is None:  # decided once, on rank 0: ranks must agree on the folder
            exp_dir = broadcast_object(default_exp_dir(cfg.exp_name) if rank == 0 else None)
        # An elastic re-form starts every worker with the restart count of its own agent (a joining node's is 0,
        # and a membership change counts no restart): rank 0 decides from the folder's job for everyone.
        rejoined = bool(broadcast_object(resume is None and same_job(exp_dir) if rank == 0 else None))
        if resume is None and restarts == 0 and not rejoined and holds_run(exp_dir):
            raise FileExistsError(
                f"exp_dir {str(exp_dir)!r} already holds a run (checkpoints or result.json): "
                "resume it, or choose another folder"
            )
        folder = Path(exp_dir or resume)
        lock = _lock(folder, rank)
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


def _lock(folder: Path, rank: int) -> ExperimentLock:
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


# --------------------------------------------------------------------------------- building a run's parts
def env_manager(cfg: EasyDict) -> str:
    """``create_config.env_manager.type`` (``sync`` when unset)."""
    return ((cfg.create_config.get("env_manager") or {}).get("type")) or "sync"


def cpu_cores() -> int:
    """CPU cores this process may run on (its affinity where the OS has one)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


#: Set by ``ding-dist train``'s local launcher when it set ``OMP_NUM_THREADS=1`` itself (you did not).
OMP_DEFAULTED_ENV = "DING_DIST_OMP_DEFAULTED"


def default_threads(
    obs_space: gym.Space | None = None, threads: int | None = None, image_threads: int | None = None
) -> None:
    """Torch threads of this process: ``threads`` when given (a role's ``actor_learner.*_threads``), else
    ``OMP_NUM_THREADS`` when set (torchrun sets 1), else one, or for image observations (a convolutional
    encoder) ``image_threads`` when given (an actor-learner role's share, :func:`~ding_dist.entry.roles.role_threads`;
    then a launcher's default ``OMP_NUM_THREADS=1`` does not count as set) or the CPU cores shared by this
    machine's processes.

    RL networks on vectors are small: extra intra-op threads only add synchronization, and on a busy machine
    they spin against other processes (measured: a 1-process CartPole PPO run 9x slower with 2 threads on a
    loaded 2-core machine). A Nature-CNN's convolutions do use them (Pong PPO on 2 cores, 1 process: +46-54 %
    env steps/s with 2 threads, docs/benchmarks.md section 8).
    """
    asked = os.environ.get("OMP_NUM_THREADS", "")
    if image_threads is not None and os.environ.get(OMP_DEFAULTED_ENV) == "1":
        asked = ""
    image = obs_space is not None and len(getattr(obs_space, "shape", None) or ()) == 3
    if threads is not None:
        pass
    elif asked.isdigit() and int(asked) >= 1:
        threads = int(asked)
    elif image and image_threads is not None:
        threads = image_threads
    elif image:
        threads = max(1, cpu_cores() // max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1"))))
    else:
        threads = 1
    if torch.get_num_threads() != threads:  # also a rank forked from a launcher that imported torch earlier
        if threads > 1 and not asked:
            logger.info(f"using {threads} torch threads for a convolutional network (OMP_NUM_THREADS changes it)")
        torch.set_num_threads(threads)


def build_policy(
    cfg: EasyDict, obs_space: gym.Space, action_space: gym.Space, device: str | torch.device | None = None
) -> Policy:
    """The config's policy on ``device`` (default ``policy.device``), with the run seed's initial parameters.

    Example::

        policy = build_policy(cfg, venv.single_observation_space, venv.single_action_space)
    """
    policy_cls = get_policy_cls(cfg.create_config.policy.type)
    # Same seed on every rank: identical initial parameters (the sync engine also broadcasts rank 0's).
    torch.manual_seed(cfg.seed)
    device = resolve_device(cfg.policy.get("device", "auto") if device is None else device)
    if device.type == "cuda":  # the rank's GPU becomes its current one (ranks on the CPU never touch CUDA)
        torch.cuda.set_device(device)
    return policy_cls(cfg.policy, obs_space, action_space, device)


def make_replay_buffer(
    cfg: EasyDict, obs_space: gym.Space, act_space: gym.Space, num_envs: int, capacity: int, seed: int
) -> ReplayBuffer | FrameReplayBuffer | PrioritizedReplayBuffer | SequenceReplayBuffer:
    """A replay buffer of ``capacity`` transitions over ``num_envs`` env slots for the config's policy.

    Stacked uint8 frames (Atari) get a :class:`~ding_dist.data.frame_replay.FrameReplayBuffer` that stores
    each frame once, unless ``policy.other.replay_buffer.frame_dedup`` is False (True: required). With
    ``policy.priority`` the storage is wrapped in a :class:`~ding_dist.data.prioritized.PrioritizedReplayBuffer`
    (``other.replay_buffer.alpha``, ``beta``, ``anneal_step``): one shard per rank (or actor), sampled with the
    others as one prioritized replay (:func:`~ding_dist.data.prioritized_shards.draw_prioritized`).
    A recurrent policy (R2D2) gets a :class:`~ding_dist.data.sequence_replay.SequenceReplayBuffer` (``policy.sequence``;
    uniform, ``alpha=0``, without ``policy.priority``).

    Example::

        buffer = make_replay_buffer(cfg, obs_space, act_space, num_envs=8, capacity=100_000, seed=0)
    """
    p = cfg.policy
    discrete = isinstance(act_space, gym.spaces.Discrete)
    policy_type = ((cfg.get("create_config") or {}).get("policy") or {}).get("type")  # absent: a plain replay
    policy_cls = get_policy_cls(policy_type) if policy_type else None
    if getattr(policy_cls, "recurrent", False):  # R2D2: sequences with their recurrent start states
        policy_cls.check_sequence_config(p)
        s, rb = p.sequence, p.other.replay_buffer
        return SequenceReplayBuffer(
            capacity, obs_space.shape, obs_dtype=obs_space.dtype, action_shape=() if discrete else act_space.shape,
            action_dtype=np.int64 if discrete else np.float32, num_envs=num_envs,
            state_shapes=policy_cls.recurrent_state_shapes(p), seq_len=s.seq_len, burnin=s.burnin, overlap=s.overlap,
            alpha=rb.alpha if p.priority else 0.0, beta=rb.beta, anneal_step=rb.anneal_step, seed=seed,
        )  # fmt: skip
    storage = replay_buffer_for(
        obs_space,
        capacity,
        frame_dedup=p.other.replay_buffer.get("frame_dedup"),
        action_shape=() if discrete else act_space.shape,
        action_dtype=np.int64 if discrete else np.float32,
        num_envs=num_envs,
        n_step=p.get("nstep", 1),
        gamma=p.discount_factor,
        seed=seed,
    )
    if not p.get("priority", False):
        return storage
    rb = p.other.replay_buffer
    return PrioritizedReplayBuffer(storage, alpha=rb.alpha, beta=rb.beta, anneal_step=rb.anneal_step)


def replay_capacity(cfg: EasyDict, parts: int) -> int:
    """One of ``parts`` equal shares of the global ``replay_buffer_size`` (rounded up).

    Example::

        replay_capacity(cfg, parts=2)  # half the global replay on each of 2 ranks
    """
    return math.ceil(cfg.policy.other.replay_buffer.replay_buffer_size / parts)
