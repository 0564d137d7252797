"""The inference rank of an actor-learner run (``actor_learner.inference=1``): act for every actor in one batch.

The layout SEED RL and Sample Factory use with a GPU: the actors only step their envs; each step they send their
observations to this rank, which runs one forward pass over all of them (on ``actor_learner.actor_device``) and
sends each actor its actions and the policy's extras, with the weight version that acted. Before each batch it
loads the newest weights learner rank 0 sent (the same messages the actors get). It stops when every actor has
stopped (they stop when the learners say so) or is gone, and writes what it served to ``<exp_dir>/inference.json``
(batches, requests, rows, rows per batch, actors lost). The serving itself:
:class:`~ding_dist.worker.inference.InferenceServer`; the actors' side: :mod:`~ding_dist.entry.loops.actor`.

On a CPU it saves no arithmetic and adds a round trip per env step, so it is off by default (measured in
docs/results/actors_and_learners.md).

Example::

    result = InferenceLoop(exp).run()   # on the last rank of an Experiment with actor_learner.inference=1
    result["rows"]  # observations served: every env step of every actor
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from ding_dist.comm import health_check, resolve_timeout
from ding_dist.config.split import split_plan
from ding_dist.entry.experiment import Experiment
from ding_dist.entry.factories import build_policy
from ding_dist.entry.roles import RoleGroups
from ding_dist.entry.services.checkpointing import Checkpointing
from ding_dist.entry.threads import default_threads
from ding_dist.envs import make_vec_env
from ding_dist.policy.base import acting_only, policy_sync_group
from ding_dist.utils.fileio import atomic_write_text
from ding_dist.worker.inference import InferenceServer
from ding_dist.worker.weight_sync import WeightSubscriber

__all__ = ["InferenceLoop"]

logger = logging.getLogger(__name__)


class InferenceLoop:
    """The inference rank of an actor-learner run of an :class:`~ding_dist.entry.experiment.Experiment`."""

    def __init__(self, exp: Experiment) -> None:
        self.exp, self.rank, self.roles = exp, exp.rank, exp.roles
        cfg = exp.cfg
        default_threads()
        health_check(exp.health_timeout)  # every rank came up (this also creates the side group of later checks)
        self.groups = RoleGroups.create(self.roles)  # every rank, same order
        Checkpointing(exp, rng_slot=None).load()  # every rank takes part in choosing; its weights come from rank 0
        probe = make_vec_env(cfg.env, 1, "sync")  # the spaces the actors' envs have
        obs_space, act_space = probe.single_observation_space, probe.single_action_space
        probe.close()
        with policy_sync_group(self.groups.server), acting_only():
            self.policy = build_policy(cfg, obs_space, act_space, device=cfg.actor_learner.actor_device)
        self.actors = [self.roles.actor_rank(i) for i in range(self.roles.actors)]
        rows = split_plan(cfg, self.roles.learners, "--learners").rank_envs  # an actor's envs: its largest request
        self.server = InferenceServer(self.policy, self.actors, obs_space, rows, self.groups.inference)

    def run(self) -> dict[str, Any]:
        start = time.perf_counter()
        logger.info("inference rank %d: acting for actors %s, policy on %s", self.rank, self.actors, self.policy.device)
        weights = WeightSubscriber(self.policy, source=0, group=self.groups.weights)
        wait_weights = weights.wait_first(timeout=resolve_timeout())

        def newest() -> int:
            weights.poll()
            return weights.version

        stats = self.server.serve(poll=newest)
        wall = time.perf_counter() - start
        result = {
            "role": "inference",
            "rank": self.rank,
            **stats,
            "rows_per_batch": stats["rows"] / max(stats["batches"], 1),
            "versions_received": weights.received,
            "wait_weights_s": wait_weights,
            "wall_time_s": wall,
            "world_size": self.exp.world,
            "exp_dir": str(self.exp.exp_dir),
        }
        atomic_write_text(self.exp.exp_dir / "inference.json", json.dumps(result, indent=1) + "\n")
        logger.info("inference rank %d: %d batches, %.1f rows each", self.rank, stats["batches"],
                    result["rows_per_batch"])  # fmt: skip
        return result
