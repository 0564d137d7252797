"""The actor loop of an actor-learner run: step the envs with the newest weights, send chunks, repeat.

An actor never learns and never joins the learners' collectives. It waits for the learners' first weights,
then loops: take a free send buffer (waiting while all are in flight: the learner is behind), load the
newest complete weight version if a newer one arrived, collect one chunk, hand it to the experience channel
with its header (the weight version that collected it) and repeat. It stops when the learners' last weight
message says so, sends its last message and returns what it did. It composes only what it uses: its envs,
an acting-only policy, the two channels (weights in, experience out), and with an inference rank
(``actor_learner.inference=1``) a :class:`~ding_dist.worker.inference.RemotePolicy` that asks it for every step's
actions (a chunk then carries the oldest weight version that acted in it). Roles and groups:
:mod:`~ding_dist.entry.roles`; the learner: :mod:`~ding_dist.entry.loops.learner_loop`.

Example::

    result = ActorLoop(exp).run()   # on an actor rank of an Experiment with actor_learner.actors > 0
    result["versions"]  # the weight version of each chunk it sent, never decreasing
"""

from __future__ import annotations

import logging
import time
from typing import Any

from ding_dist.comm import DeadRankError, get_local_size, health_check, resolve_timeout
from ding_dist.config.split import split_plan
from ding_dist.entry.experiment import Experiment
from ding_dist.entry.factories import build_policy, env_manager
from ding_dist.entry.roles import RoleGroups, chunk_steps, role_threads
from ding_dist.entry.services.checkpointing import Checkpointing
from ding_dist.entry.services.failures import close_workers, stop_name
from ding_dist.entry.threads import cpu_cores, default_threads
from ding_dist.envs import make_vec_env
from ding_dist.policy.base import acting_only, policy_sync_group
from ding_dist.worker import Collector
from ding_dist.worker.experience import ChunkHeader, ExperienceSender, chunk_layout
from ding_dist.worker.inference import RemotePolicy
from ding_dist.worker.weight_sync import WeightSubscriber

__all__ = ["ActorLoop"]

logger = logging.getLogger(__name__)

#: Seconds an actor waits for its sends and for the learners' stop message at the end.
FINISH_TIMEOUT_S = 60.0


