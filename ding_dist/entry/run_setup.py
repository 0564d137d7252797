"""One training run's setup and state, shared by every mode: config, experiment folder, resume state,
envs, policy, workers, metric writer, closing.

Each mode subclasses :class:`RunSetup` and adds its loop (``run()``): :mod:`~ding_dist.entry.data_parallel`
(every rank collects and learns), :mod:`~ding_dist.entry.actor_loop` and :mod:`~ding_dist.entry.learner_loop`
(the roles of an actor-learner run). The periodic work they share lives in mixins, one module each:
:mod:`~ding_dist.entry.resume`, :mod:`~ding_dist.entry.checkpoints`, :mod:`~ding_dist.entry.logs`,
:mod:`~ding_dist.entry.evaluation`. A subclass says how it splits the global sizes (:meth:`split_sizes`)
and what it builds (:meth:`build`).

Example::

    class MyRun(RunSetup):
        def build(self, state):  # envs, policy and workers of this rank (seeded from self.seeds)
            ...

        def run(self):
            ...
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from easydict import EasyDict

from ding_dist.comm import broadcast_object, check_consistency, get_rank, get_world_size, health_check
from ding_dist.data.frame_replay import FrameReplayBuffer, replay_buffer_for
from ding_dist.data.replay import ReplayBuffer
from ding_dist.entry.checkpoints import CheckpointMixin
from ding_dist.entry.counters import Counters
from ding_dist.entry.evaluation import EvaluationMixin
from ding_dist.entry.experiment import (
    ConfigArg,
    default_exp_dir,
    default_threads,
    holds_run,
    load_config,
    restart_count,
)
from ding_dist.entry.failures import DEFAULT_HEALTH_TIMEOUT_S
from ding_dist.entry.logs import LogMixin
from ding_dist.entry.resume import ResumeMixin, save_run_config
from ding_dist.envs.seeding import RunSeeds
from ding_dist.policy import Policy, get_policy_cls
from ding_dist.sync import DistributedModel
from ding_dist.utils import CheckpointManager, MetricWriter, atomic_write_json
from ding_dist.utils.exp_lock import ExperimentInUseError, ExperimentLock

__all__ = ["Counters", "RunSetup", "make_replay_buffer"]

logger = logging.getLogger(__name__)


def make_replay_buffer(
    cfg: EasyDict, obs_space: gym.Space, act_space: gym.Space, num_envs: int, capacity: int, seed: int
) -> ReplayBuffer | FrameReplayBuffer:
    """A replay buffer of ``capacity`` transitions over ``num_envs`` env slots for the config's policy.

    Stacked uint8 frames (Atari) get a :class:`~ding_dist.data.frame_replay.FrameReplayBuffer` that stores
    each frame once, unless ``policy.other.replay_buffer.frame_dedup`` is False (True: required).

    Example::

        buffer = make_replay_buffer(cfg, obs_space, act_space, num_envs=8, capacity=100_000, seed=0)
    """
    p = cfg.policy
    discrete = isinstance(act_space, gym.spaces.Discrete)
    return replay_buffer_for(
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


class RunSetup(ResumeMixin, CheckpointMixin, LogMixin, EvaluationMixin):
    """One training run's setup and state (config, envs, policy, workers, writer, checkpoints)."""

    #: The group whose ranks learn together (None: the world); health checks and checkpoints use it.
    learn_group: Any = None
    policy: Policy
    collector: Any = None
    evaluator: Any = None
    buffer: Any = None

    def __init__(
        self,
        config: ConfigArg,
        *,
        on_policy: bool,
        seed: int | None,
        overrides: Sequence[str],
        exp_dir: str | os.PathLike | None,
        max_env_steps: int | None,
        resume: str | os.PathLike | None,
        health_timeout: float = DEFAULT_HEALTH_TIMEOUT_S,
    ) -> None:
        self.rank, self.world = get_rank(), get_world_size()
        default_threads()
        global_cfg = load_config(config, seed=seed, overrides=overrides)
        policy_cls = get_policy_cls(global_cfg.create_config.policy.type)
        if policy_cls.on_policy != on_policy:
            want = "serial_pipeline_onpolicy" if policy_cls.on_policy else "serial_pipeline"
            raise ValueError(f"policy type {global_cfg.create_config.policy.type!r} needs {want}; train() picks it")
        if max_env_steps is not None and max_env_steps < 1:
            raise ValueError(f"max_env_steps must be >= 1 or None, got {max_env_steps}")
        if isinstance(health_timeout, bool) or not isinstance(health_timeout, (int, float)) or not health_timeout > 0:
            raise ValueError(f"health_timeout must be a positive number of seconds, got {health_timeout!r}")
        self.health_timeout = float(health_timeout)
        self.on_policy = on_policy
        self.cfg = cfg = self.split_sizes(global_cfg)  # per-rank batch_size, n_sample and collector envs
        self.max_env_steps = max_env_steps
        if max_env_steps is None and cfg.env.stop_value is None:
            logger.warning("neither max_env_steps nor env.stop_value is set: training runs until interrupted")

        if exp_dir is None and resume is None:  # decided once, on rank 0: ranks must agree on the folder
            exp_dir = broadcast_object(default_exp_dir(cfg.exp_name) if self.rank == 0 else None)
        elif resume is None and restart_count() == 0 and holds_run(exp_dir):
            raise FileExistsError(
                f"exp_dir {str(exp_dir)!r} already holds a run (checkpoints or result.json): "
                "resume it, or choose another folder"
            )
        self.exp_dir = Path(exp_dir or resume)
        self._lock = self._lock_exp_dir()
        try:
            self._setup(global_cfg, resume)
        except BaseException:
            self._lock.release()
            raise

    # --- what a mode says -------------------------------------------------------------------------
    def split_sizes(self, global_cfg: EasyDict) -> EasyDict:
        """The config with this rank's share of the global sizes (``batch_size``, ``n_sample``, training envs)."""
        raise NotImplementedError

    def build(self, state: dict | None) -> None:
        """Build this rank's envs, policy and workers (``state``: the checkpoint resumed from, or None), seeded
        from :attr:`seeds`."""
        raise NotImplementedError

    # --- setup --------------------------------------------------------------------------------------
    def _lock_exp_dir(self) -> ExperimentLock:
        """Rank 0 creates the folder and takes its lock; every rank raises if another live run holds it."""
        lock = ExperimentLock(self.exp_dir)
        error = None
        if self.rank == 0:
            try:
                lock.acquire()
            except ExperimentInUseError as e:
                error = str(e)
        error = broadcast_object(error)
        if error is not None:
            raise ExperimentInUseError(error)
        return lock

    def _setup(self, global_cfg: EasyDict, resume: str | os.PathLike | None) -> None:
        cfg = self.cfg
        # Every rank came up (this also creates the side group the later health checks use).
        health_check(self.health_timeout)
        self.ckpt = CheckpointManager(self.exp_dir / "ckpt", keep_last=cfg.policy.other.checkpoint.keep_last)
        self.counters = Counters()
        self.restarts = restart_count()
        state = self._load_resume_state(resume)
        # Streams of their own for this segment: a resume or restart never replays earlier episodes or noise.
        self.seeds = RunSeeds(cfg.seed, restart=self.restarts, start_step=self.counters.env_steps if state else 0)
        try:
            self.build(state)
            default_threads(self.policy.obs_space)  # more than one only for image observations
            if state is not None:
                self._restore(state)
        except BaseException:  # e.g. SIGTERM while the envs start: close what is open, no orphans
            self._close_envs()
            raise
        if self.rank == 0:  # after the checkpoint was found to fit: a failed resume leaves the folder as it was
            save_run_config(global_cfg, self.exp_dir, continuing=state is not None)  # a changed one: a new file
        self._replay_saved_at: int | None = None
        # Records up to the checkpoint's step belong to the restored state; later ones are dropped. A
        # restart that found no checkpoint starts over, so the failed attempt's records go too.
        purge = self.counters.env_steps + 1 if state else (0 if self.restarts else None)
        # The resolved config goes to TensorBoard once per start (text + hparams); --track starts W&B there.
        self.writer = (
            MetricWriter(self.exp_dir / "tb", purge_step=purge, config=global_cfg) if self.writes_metrics else None
        )

    @property
    def writes_metrics(self) -> bool:
        """Whether this rank keeps a metric writer (the ranks that learn; only rank 0's writes files)."""
        return True

    # --- shared helpers -----------------------------------------------------------------------------
    def _weight_averaging_models(self) -> list[DistributedModel]:
        """The policy's distributed networks whose algorithm lets ranks' weights differ between averagings."""
        return [m for m in vars(self.policy).values() if isinstance(m, DistributedModel) and m.averages_weights]

    def check_consistency(self) -> None:
        """Raise ``DesyncError`` naming the first tensor of the policy's networks that differs across ranks.

        Skipped while a weight-averaging algorithm (decentralized, async, local SGD) trains a network: there
        ranks differ between averagings by design, and the logs report the drift (``sync/weight_drift``);
        evaluation and checkpoints then use rank 0's weights.
        """
        if self._weight_averaging_models():
            return
        tensors: dict[str, torch.Tensor] = {}
        for name in self.policy._state_attrs:
            obj = getattr(self.policy, name)
            if isinstance(obj, torch.nn.Module):
                tensors.update({f"{name}.{key}": value for key, value in obj.state_dict().items()})
            elif isinstance(obj, torch.Tensor):
                tensors[name] = obj
        check_consistency(tensors, group=self.learn_group)

    #: ``time.perf_counter()`` when this segment's training loop started (set by the loop).
    wall_start: float | None = None

    def segment_wall_time(self) -> float:
        """Seconds of this segment's training loop so far (0 before it starts)."""
        return 0.0 if self.wall_start is None else time.perf_counter() - self.wall_start

    def write_result(self, stopped_by: str, wall_start: float, **extra: Any) -> dict[str, Any]:
        """The run's result, shared by every loop (``extra`` adds a mode's keys); rank 0 writes result.json
        atomically. ``wall_time_s`` is the training loops' total over the run's segments (a resumed run adds
        its earlier segments, up to the checkpoint it continued from); ``segment_wall_time_s`` this one's."""
        c = self.counters
        segment = time.perf_counter() - wall_start
        result = {
            "env_steps": c.env_steps,
            "train_iters": self.policy.train_iter,
            "episodes": c.episodes,
            "best_eval_return": c.best_eval,
            "last_eval_return": c.last_eval,
            "eval_history": c.eval_history,
            "world_size": self.world,
            "wall_time_s": c.wall_time_s + segment,
            "segment_wall_time_s": segment,
            "stopped_by": stopped_by,
            "exp_dir": str(self.exp_dir),
            **extra,
        }
        if self.rank == 0:
            atomic_write_json(self.exp_dir / "result.json", result)
        return result

    def _close_envs(self) -> None:
        for worker in (self.collector, self.evaluator):
            if worker is not None:
                try:
                    worker.close()
                except OSError as e:  # its env processes already exited (e.g. SIGTERM to the process group)
                    logger.info("closing the %s's envs: %s (their processes had exited)", type(worker).__name__, e)
                except Exception as e:  # keep closing the rest
                    logger.warning("closing the %s's envs failed: %s", type(worker).__name__, e)

    def close(self) -> None:
        try:
            if getattr(self, "writer", None) is not None:
                self.writer.close()
            self._close_envs()
        finally:
            self._lock.release()
