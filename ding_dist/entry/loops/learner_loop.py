"""The learner loop of an actor-learner run: take a chunk, learn from it, send new weights, repeat.

Every learner consumes exactly one chunk per round (from whichever of its actors sent one first), so the
global counters advance by ``learners x chunk`` env steps per round on every learner, and every decision
(learn, evaluate, checkpoint, stop) is taken from them, as in the data-parallel loop: the learners enter
the same collectives in the same order (gradients through the engine within the learner group, one packed
allreduce per log, one broadcast per evaluation, one allgather per checkpoint). With one learner none runs.

Each round, top to bottom: wait for a chunk (a dead actor is named here; the run goes on with the others or
stops, ``actor_learner.on_actor_death``); drop it when it lags more than ``actor_learner.max_lag`` versions
behind; off-policy (DQN, SAC): add it to the actor's replay shard and run the updates its env steps are
worth (``update_per_collect`` per ``n_sample``, exactly); on-policy (PPO, IMPALA): learn from it (PPO's
ratio and IMPALA's V-trace correct for the lag with the behavior log-probabilities); every
``actor_learner.weight_sync_every`` updates (checked after each round), a new weight version (learner rank 0
sends it without waiting).
At the end learner rank 0 sends the stop version and every learner drains its actors' last chunks.

Example::

    result = LearnerLoop(exp).run()   # on a learner rank of an Experiment with actor_learner.actors=2
    result["actor_learner"]["lag_max"]  # never above actor_learner.max_lag
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from ding_dist.comm import DeadRankError, allreduce, comm_device, debug_enabled, get_local_size, health_check
from ding_dist.config.split import split_plan
from ding_dist.data.replay_shards import ReplayShards
from ding_dist.entry.experiment import Experiment
from ding_dist.entry.factories import build_policy, env_manager, make_replay_buffer, replay_capacity
from ding_dist.entry.roles import RoleGroups, chunk_steps, role_threads
from ding_dist.entry.services.checkpointing import Checkpointing
from ding_dist.entry.services.evaluation import Evaluation
from ding_dist.entry.services.failures import (
    DEBUG_CHECK_EVERY,
    Preemption,
    close_workers,
    consistency_check,
    guarded,
)
from ding_dist.entry.services.metrics import Metrics, finish_replay_values, replay_values
from ding_dist.entry.services.phases import Phases
from ding_dist.entry.services.run_folder import save_run_config, write_result
from ding_dist.entry.threads import adaptive_threads, cpu_cores, default_threads, threaded_image, update_work
from ding_dist.envs import make_vec_env
from ding_dist.policy.base import policy_sync_group
from ding_dist.utils import progress_bar, shown_path
from ding_dist.utils.logging import end_progress
from ding_dist.worker import Evaluator, Learner, reduce_log
from ding_dist.worker.experience import ActorLost, Chunk, ExperienceReceiver, chunk_layout
from ding_dist.worker.weight_sync import WeightPublisher

__all__ = ["LearnerLoop"]

logger = logging.getLogger(__name__)

#: Seconds the learners wait at the end for the actors' last chunks and for the stop version to go out.
FINISH_TIMEOUT_S = 60.0


@dataclass
class _Interval:
    """What a learner saw since the last log record (and, in ``actor``, each actor's latest header)."""

    chunks: int = 0
    dropped: int = 0
    lag_sum: int = 0
    lag_max: int = 0
    depth_sum: int = 0
    wait_s: float = 0.0
    episodes: int = 0
    return_sum: float = 0.0
    length_sum: float = 0.0
    actor: dict[int, Chunk] = field(default_factory=dict)

    def see(self, chunk: Chunk) -> None:
        """Count a chunk's episodes and keep its header (also for a chunk that is then dropped)."""
        self.episodes += chunk.episodes
        self.return_sum += chunk.return_sum
        self.length_sum += chunk.length_sum
        self.actor[chunk.actor] = chunk


class LearnerLoop:
    """One learner of an actor-learner run of an :class:`~ding_dist.entry.experiment.Experiment`: its parts in
    the constructor, the loop in :meth:`run`."""

    def __init__(self, exp: Experiment) -> None:
        self.exp, self.rank, self.world = exp, exp.rank, exp.world
        self.roles = roles = exp.roles
        self.cfg = cfg = exp.cfg  # the run's totals; each learner's share of them: self.plan
        self.plan = split_plan(cfg, roles.learners, "--learners")  # sizes the learners cannot share: refused
        default_threads()
        health_check(exp.health_timeout)  # every rank came up (this also creates the side group of later checks)
        self.groups = RoleGroups.create(roles)  # every rank, same order
        self.learn_group = self.groups.learners
        roles_extra = {"world_size": self.world, "roles": {"learners": roles.learners, "actors": roles.actors}}
        self.ckpt = Checkpointing(exp, rng_slot=(self.rank, roles.learners), group=self.learn_group, extra=roles_extra)
        state, self.counters = self.ckpt.load()
        seeds = exp.seeds(self.counters.env_steps if state else 0)
        self.buffer, eval_venv = None, None
        try:
            eval_venv = (make_vec_env(cfg.env, cfg.env.evaluator_env_num, env_manager(cfg), restarting=True)
                         if self.rank == 0 else None)  # fmt: skip
            if eval_venv is not None:
                obs_space, act_space = eval_venv.single_observation_space, eval_venv.single_action_space
            else:
                probe = make_vec_env(cfg.env, 1, "sync")  # the spaces the actors' envs have
                obs_space, act_space = probe.single_observation_space, probe.single_action_space
                probe.close()
            with policy_sync_group(self.learn_group):  # gradients and statistics within the learners
                self.policy = build_policy(cfg, obs_space, act_space)
            seeds.seed_process(self.rank)
            eval_seeds = seeds.env_seeds("evaluator", self.rank, cfg.env.evaluator_env_num)
            self.evaluator = Evaluator(eval_venv, self.policy, cfg.env.n_evaluator_episode, eval_seeds,
                                       cfg.env.stop_value)  # fmt: skip
            self.learner = Learner(self.policy)
            num_envs = self.plan.rank_envs  # each actor's: this learner's share of the training envs
            self.steps = chunk_steps(self.plan.rank_n_sample, num_envs)
            self.layout = chunk_layout(self.policy, obs_space, num_envs, self.steps)
            self.actors = roles.actors_of(self.rank)
            if not exp.on_policy:  # the global replay, split over learners and their actors
                capacity = replay_capacity(cfg, roles.learners * len(self.actors))
                shards = {a: make_replay_buffer(cfg, obs_space, act_space, num_envs, capacity,
                                                seeds.integer("replay", a)) for a in self.actors}  # fmt: skip
                self.buffer = ReplayShards(shards)
            # more than one only for image observations, or as actor_learner.learner_threads says
            role = role_threads(cfg.actor_learner, roles, self.rank, cpu_cores(), get_local_size())
            default_threads(self.policy.obs_space, **role)
            self.threads = None  # large updates on vectors: the cores the actors leave, while they leave them idle
            if role["threads"] is None and role["image_threads"] is not None and not threaded_image(obs_space):
                self.threads = adaptive_threads(obs_space, update_work(self.policy, self.plan), self.policy.device,
                                                most=role["image_threads"])  # fmt: skip
            if state is not None:
                self.ckpt.restore(state, self.policy, self.buffer, self.counters)
        except BaseException:  # e.g. SIGTERM while the envs start: close what is open, no orphans
            close_workers(eval_venv)
            raise
        if self.rank == 0:  # after the checkpoint was found to fit: a failed resume leaves the folder as it was
            save_run_config(exp.cfg, exp.exp_dir, continuing=state is not None)  # a changed one: a new file
        self.metrics = Metrics(exp, self.policy, self.counters, resumed=state is not None)
        self.evaluate = Evaluation(self.evaluator, self.counters, self.metrics, health_timeout=exp.health_timeout,
                                   group=self.learn_group,
                                   on_best=lambda: self.ckpt.save_best(self.policy, self.counters))  # fmt: skip

    def checkpoint(self) -> None:
        before = (lambda: consistency_check(self.policy, self.learn_group)) if debug_enabled() else None
        self.ckpt.save(self.policy, self.counters, self.buffer, time.perf_counter() - self.wall_start, before)

    def close(self) -> None:
        try:
            self.ckpt.finish_quietly()
            self.metrics.close()
        finally:
            close_workers(self.evaluator.venv)

    def _updates_due(self, env_steps: int, n_sample: int) -> int:
        """Updates for ``env_steps`` new global env steps (``update_per_collect`` per ``n_sample``, exactly)."""
        c = self.counters
        c.update_credit += self.cfg.policy.learn.update_per_collect * env_steps
        due, c.update_credit = divmod(c.update_credit, n_sample)
        return due

    def _next_chunk(self, receiver: ExperienceReceiver, preempted: Preemption) -> Chunk | None:
        """The next chunk; a dead actor is named, and the run goes on without it or stops (``on_actor_death``).
        None when the actors went away after a stop signal reached this process (they got it too)."""
        while True:
            try:
                return receiver.next()
            except ActorLost as lost:
                if preempted.signal_name is not None:
                    return None
                if lost.rank < 0 or self.cfg.actor_learner.on_actor_death == "stop":
                    what = "no actor is left" if lost.rank < 0 else f"actor rank {lost.rank} died ({lost.why})"
                    raise DeadRankError(f"learner rank {self.rank}: {what}; stopping", [max(lost.rank, 0)]) from None
                logger.error(
                    "learner rank %d: actor rank %d died (%s); going on with actor(s) %s",
                    self.rank,
                    lost.rank,
                    lost.why,
                    lost.left,
                )

    # --- the loop ------------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        cfg, c, al = self.cfg, self.counters, self.cfg.actor_learner
        p = cfg.policy
        self.wall_start = wall_start = time.perf_counter()
        phases = Phases()  # where the time goes: result.json's phases_s
        steps_at_start = c.env_steps
        per_round = self.steps * self.plan.envs  # global env steps per round (every learner's actors)
        n_sample_global = p.collect.n_sample  # the run's total
        eval_freq, log_freq, ckpt_freq = p.eval.eval_freq, p.other.log_freq, p.other.checkpoint.freq
        learning_starts = p.learn.get("learning_starts", 0)
        logger.info(
            "%s: %s; %d global env steps per round, policy on %s, max lag %d (%s), exp dir %s",
            cfg.exp_name,
            self.roles.describe(),
            per_round,
            self.policy.device,
            al.max_lag,
            al.lag_mode,
            shown_path(self.exp.exp_dir),
        )
        groups = {a: self.groups.experience[a] for a in self.actors}
        receiver = ExperienceReceiver(self.layout, groups, al.queue, drop_when_full=al.lag_mode == "drop")
        all_actors = [self.roles.actor_rank(i) for i in range(self.roles.actors)]
        if self.roles.inference_rank is not None:  # it acts for the actors: it needs every version too
            all_actors.append(self.roles.inference_rank)
        publisher = WeightPublisher(self.policy, all_actors, self.groups.weights) if self.rank == 0 else None
        version, published_at = 0, self.policy.train_iter
        if publisher is not None:
            publisher.publish(version, self.policy.train_iter, c.env_steps)  # the actors' first weights
        self._interval, self._last_log = _Interval(), (time.perf_counter(), self.policy.train_iter, {})
        self.lag_max, self.dropped = 0, 0
        bar = progress_bar(self.exp.max_env_steps, desc="env steps", initial=c.env_steps)
        stopped_by, debug, finished = "max_env_steps", debug_enabled(), False
        with guarded(rank=self.rank, world=self.roles.learners, health_timeout=self.exp.health_timeout,
                     where=lambda: f"env step {c.env_steps}", newest=self.ckpt.newest,
                     close=lambda: (bar.close(), self.close()), group=self.learn_group), \
                Preemption(self.learn_group, world=self.roles.learners) as preempted:  # fmt: skip
            while self.exp.max_env_steps is None or c.env_steps < self.exp.max_env_steps:
                if self.threads is not None:
                    self.threads.tick()
                waited = time.perf_counter()
                with phases("wait_data"):
                    chunk = self._next_chunk(receiver, preempted)  # waits for data
                if chunk is None:  # stopped by a signal: the actors are gone
                    stopped_by = preempted.signal_name
                    break
                self._interval.wait_s += time.perf_counter() - waited
                self._interval.see(chunk)
                lag = version - chunk.version
                if lag > al.max_lag:  # never learn from data more than max_lag versions old
                    receiver.release(chunk)
                    self._interval.dropped += 1
                    continue
                self._interval.chunks += 1
                self._interval.lag_sum += lag
                self._interval.lag_max = max(self._interval.lag_max, lag)
                self._interval.depth_sum += chunk.queue_depth

                before, c.env_steps = c.env_steps, c.env_steps + per_round
                iters_before = self.policy.train_iter
                with phases("learn"):
                    if self.buffer is None:
                        rollout = {k: v.copy() for k, v in chunk.rollout.items()}
                        receiver.release(chunk)  # the actor's next chunk can come in while this one is learned
                        self.learner.train_rollout(rollout)
                    else:
                        self.buffer.extend(chunk.rollout, shard=chunk.actor)
                        receiver.release(chunk)
                        if c.env_steps >= learning_starts:
                            n_updates = self._updates_due(per_round, n_sample_global)
                            self.learner.train_replay(self.buffer, n_updates, self.plan.rank_batch)
                if self.policy.train_iter - published_at >= al.weight_sync_every:  # a new version for the actors
                    version, published_at = version + 1, self.policy.train_iter
                    if publisher is not None:
                        with phases("publish"):
                            publisher.publish(version, self.policy.train_iter, c.env_steps)
                if debug and self.policy.train_iter // DEBUG_CHECK_EVERY > iters_before // DEBUG_CHECK_EVERY:
                    consistency_check(self.policy, self.learn_group)

                def crossed(freq: int, before: int = before) -> bool:
                    return freq > 0 and c.env_steps // freq > before // freq

                due = False  # a timed checkpoint: decided at the log points, where the learners share their clocks
                if crossed(log_freq):
                    with phases("log"):
                        due = self.log_interval(wall_start, steps_at_start)
                elif self.roles.learners == 1 and not log_freq > 0:  # nothing to share: each round may decide
                    due = self.ckpt.due_by_time()
                with phases("eval"):
                    stop = crossed(eval_freq) and self.evaluate()
                if crossed(ckpt_freq) or due:
                    with phases("checkpoint"):
                        self.checkpoint()
                fps = (c.env_steps - steps_at_start) / max(time.perf_counter() - wall_start, 1e-9)
                last = f"{c.last_eval:.1f}" if c.last_eval is not None else "-"
                bar.set_postfix(fps=f"{fps:.0f}", eval=last, lag=self.lag_max, q=chunk.queue_depth, refresh=False)
                bar.update(per_round)  # the line it may print shows this round's evaluation
                if stop:
                    stopped_by = "stop_value"
                    break
                if preempted.requested():  # SIGTERM/SIGUSR1 on some learner: every learner stops after this round
                    stopped_by = preempted.signal_name or "preempted"
                    break

            # The end: the actors stop (learner rank 0 says so), the learners take their last chunks.
            if publisher is not None:
                publisher.publish(version, self.policy.train_iter, c.env_steps, stop=True)
            receiver.drain()
            if self._interval.chunks or self._interval.dropped:
                self.log_interval(wall_start, steps_at_start)
            if stopped_by in ("max_env_steps", "stop_value"):  # a preempted run saves its step without evaluating
                stopped_by = self.evaluate.at_end(stopped_by)
            end_progress(bar, stopped_by, c.last_eval)
            self.checkpoint()
            self.ckpt.finish()  # the last checkpoint is on disk before the result says the run ended
            wait = FINISH_TIMEOUT_S if preempted.signal_name is None else 2.0  # preempted: the actors got it too
            left = receiver.join(wait)
            if publisher is not None and not publisher.join(wait):
                logger.warning("the stop version did not reach every actor within %g s", wait)
            if left:
                logger.warning("actor(s) %s sent no last message within %g s", left, wait)
            finished = True
        return write_result(
            self.exp,
            self.policy,
            c,
            stopped_by,
            time.perf_counter() - wall_start,
            checkpoint=self.ckpt.written(),
            phases_s=phases.split(),
            **({"threads_s": self.threads.split()} if self.threads is not None else {}),
            actor_learner={
                "role": "learner",
                "learners": self.roles.learners,
                "actors": self.roles.actors,
                "versions": version,
                "lag_max": self.lag_max,
                "max_lag": al.max_lag,
                "dropped_chunks": self.dropped + receiver.dropped,
                "actors_lost": sorted(receiver.lost),
                "finished_cleanly": finished,
            },
        )

    # --- logging ------------------------------------------------------------------------------------
    def log_interval(self, wall_start: float, steps_at_start: int) -> bool:
        """One record (learner rank 0 writes it): episodes, training statistics, and the actor-learner view:
        env steps/s of each actor and in total, learner updates/s, policy lag (mean, max), chunks dropped,
        queue depth, and the waits, one set per role: ``wait/data_s`` (seconds a learner waited for experience,
        mean over learners), ``wait/weights_s`` and ``wait/learner_s`` (seconds an actor waited for weights and
        for its learner, mean over the actors heard from), and ``idle/learner``, ``idle/actor``: the fraction of
        the interval each role spent waiting. True when a timed checkpoint is due (any learner's clock says so)."""
        iv, now = self._interval, time.perf_counter()
        t_last, iters_last, seen_last = self._last_log
        rates: dict[str, float] = {}
        waits = {"wait/weights_s_sum": 0.0, "wait/learner_s_sum": 0.0, "idle/actor_sum": 0.0, "idle/actor_n": 0}
        for i in range(self.roles.actors):
            rank = self.roles.actor_rank(i)
            rates[f"actors/env_steps_per_s/rank{rank}"] = 0.0
            if rank in iv.actor:
                h, prev = iv.actor[rank], seen_last.get(rank)
                steps0, wall0 = (prev.env_steps, prev.wall_s) if prev else (0, 0.0)
                rates[f"actors/env_steps_per_s/rank{rank}"] = (h.env_steps - steps0) / max(h.wall_s - wall0, 1e-9)
                weights_s = h.wait_weights_s - (prev.wait_weights_s if prev else 0.0)
                learner_s = h.wait_send_s - (prev.wait_send_s if prev else 0.0)
                waits["wait/weights_s_sum"] += weights_s
                waits["wait/learner_s_sum"] += learner_s
                waits["idle/actor_sum"] += min(1.0, (weights_s + learner_s) / max(h.wall_s - wall0, 1e-9))
                waits["idle/actor_n"] += 1
        latest = {**seen_last, **iv.actor}  # each actor's newest header so far
        replay, priority_max = replay_values(self.buffer)  # Ape-X: replay size, priorities, sampled age
        if "train/epsilon" in self.policy.schedule_values(0):  # each actor's exploration (Ape-X: its ladder rung)
            for i in range(self.roles.actors):
                h = latest.get(self.roles.actor_rank(i))
                eps = h.epsilon if h is not None and math.isfinite(h.epsilon) else 0.0
                replay[f"actors/epsilon/rank{self.roles.actor_rank(i)}"] = eps  # 0 on the other learners
        sums = {
            "ckpt/due": float(self.ckpt.due_by_time()),
            "env/restarts": sum(h.env_restarts for h in latest.values()),  # the actors' recreated envs so far
            "episodes": iv.episodes,
            "ep_return_sum": iv.return_sum,
            "ep_length_sum": iv.length_sum,
            "lag/chunks": iv.chunks,
            "lag/dropped": iv.dropped,
            "lag/sum": iv.lag_sum,
            "queue/depth_sum": iv.depth_sum,
            **rates,
            **waits,
            **replay,
        }
        idle = min(1.0, iv.wait_s / max(now - t_last, 1e-9))
        means = {**self.learner.pop_stats(), "wait/data_s": iv.wait_s, "idle/learner": idle}
        means["learner/updates_per_s"] = (self.policy.train_iter - iters_last) / max(now - t_last, 1e-9)
        out = reduce_log(sums, means, group=self.learn_group)
        lag_max = torch.tensor([float(iv.lag_max), priority_max], device=comm_device(self.learn_group))
        allreduce(lag_max, op="max", group=self.learn_group)
        chunks = out.pop("lag/chunks")
        self.dropped += int(out["lag/dropped"])
        self.lag_max = max(self.lag_max, int(lag_max[0].item()))
        out["lag/mean"] = out.pop("lag/sum") / max(chunks, 1)
        out["lag/max"] = float(lag_max[0].item())
        if "replay/priority_sum" in out:
            out["replay/priority_max"] = float(lag_max[1].item())
        finish_replay_values(out)
        out["queue/depth"] = out.pop("queue/depth_sum") / max(chunks, 1)
        heard = max(out.pop("idle/actor_n"), 1)
        for key in ("wait/weights_s", "wait/learner_s", "idle/actor"):
            out[key] = out.pop(f"{key}_sum") / heard
        out["actors/env_steps_per_s"] = sum(v for k, v in out.items() if k.startswith("actors/env_steps_per_s/"))
        due = out.pop("ckpt/due") > 0
        self.metrics.record(self.metrics.common_values(out, wall_start, steps_at_start))
        self._last_log = (now, self.policy.train_iter, latest)
        self._interval = _Interval()
        return due