class ActorLoop:
    """One actor of an actor-learner run of an :class:`~ding_dist.entry.experiment.Experiment`."""

    def __init__(self, exp: Experiment) -> None:
        self.exp, self.rank, self.world = exp, exp.rank, exp.world
        self.roles = roles = exp.roles
        cfg = exp.cfg  # the run's totals
        plan = split_plan(cfg, roles.learners, "--learners")  # an actor steps its learner's share of them
        default_threads()
        health_check(exp.health_timeout)  # every rank came up (this also creates the side group of later checks)
        self.groups = RoleGroups.create(roles)  # every rank, same order
        self.learner_rank = roles.learner_of(self.rank)
        # A resumed run's actors need only its env step (fresh seed streams); their weights come from the learners.
        state, counters = Checkpointing(exp, rng_slot=None).load()
        seeds = exp.seeds(counters.env_steps if state else 0)
        # Each learner takes one chunk per round: an actor steps its learner's share of the training envs for
        # as many steps as one process would, so every env's rollout keeps its length with any number of learners.
        venv = make_vec_env(cfg.env, plan.rank_envs, env_manager(cfg),
                            training=True)  # fmt: skip
        try:
            # Actors never learn: no optimizer, no sync engine; their statistics stay within the actor group.
            # With an inference rank the actions come from there: this copy only shapes them (on the CPU).
            device = "cpu" if roles.inference else cfg.actor_learner.actor_device
            with policy_sync_group(self.groups.actors), acting_only():
                self.policy = build_policy(cfg, venv.single_observation_space, venv.single_action_space,
                                           device=device)  # fmt: skip
            if hasattr(self.policy, "set_actor_index"):  # e.g. DQN's Ape-X epsilon ladder
                self.policy.set_actor_index(self.rank - roles.learners, roles.actors)
            seeds.seed_process(self.rank)  # every actor explores with streams of its own
            self.remote = None
            if roles.inference_rank is not None:
                self.remote = RemotePolicy(self.policy, roles.inference_rank, venv.single_observation_space,
                                           self.groups.inference[self.rank])  # fmt: skip
            acting = self.policy if self.remote is None else self.remote
            self.collector = Collector(venv, acting, seeds.env_seeds("collector", self.rank, venv.num_envs))
            # more than one only for image observations, or as actor_learner.actor_threads says
            default_threads(self.policy.obs_space, **role_threads(cfg.actor_learner, roles, self.rank, cpu_cores(),
                                                                  get_local_size()))  # fmt: skip
        except BaseException:
            close_workers(venv)
            raise
        self.steps = chunk_steps(plan.rank_n_sample, plan.rank_envs)  # the learner's horizon
        self.layout = chunk_layout(self.policy, venv.single_observation_space, venv.num_envs, self.steps)

    # --- the loop ------------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        al = self.exp.cfg.actor_learner
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
                slot = sender.acquire(stop=weights.stop)  # waits while every buffer is in flight: learner behind
                wait_send += time.perf_counter() - waited
                if slot is None:
                    break
                if weights.poll():  # the newest complete version, if a newer one arrived
                    loaded_at = env_steps
                # Exploration schedules run on global env steps: the learners' count when this version was sent,
                # plus what all actors collected since (about this actor's share times the actors).
                global_steps = weights.env_steps + self.roles.actors * (env_steps - loaded_at)
                try:
                    rollout = self.collector.collect(self.steps, global_steps)
                except RuntimeError as e:
                    if self.remote is None:
                        raise
                    raise DeadRankError(f"actor rank {self.rank}: inference rank {self.remote.server} is gone: {e}",
                                        [self.remote.server]) from e  # fmt: skip
                version = weights.version if self.remote is None else self.remote.take_oldest_version()
                if "priority" in self.layout.fields:  # Ape-X: first priorities from this actor's networks
                    rollout["priority"] = self.policy.initial_priority(rollout)
                env_steps += self.steps * num_envs
                returns, lengths = self.collector.pop_episodes()
                header = ChunkHeader(
                    actor=self.rank,
                    seq=len(versions),
                    version=version,
                    env_steps=env_steps,
                    episodes=len(returns),
                    return_sum=sum(returns),
                    length_sum=sum(lengths),
                    wall_s=time.perf_counter() - wall_start,
                    wait_weights_s=wait_weights,
                    wait_send_s=wait_send,
                    env_restarts=self.collector.restarts,
                    epsilon=self.policy.schedule_values(global_steps).get("train/epsilon", float("nan")),
                )
                sender.send(slot, rollout, header)
                versions.append(version)
            if weights.error is not None:
                raise ConnectionError(f"receiving weights failed: {weights.error}")
            sender.finish(timeout=FINISH_TIMEOUT_S)  # the last message, after every queued chunk
        except ConnectionError as e:
            raise DeadRankError(
                f"actor rank {self.rank}: its learner (rank {self.learner_rank}) or learner rank 0 is gone: {e}",
                [],
            ) from e
        except BaseException as exc:  # SIGTERM (SystemExit) or Ctrl-C
            why = stop_name(exc) or type(exc).__name__
            logger.warning("actor rank %d stopping after %d env steps (%s)", self.rank, env_steps, why)
            raise
        finally:
            if self.remote is not None:
                self._stop_remote()
            close_workers(self.collector.venv)
        wall = time.perf_counter() - wall_start
        return {
            "role": "actor",
            "inference_rank": self.roles.inference_rank,
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
            "exp_dir": str(self.exp.exp_dir),
        }

    def _stop_remote(self) -> None:
        """Tell the inference rank this actor asks no more (it may be gone already: then there is no one to tell)."""
        try:
            self.remote.stop()
        except RuntimeError as e:
            logger.warning("actor rank %d: the inference rank did not take the stop message: %s", self.rank, e)
