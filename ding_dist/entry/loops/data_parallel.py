"""The data-parallel loop: every rank collects and learns; the sync engine averages the gradients.

With N ranks, each rank steps ``collector_env_num / N`` envs with its own seeds for the same horizon as one
process, keeps its own replay buffer, and learns on ``batch_size / N`` samples per update, so every rank applies
the same update. Every decision that changes the control flow (learn or not, evaluate, checkpoint, stop) is taken
from global counters that each rank computes identically (each rank collects the same number of steps per
iteration), so all ranks enter the same collectives in the same order. Collectives per iteration: none, except
one packed allreduce per log call, one broadcast per evaluation and one object allgather per checkpoint (RNG
states of all ranks), each evaluation and checkpoint preceded by a health check (a monitored barrier bounded by
``health_timeout``). With ``policy.collect.preempt`` (PPO) a straggler's rollout may be cut short
(:class:`~ding_dist.worker.collector.RolloutPreemption`); one small allreduce per iteration then shares the
ranks' rollout lengths, and the global env steps are their sum. In debug mode (``DING_DIST_DEBUG=1``) the trained
networks are compared across ranks every ``DEBUG_CHECK_EVERY`` (100) train iterations and at each checkpoint.

The loop composes the services it uses (:mod:`~ding_dist.entry.services`): checkpointing with resume, metrics,
evaluation, and the guarded context every loop runs in. ``group`` runs it on a subgroup of the world (a member of
a population, :mod:`~ding_dist.entry.loops.pbt`: ``exp.rank``/``exp.world`` are then the rank and size in it): every
collective above goes through that group, and ``on_iteration`` and ``stop_group`` let the population meet.

Example::

    with Experiment.open(load_config("configs/cartpole_dqn_config.py"), max_env_steps=20_000) as exp:
        result = DataParallelLoop(exp).run()
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ding_dist.comm import allreduce, comm_device, debug_enabled, get_rank, health_check
from ding_dist.config.split import split_plan
from ding_dist.entry.experiment import Experiment
from ding_dist.entry.factories import build_policy, env_manager, make_replay_buffer, replay_capacity
from ding_dist.entry.services.checkpointing import Checkpointing
from ding_dist.entry.services.evaluation import Evaluation
from ding_dist.entry.services.failures import (
    DEBUG_CHECK_EVERY,
    Preemption,
    close_workers,
    consistency_check,
    guarded,
)
from ding_dist.entry.services.metrics import Metrics
from ding_dist.entry.services.phases import Phases
from ding_dist.entry.services.run_folder import save_run_config, write_result
from ding_dist.entry.threads import adaptive_threads, default_threads, update_work
from ding_dist.envs import make_vec_env
from ding_dist.policy.base import policy_sync_group
from ding_dist.utils import progress_bar, shown_path
from ding_dist.utils.logging import end_progress
from ding_dist.worker import Collector, Evaluator, Learner, reduce_log
from ding_dist.worker.collector import RolloutPreemption

__all__ = ["DataParallelLoop"]

logger = logging.getLogger(__name__)


class DataParallelLoop:
    """A data-parallel run of an :class:`~ding_dist.entry.experiment.Experiment`: its parts in the constructor,
    the loop in :meth:`run`.

    ``group``: the ranks of this run (default: the world; ``exp.rank`` and ``exp.world`` are the rank and size in
    it). ``on_iteration(env_steps_before)``: called on every rank after each iteration's evaluation, before its
    checkpoint; True stops the run (``stopped_by="stop_value"``). ``stop_group``: ``(group, size)`` of the ranks that
    agree on a stop signal and that the diagnosis of a failed collective checks (default: ``group``).
    """

    def __init__(
        self,
        exp: Experiment,
        group: Any = None,
        *,
        on_iteration: Callable[[int], bool] | None = None,
        stop_group: tuple[Any, int] | None = None,
    ) -> None:
        self.exp, self.rank, self.world = exp, exp.rank, exp.world
        self.group, self.on_iteration = group, on_iteration
        self.stop_group = stop_group if stop_group is not None else (group, exp.world)
        self.cfg = cfg = exp.cfg  # the run's totals; each rank's share of them: self.plan
        self.plan = split_plan(cfg, exp.world)  # refuses sizes the ranks cannot share before anything starts
        default_threads()
        health_check(exp.health_timeout, group=group)  # every rank came up (this also creates the side group)
        self.ckpt = Checkpointing(exp, rng_slot=(self.rank, self.world), group=group, choose_group=group,
                                  extra={"world_size": self.world})  # fmt: skip
        state, self.counters = self.ckpt.load()
        seeds = exp.seeds(self.counters.env_steps if state else 0)
        self.buffer = None
        manager, venv, eval_venv = env_manager(cfg), None, None
        try:
            # Every env first: an async env manager forks its workers, which must not inherit a CUDA context.
            venv = make_vec_env(cfg.env, self.plan.rank_envs, manager, training=True)
            eval_venv = (make_vec_env(cfg.env, cfg.env.evaluator_env_num, manager, restarting=True)
                         if self.rank == 0 else None)  # fmt: skip
            with policy_sync_group(group):  # gradients and statistics within the group
                self.policy = build_policy(cfg, venv.single_observation_space, venv.single_action_space)
            seeds.seed_process(self.rank)  # exploration differs across ranks, seeds and segments
            self.collector = Collector(venv, self.policy, seeds.env_seeds("collector", self.rank, venv.num_envs))
            eval_seeds = seeds.env_seeds("evaluator", self.rank, cfg.env.evaluator_env_num)
            self.evaluator = Evaluator(eval_venv, self.policy, cfg.env.n_evaluator_episode, eval_seeds,
                                       cfg.env.stop_value)  # fmt: skip
            self.learner = Learner(self.policy)
            if not exp.on_policy:
                space = venv.single_observation_space, venv.single_action_space
                self.buffer = make_replay_buffer(cfg, *space, venv.num_envs, replay_capacity(cfg, self.world),
                                                 seeds.integer("replay", self.rank))  # fmt: skip
            default_threads(self.policy.obs_space)  # more than one only for image observations
            # updates with enough work take idle cores while they stay idle
            work = update_work(self.policy, self.plan)
            self.threads = adaptive_threads(self.policy.obs_space, work, self.policy.device)
            if state is not None:
                self.ckpt.restore(state, self.policy, self.buffer, self.counters)
        except BaseException:  # e.g. SIGTERM while the envs start: close what is open, no orphans
            close_workers(venv, eval_venv)
            raise
        if self.rank == 0:  # after the checkpoint was found to fit: a failed resume leaves the folder as it was
            save_run_config(exp.cfg, exp.exp_dir, continuing=state is not None)  # a changed one: a new file
        self.metrics = Metrics(exp, self.policy, self.counters, resumed=state is not None)
        self.evaluate = Evaluation(self.evaluator, self.counters, self.metrics, health_timeout=exp.health_timeout,
                                   group=group,
                                   on_best=lambda: self.ckpt.save_best(self.policy, self.counters))  # fmt: skip
        self.preemption: RolloutPreemption | None = None
        pc = cfg.policy.collect
        if exp.on_policy and pc.get("preempt", False) and self.world > 1:
            self.preemption = RolloutPreemption(pc.preempt_fraction, pc.preempt_min_share)

    def rank_samples(self, local: int) -> np.ndarray:
        """Every rank's number of collected transitions (one allreduce of a one-hot vector)."""
        counts = torch.zeros(self.world, dtype=torch.int64)
        counts[self.rank] = local
        counts = counts.to(comm_device(like=counts))
        allreduce(counts, op="sum", group=self.group)
        return counts.cpu().numpy()

    def _updates_due(self, env_steps: int, n_sample: int) -> int:
        """Updates for ``env_steps`` new global env steps: ``update_per_collect`` per ``n_sample`` steps,
        exact over the run (a remainder carries over), so the update-to-data ratio does not depend on how
        many ranks or envs round an iteration up."""
        c = self.counters
        c.update_credit += self.cfg.policy.learn.update_per_collect * env_steps
        due, c.update_credit = divmod(c.update_credit, n_sample)
        return due

    def log(self, env_step_delta: int, wall_start: float, steps_at_start: int, global_delta: int | None = None) -> bool:
        """One packed allreduce: episode sums across ranks and learner statistics averaged, then one record; True
        when a timed checkpoint is due (any rank's clock says so: every rank gets the same answer).

        ``env_step_delta``: this rank's env steps since the last record; ``global_delta``: all ranks' (default
        ``env_step_delta * world``: every rank collected as many; under rollout preemption they differ).
        """
        returns, lengths = self.collector.pop_episodes()
        sums = {
            "episodes": len(returns),
            "ep_return_sum": sum(returns),
            "ep_length_sum": sum(lengths),
            "env_steps": env_step_delta,
            "env/restarts": self.collector.restarts,  # every rank's crashed-and-recreated envs so far
            "ckpt/due": float(self.ckpt.due_by_time()),
        }
        out = reduce_log(sums, self.learner.pop_stats(), group=self.group)
        expected = env_step_delta * self.world if global_delta is None else global_delta
        if int(out.pop("env_steps")) != expected:
            raise RuntimeError("ranks collected different numbers of env steps; their control flow diverged")
        due = out.pop("ckpt/due") > 0
        self.metrics.record(self.metrics.common_values(out, wall_start, steps_at_start))
        return due

    def checkpoint(self) -> None:
        before = (lambda: consistency_check(self.policy, self.group)) if debug_enabled() else None
        self.ckpt.save(self.policy, self.counters, self.buffer, time.perf_counter() - self.wall_start, before)

    def close(self) -> None:
        try:
            self.ckpt.finish_quietly()
            self.metrics.close()
        finally:
            close_workers(self.collector.venv, self.evaluator.venv)

    # --- the loop ------------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        cfg, c, exp = self.cfg, self.counters, self.exp
        p = cfg.policy
        self.wall_start = wall_start = time.perf_counter()
        phases = Phases()  # where the time goes: result.json's phases_s
        steps_at_start = c.env_steps
        n_vec = max(1, math.ceil(self.plan.rank_n_sample / self.collector.num_envs))
        local_per_iter = n_vec * self.collector.num_envs
        global_per_iter = local_per_iter * self.world
        eval_freq, log_freq, ckpt_freq = p.eval.eval_freq, p.other.log_freq, p.other.checkpoint.freq
        learning_starts = p.learn.get("learning_starts", 0)
        n_sample_global = p.collect.n_sample  # the run's total (each rank: plan.rank_n_sample)
        logger.info(
            "%s: %d rank(s) x %d envs, %d global env steps per iteration, policy on %s, exp dir %s",
            cfg.exp_name,
            self.world,
            self.collector.num_envs,
            global_per_iter,
            self.policy.device,
            shown_path(exp.exp_dir),
        )
        if self.preemption is not None:
            logger.info(
                "rollout preemption: once %.0f%% of the ranks finished a rollout, the others stop after at least "
                "%.0f%% of theirs (policy.collect.preempt_fraction, preempt_min_share)",
                100 * p.collect.preempt_fraction,
                100 * p.collect.preempt_min_share,
            )
        if self.metrics.averaging:
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

        bar = progress_bar(exp.max_env_steps, desc="env steps", initial=c.env_steps)
        stopped_by, log_pending, log_pending_global = "max_env_steps", 0, 0
        debug = debug_enabled()
        stop_group, stop_world = self.stop_group
        with guarded(rank=get_rank(stop_group), world=stop_world, health_timeout=exp.health_timeout,
                     where=lambda: f"env step {c.env_steps}", newest=self.ckpt.newest,
                     close=lambda: (bar.close(), self.close()), group=stop_group), \
                Preemption(stop_group, stop_world) as preempted:  # fmt: skip
            while exp.max_env_steps is None or c.env_steps < exp.max_env_steps:
                if self.threads is not None:
                    self.threads.tick("collect")
                with phases("collect"):
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
                if self.threads is not None:  # its own count: env workers busy while collecting may idle now
                    self.threads.tick("learn")
                with phases("learn"):
                    if self.buffer is None:
                        self.learner.train_rollout(rollout)
                    else:
                        self.buffer.extend(rollout)
                        if c.env_steps >= learning_starts:
                            n_updates = self._updates_due(global_per_iter, n_sample_global)
                            self.learner.train_replay(self.buffer, n_updates, self.plan.rank_batch)
                if debug and self.policy.train_iter // DEBUG_CHECK_EVERY > iters_before // DEBUG_CHECK_EVERY:
                    consistency_check(self.policy, self.group)

                def crossed(freq: int, before: int = before) -> bool:
                    return freq > 0 and c.env_steps // freq > before // freq

                due = False  # a timed checkpoint: decided at the log points, where the ranks share their clocks
                if crossed(log_freq):
                    with phases("log"):
                        due = self.log(log_pending, wall_start, steps_at_start, log_pending_global)
                    log_pending = log_pending_global = 0
                elif self.world == 1 and not log_freq > 0:  # nothing to share: each iteration may decide
                    due = self.ckpt.due_by_time()
                with phases("eval"):
                    stop = crossed(eval_freq) and self.evaluate()
                    if self.on_iteration is not None:  # e.g. a population's exploit step
                        stop = self.on_iteration(before) or stop
                if crossed(ckpt_freq) or due:
                    with phases("checkpoint"):
                        self.checkpoint()
                fps = (c.env_steps - steps_at_start) / max(time.perf_counter() - wall_start, 1e-9)
                bar.set_postfix(fps=f"{fps:.0f}", eval=f"{c.last_eval:.1f}" if c.last_eval is not None else "-",
                                refresh=False)  # fmt: skip
                bar.update(global_collected)  # the line it may print shows this iteration's evaluation
                if stop:
                    stopped_by = "stop_value"
                    break
                if preempted.requested():  # SIGTERM/SIGUSR1 on some rank: every rank stops after this iteration
                    stopped_by = preempted.signal_name or "preempted"
                    break
            if log_pending_global:  # whatever stopped the run, its last episodes and updates are logged
                with phases("log"):
                    self.log(log_pending, wall_start, steps_at_start, log_pending_global)
            if stopped_by in ("max_env_steps", "stop_value"):  # a preempted run saves its step without evaluating
                with phases("eval"):
                    stopped_by = self.evaluate.at_end(stopped_by)
            end_progress(bar, stopped_by, c.last_eval)
            with phases("checkpoint"):
                self.checkpoint()
                self.ckpt.finish()  # the last checkpoint is on disk before the result says the run ended
        return write_result(exp, self.policy, c, stopped_by, time.perf_counter() - wall_start,
                            checkpoint=self.ckpt.written(), phases_s=phases.split(),
                            **({"threads_s": self.threads.split()} if self.threads is not None else {}))  # fmt: skip
