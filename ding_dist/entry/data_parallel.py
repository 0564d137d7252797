"""The data-parallel loop: every rank collects and learns; the sync engine averages the gradients.

With N ranks, each rank steps its own envs with its own seeds, keeps its own replay buffer, and learns on
``batch_size / N`` samples per update, so every rank applies the same update. Every decision that changes
the control flow (learn or not, evaluate, checkpoint, stop) is taken from global counters that each rank
computes identically (each rank collects the same number of steps per iteration), so all ranks enter the
same collectives in the same order. Collectives per iteration: none, except one packed allreduce per log
call, one broadcast per evaluation and one object allgather per checkpoint (RNG states of all ranks), each
evaluation and checkpoint preceded by a health check (a monitored barrier bounded by ``health_timeout``).
With ``policy.collect.preempt`` (PPO) a straggler's rollout may be cut short
(:class:`~ding_dist.worker.collector.RolloutPreemption`); one small allreduce per iteration then shares
the ranks' rollout lengths, and the global env steps are their sum. In debug mode (``DING_DIST_DEBUG=1``)
the trained networks are compared across ranks every :data:`DEBUG_CHECK_EVERY` train iterations and at
each checkpoint.

Example::

    result = DataParallelRun("configs/cartpole_dqn_config.py", on_policy=False, seed=0, overrides=(),
                             exp_dir=None, max_env_steps=20_000, resume=None).run()
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

import numpy as np
import torch
from easydict import EasyDict

from ding_dist.comm import allreduce, comm_device, debug_enabled
from ding_dist.config.split import split_config
from ding_dist.entry.experiment import build_policy, env_manager
from ding_dist.entry.failures import EXIT_SIGTERM, diagnose
from ding_dist.entry.run_setup import RunSetup, make_replay_buffer
from ding_dist.envs import make_vec_env
from ding_dist.utils import progress_bar, shown_path
from ding_dist.worker import Collector, Evaluator, Learner
from ding_dist.worker.collector import RolloutPreemption

__all__ = ["DEBUG_CHECK_EVERY", "DataParallelRun"]

logger = logging.getLogger(__name__)

#: In debug mode, the trained networks are compared across ranks every this many train iterations
#: (and at each checkpoint); a difference raises ``DesyncError`` naming the first differing tensor.
DEBUG_CHECK_EVERY = 100


class DataParallelRun(RunSetup):
    """A data-parallel run: setup from :class:`RunSetup`, the loop in :meth:`run`."""

    def split_sizes(self, global_cfg: EasyDict) -> EasyDict:
        return split_config(global_cfg, self.world)  # per-rank batch_size, n_sample and collector envs

    def build(self, state: dict | None) -> None:
        cfg, seeds = self.cfg, self.seeds
        manager = env_manager(cfg)
        # Every env first: an async env manager forks its workers, which must not inherit a CUDA context.
        venv = make_vec_env(cfg.env, cfg.env.collector_env_num, manager, training=True)
        try:
            eval_venv = make_vec_env(cfg.env, cfg.env.evaluator_env_num, manager) if self.rank == 0 else None
        except BaseException:
            venv.close()
            raise
        self.evaluator = Evaluator(eval_venv, None, cfg.env.n_evaluator_episode)  # closes eval_venv on failure
        try:
            self.policy = build_policy(cfg, venv.single_observation_space, venv.single_action_space)
        except BaseException:
            venv.close()
            raise
        seeds.seed_process(self.rank)  # exploration differs across ranks, seeds and segments
        self.collector = Collector(venv, self.policy, seeds.env_seeds("collector", self.rank, venv.num_envs))
        eval_seeds = seeds.env_seeds("evaluator", self.rank, cfg.env.evaluator_env_num)
        self.evaluator = Evaluator(eval_venv, self.policy, cfg.env.n_evaluator_episode, eval_seeds, cfg.env.stop_value)
        self.learner = Learner(self.policy)
        if not self.on_policy:
            capacity = math.ceil(cfg.policy.other.replay_buffer.replay_buffer_size / self.world)  # global size
            space = venv.single_observation_space, venv.single_action_space
            self.buffer = make_replay_buffer(cfg, *space, venv.num_envs, capacity, seeds.integer("replay", self.rank))
        self.preemption: RolloutPreemption | None = None
        pc = cfg.policy.collect
        if self.on_policy and pc.get("preempt", False) and self.world > 1:
            self.preemption = RolloutPreemption(pc.preempt_fraction, pc.preempt_min_share)

    def rank_samples(self, local: int) -> np.ndarray:
        """Every rank's number of collected transitions (one allreduce of a one-hot vector)."""
        counts = torch.zeros(self.world, dtype=torch.int64)
        counts[self.rank] = local
        counts = counts.to(comm_device(like=counts))
        allreduce(counts, op="sum")
        return counts.cpu().numpy()

    def _updates_due(self, env_steps: int, n_sample: int) -> int:
        """Updates for ``env_steps`` new global env steps: ``update_per_collect`` per ``n_sample`` steps,
        exact over the run (a remainder carries over), so the update-to-data ratio does not depend on how
        many ranks or envs round an iteration up."""
        c = self.counters
        c.update_credit += self.cfg.policy.learn.update_per_collect * env_steps
        due, c.update_credit = divmod(c.update_credit, n_sample)
        return due

    # --- the loop ------------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        cfg, c = self.cfg, self.counters
        p = cfg.policy
        self.wall_start = wall_start = time.perf_counter()
        steps_at_start = c.env_steps
        n_vec = max(1, math.ceil(p.collect.n_sample / self.collector.num_envs))
        local_per_iter = n_vec * self.collector.num_envs
        global_per_iter = local_per_iter * self.world
        eval_freq, log_freq, ckpt_freq = p.eval.eval_freq, p.other.log_freq, p.other.checkpoint.freq
        learning_starts = p.learn.get("learning_starts", 0)
        n_sample_global = p.collect.n_sample * self.world  # split_config divided the global n_sample by N
        logger.info(
            "%s: %d rank(s) x %d envs, %d global env steps per iteration, policy on %s, exp dir %s",
            cfg.exp_name,
            self.world,
            self.collector.num_envs,
            global_per_iter,
            self.policy.device,
            shown_path(self.exp_dir),
        )
        if self.preemption is not None:
            logger.info(
                "rollout preemption: once %.0f%% of the ranks finished a rollout, the others stop after at least "
                "%.0f%% of theirs (policy.collect.preempt_fraction, preempt_min_share)",
                100 * p.collect.preempt_fraction,
                100 * p.collect.preempt_min_share,
            )
        if self._weight_averaging_models():
            logger.info(
                "%s lets ranks' weights differ between averagings: evaluation and checkpoints use rank 0's "
                "weights, and the logs report the drift between ranks (sync/weight_drift)",
                cfg.policy.sync.algorithm,
            )
        if self.buffer is not None and global_per_iter != n_sample_global:
            logger.info(
                "collect.n_sample=%d global env steps rounds up to %d per iteration (whole vector steps of %d envs "
                "x %d ranks); updates follow the env steps: update_per_collect=%d per %d env steps, exactly",
                n_sample_global,
                global_per_iter,
                self.collector.num_envs,
                self.world,
                p.learn.update_per_collect,
                n_sample_global,
            )

        bar = progress_bar(self.max_env_steps, desc="env steps", initial=c.env_steps)
        stopped_by, log_pending, log_pending_global = "max_env_steps", 0, 0
        debug = debug_enabled()
        try:
            while self.max_env_steps is None or c.env_steps < self.max_env_steps:
                rollout = self.collector.collect(n_vec, c.env_steps, self.preemption)
                collected, global_collected = local_per_iter, global_per_iter
                if self.preemption is not None:  # stragglers may have been cut short: count what was collected
                    collected = len(rollout["reward"]) * self.collector.num_envs
                    rollout["rank_samples"] = self.rank_samples(collected)
                    global_collected = int(rollout["rank_samples"].sum())
                before, c.env_steps = c.env_steps, c.env_steps + global_collected
                log_pending += collected
                log_pending_global += global_collected
                iters_before = self.policy.train_iter
                if self.buffer is None:
                    self.learner.train_rollout(rollout)
                else:
                    self.buffer.extend(rollout)
                    if c.env_steps >= learning_starts:
                        n_updates = self._updates_due(global_per_iter, n_sample_global)
                        self.learner.train_replay(self.buffer, n_updates, p.learn.batch_size)
                if debug and self.policy.train_iter // DEBUG_CHECK_EVERY > iters_before // DEBUG_CHECK_EVERY:
                    self.check_consistency()

                def crossed(freq: int, before: int = before) -> bool:
                    return freq > 0 and c.env_steps // freq > before // freq

                if crossed(log_freq):
                    self.log(log_pending, wall_start, steps_at_start, log_pending_global)
                    log_pending = log_pending_global = 0
                stop = crossed(eval_freq) and self.evaluate()
                if crossed(ckpt_freq):
                    self.checkpoint()
                bar.update(global_collected)
                fps = (c.env_steps - steps_at_start) / max(time.perf_counter() - wall_start, 1e-9)
                bar.set_postfix(fps=f"{fps:.0f}", eval=f"{c.last_eval:.1f}" if c.last_eval is not None else "-")
                if stop:
                    stopped_by = "stop_value"
                    break
            if log_pending_global:  # whatever stopped the run, its last episodes and updates are logged
                self.log(log_pending, wall_start, steps_at_start, log_pending_global)
            if stopped_by != "stop_value" and (not c.eval_history or c.eval_history[-1][0] != c.env_steps):
                if self.evaluate():
                    stopped_by = "stop_value"
            self.checkpoint()
        except Exception as exc:
            where = f"env step {c.env_steps}"
            clearer = diagnose(exc, rank=self.rank, world=self.world, where=where, health_timeout=self.health_timeout)
            if clearer is None:
                raise
            raise clearer from exc
        except BaseException as exc:  # SIGTERM (SystemExit) or Ctrl-C: log where it stopped
            why = "SIGTERM" if isinstance(exc, SystemExit) and exc.code == EXIT_SIGTERM else type(exc).__name__
            newest = shown_path(self.ckpt.latest())
            logger.warning("stopping at env step %d (%s); newest checkpoint: %s", c.env_steps, why, newest)
            raise
        finally:
            bar.close()
            self.close()

        return self.write_result(stopped_by, wall_start)
