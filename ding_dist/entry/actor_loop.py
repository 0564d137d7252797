"""The actor loop of an actor-learner run: step the envs with the newest weights, send chunks, repeat.

An actor never learns and never joins the learners' collectives. It waits for the learners' first weights,
then loops: take a free send buffer (waiting while all are in flight: the learner is behind), load the
newest complete weight version if a newer one arrived, collect one chunk, tag it with that version and
send it. It stops when the learners' last weight message says so, sends its last message and returns
what it did. Roles and groups: :mod:`~ding_dist.entry.roles`; the learner: :mod:`~ding_dist.entry.learner_loop`.

Example::

    result = ActorRun(config, on_policy=True, seed=0, overrides=["actor_learner.actors=2"], exp_dir=...,
                      max_env_steps=None, resume=None).run()   # on an actor rank
    result["versions"]  # the weight version of each chunk it sent, never decreasing
"""

from __future__ import annotations

import logging
import time
from typing import Any

import torch
from easydict import EasyDict

from ding_dist.comm import DeadRankError, resolve_timeout
from ding_dist.entry.experiment import build_policy, env_manager
from ding_dist.entry.failures import EXIT_SIGTERM
from ding_dist.entry.roles import RoleGroups, Roles, actor_envs, chunk_steps
from ding_dist.entry.run_setup import RunSetup
from ding_dist.envs import make_vec_env
from ding_dist.policy.base import acting_only, policy_sync_group
from ding_dist.worker import Collector
from ding_dist.worker.experience import (
    ACTOR,
    ENV_STEPS,
    EPISODES,
    LENGTH_SUM,
    RETURN_SUM,
    SEQ,
    VERSION,
    WAIT_SEND_S,
    WAIT_WEIGHTS_S,
    WALL_S,
    ExperienceSender,
    chunk_layout,
)
from ding_dist.worker.weight_sync import WeightSubscriber

__all__ = ["ActorRun"]

logger = logging.getLogger(__name__)

#: Seconds an actor waits for its sends and for the learners' stop message at the end.
FINISH_TIMEOUT_S = 60.0


class ActorRun(RunSetup):
    """One actor of an actor-learner run (setup from :class:`RunSetup`, the loop in :meth:`run`)."""

    @property
    def writes_metrics(self) -> bool:
        return False  # the learners log what the actors did

    def split_sizes(self, global_cfg: EasyDict) -> EasyDict:
        return global_cfg  # an actor's chunk size follows from the learners' share (chunk_steps)

    def rng_slot(self) -> tuple[int, int] | None:
        return None  # actors need nothing from a checkpoint but the step count (their weights come from learners)

    def build(self, state: dict | None) -> None:
        cfg = self.cfg
        self.roles = Roles.from_config(cfg.actor_learner, self.world)
        self.groups = RoleGroups.create(self.roles)  # every rank, same order
        self.learner_rank = self.roles.learner_of(self.rank)
        # Each learner takes one chunk per round: an actor steps its learner's share of the training envs for
        # as many steps as one process would, so every env's rollout keeps its length with any number of learners.
        num_envs = actor_envs(cfg.env.collector_env_num, self.roles.learners)
        venv = make_vec_env(cfg.env, num_envs, env_manager(cfg), training=True)
        try:
            # Actors never learn: no optimizer, no sync engine; their statistics stay within the actor group.
            with policy_sync_group(self.groups.actors), acting_only():
                self.policy = build_policy(cfg, venv.single_observation_space, venv.single_action_space,
                                           device=cfg.actor_learner.actor_device)  # fmt: skip
        except BaseException:
            venv.close()
            raise
        self.seeds.seed_process(self.rank)  # every actor explores with streams of its own
        self.collector = Collector(venv, self.policy, self.seeds.env_seeds("collector", self.rank, venv.num_envs))
        self.steps = chunk_steps(cfg.policy.collect.n_sample, cfg.env.collector_env_num)
        self.layout = chunk_layout(self.policy, venv.single_observation_space, venv.num_envs, self.steps)

    # --- the loop ------------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        al = self.cfg.actor_learner
        num_envs = self.collector.num_envs
        wall_start = time.perf_counter()
        logger.info(
            "actor rank %d: %d envs, chunks of %d env steps to learner rank %d, policy on %s",
            self.rank,
            num_envs,
            self.steps * num_envs,
            self.learner_rank,
            self.policy.device,
        )
        weights = WeightSubscriber(self.policy, source=0, group=self.groups.weights)
        sender = ExperienceSender(self.layout, self.learner_rank, self.groups.experience[self.rank], al.actor_buffers)
        env_steps, versions, wait_send, loaded_at = 0, [], 0.0, 0
        try:
            wait_weights = weights.wait_first(timeout=resolve_timeout())  # the learners' initial weights
            while not weights.stop.is_set():
                waited = time.perf_counter()
                got = sender.acquire(stop=weights.stop)  # waits while every buffer is in flight: learner behind
                wait_send += time.perf_counter() - waited
                if got is None:
                    break
                slot, fields = got
                if weights.poll():  # the newest complete version, if a newer one arrived
                    loaded_at = env_steps
                # Exploration schedules run on global env steps: the learners' count when this version was sent,
                # plus what all actors collected since (about this actor's share times the actors).
                global_steps = weights.env_steps + self.roles.actors * (env_steps - loaded_at)
                rollout = self.collector.collect(self.steps, global_steps)
                env_steps += self.steps * num_envs
                returns, lengths = self.collector.pop_episodes()
                for name, value in rollout.items():
                    fields[name].copy_(torch.from_numpy(value))
                meta, stats = fields["meta"], fields["stats"]
                meta[ACTOR], meta[SEQ], meta[VERSION] = self.rank, len(versions), weights.version
                meta[ENV_STEPS], meta[EPISODES] = env_steps, len(returns)
                stats[RETURN_SUM], stats[LENGTH_SUM] = sum(returns), sum(lengths)
                stats[WALL_S] = time.perf_counter() - wall_start
                stats[WAIT_WEIGHTS_S], stats[WAIT_SEND_S] = wait_weights, wait_send
                sender.send(slot)
                versions.append(weights.version)
            if weights.error is not None:
                raise ConnectionError(f"receiving weights failed: {weights.error}")
            sender.finish(timeout=FINISH_TIMEOUT_S)  # the last message, after every queued chunk
        except ConnectionError as e:
            raise DeadRankError(
                f"actor rank {self.rank}: its learner (rank {self.learner_rank}) or learner rank 0 is gone: {e}",
                [],
            ) from e
        except BaseException as exc:  # SIGTERM (SystemExit) or Ctrl-C
            why = "SIGTERM" if isinstance(exc, SystemExit) and exc.code == EXIT_SIGTERM else type(exc).__name__
            logger.warning("actor rank %d stopping after %d env steps (%s)", self.rank, env_steps, why)
            raise
        finally:
            self.close()
        wall = time.perf_counter() - wall_start
        return {
            "role": "actor",
            "rank": self.rank,
            "env_steps": env_steps,
            "chunks": len(versions),
            "chunk_shape": [self.steps, num_envs],  # [vector steps, envs]: the rollout horizon, the learner's envs
            "versions": versions,
            "versions_received": weights.received,
            "env_steps_per_s": env_steps / max(wall, 1e-9),
            "wait_weights_s": wait_weights,
            "wait_learner_s": wait_send,
            "wall_time_s": wall,
            "world_size": self.world,
            "exp_dir": str(self.exp_dir),
        }
