"""Roles of an actor-learner run: which ranks learn, which only collect, and the groups that connect them.

A world of ``learners + actors (+ inference)`` processes (torchrun starts them like any other job): ranks
``0 .. learners-1`` are the learners, then the actors, then (``inference=1``) one inference rank. Actor ``i``
(rank ``learners + i``) sends its experience to learner ``i % learners`` and receives weights from learner
rank 0; with an inference rank, the actors' actions come from it (one forward pass for every actor's
observations, :mod:`~ding_dist.entry.loops.inference_loop`) and it receives the weights too. The groups, made with the
collective layer (:func:`ding_dist.comm.new_group`) on every rank in the same order:

- the learner group: the sync engine averages gradients within it (``Policy.sync_group``); with one
  learner it is a group of one and no gradient collective runs;
- the actor group: the actors' policies are built in it (they never learn, so it carries nothing but the
  initial broadcast of the engine);
- one gloo pair group per actor (the actor and its learner) that carries the actor's experience, one per
  actor with the inference rank (observations in, actions out) when there is one, and one gloo group of
  everyone for the weights (learner 0 -> actors and the inference rank): point-to-point messages on CPU tensors,
  so CUDA learners (NCCL among themselves, e.g. ``DING_DIST_BACKEND=cpu:gloo,cuda:nccl``) and CPU actors
  exchange them correctly.

Config keys (section ``actor_learner``): declared once, with their defaults, meanings and rules, in
:data:`ding_dist.config.sections.ACTOR_LEARNER_KEYS` (``ding-dist config show``, docs/actor_learner.md);
``ding-dist train --actors N --learners M`` sets the first two. ``learner_threads="auto"``: ``OMP_NUM_THREADS`` when
you set it, else for a convolutional network the cores its host's actors leave, at least 2 for one learner
(:func:`role_threads`); for large updates on vectors (Hopper SAC's) up to those cores while the actors leave them
idle (:class:`~ding_dist.entry.threads.ThreadGovernor`); else 1.

Example::

    roles = Roles.from_config({"actors": 2, "learners": 1}, world_size=3)
    roles.learner_of(2), roles.actors_of(0)  # (0, [1, 2])
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ding_dist.comm import new_group

__all__ = [
    "RoleGroups",
    "Roles",
    "chunk_steps",
    "role_threads",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Roles:
    """Which rank does what in an actor-learner world (learners first, then actors, then the inference rank)."""

    learners: int
    actors: int
    inference: int = 0

    @classmethod
    def from_config(cls, al: Mapping[str, Any], world_size: int) -> Roles | None:
        """The roles the ``actor_learner`` section asks for, or None for the data-parallel mode.

        Raises ``ValueError`` when the world does not have ``actors + learners`` processes.
        """
        actors, learners = int(al.get("actors", 0)), int(al.get("learners", 1))
        inference = int(al.get("inference", 0))
        if actors == 0:
            return None
        roles = cls(learners, actors, inference)
        if world_size != roles.world_size:
            plus = " + actor_learner.inference=1" if inference else ""
            raise ValueError(
                f"actor_learner.actors={actors} + actor_learner.learners={learners}{plus} needs a world of "
                f"{roles.world_size} processes, this one has {world_size} (start it with "
                f"'ding-dist train CONFIG --actors {actors} --learners {learners}', or torchrun "
                f"--nproc-per-node {roles.world_size})"
            )
        return roles

    @property
    def world_size(self) -> int:
        return self.learners + self.actors + self.inference

    @property
    def inference_rank(self) -> int | None:
        """The inference rank (the last one), or None when the actors act themselves."""
        return self.learners + self.actors if self.inference else None

    def is_learner(self, rank: int) -> bool:
        return rank < self.learners

    def is_inference(self, rank: int) -> bool:
        return rank == self.inference_rank

    def actor_index(self, rank: int) -> int:
        """0 for the first actor rank (rank ``learners``), 1 for the next, ..."""
        if self.is_learner(rank) or self.is_inference(rank):
            raise ValueError(f"rank {rank} is a {'learner' if self.is_learner(rank) else 'inference rank'}, "
                             "not an actor")  # fmt: skip
        return rank - self.learners

    def actor_rank(self, index: int) -> int:
        return self.learners + index

    def learner_of(self, actor_rank: int) -> int:
        """The learner rank that receives this actor's experience."""
        return self.actor_index(actor_rank) % self.learners

    def actors_of(self, learner_rank: int) -> list[int]:
        """The actor ranks whose experience this learner receives."""
        return [r for r in range(self.learners, self.learners + self.actors) if self.learner_of(r) == learner_rank]

    def describe(self) -> str:
        both = f"{self.learners} learner(s) (ranks 0-{self.learners - 1}) and {self.actors} actor(s)"
        return both if not self.inference else f"{both}, acting through inference rank {self.inference_rank}"


@dataclass
class RoleGroups:
    """The groups of an actor-learner world; :meth:`create` runs on every rank, in the same order."""

    learners: Any  # learner group (non-member placeholder on actors)
    actors: Any  # actor group (non-member placeholder on learners)
    weights: Any  # gloo group of every rank: learner 0 -> actors (and the inference rank)
    experience: dict[int, Any]  # actor rank -> gloo group {its learner, the actor}
    inference: dict[int, Any]  # actor rank -> gloo group {the inference rank, the actor}; empty without one
    server: Any = None  # the inference rank's group of one (its policy's sync group); None without one

    @classmethod
    def create(cls, roles: Roles) -> RoleGroups:
        learners = new_group(list(range(roles.learners)))
        actors = new_group([roles.actor_rank(i) for i in range(roles.actors)])
        weights = new_group(list(range(roles.world_size)), backend="gloo")
        experience, inference, server = {}, {}, None
        for i in range(roles.actors):
            rank = roles.actor_rank(i)
            experience[rank] = new_group([roles.learner_of(rank), rank], backend="gloo")
        if roles.inference_rank is not None:
            server = new_group([roles.inference_rank])
            for i in range(roles.actors):
                rank = roles.actor_rank(i)
                inference[rank] = new_group([roles.inference_rank, rank], backend="gloo")
        return cls(learners, actors, weights, experience, inference, server)


def chunk_steps(n_sample: int, num_envs: int) -> int:
    """Vector steps per chunk: the rollout horizon ``collect.n_sample / env.collector_env_num`` (rounded up to whole
    vector steps), the same for any number of learners (pass both totals, or both one learner's share: a
    :class:`~ding_dist.utils.plan.Plan`'s ``rank_n_sample`` and ``rank_envs``).

    Example::

        chunk_steps(256, num_envs=8)  # 32 vector steps: 256 env steps per round with one learner
    """
    return max(1, -(-int(n_sample) // int(num_envs)))


def role_threads(al: Mapping[str, Any], roles: Roles, rank: int, cores: int, local_world: int) -> dict[str, int | None]:
    """The threads arguments of :func:`~ding_dist.entry.threads.default_threads` for actor-learner ``rank``:
    ``threads``, ``actor_learner.learner_threads`` / ``actor_threads`` when set to a number (it wins over
    ``OMP_NUM_THREADS``), and ``image_threads``, what ``"auto"`` gives a convolutional network: an actor
    (or the inference rank) 1, a learner the ``cores`` its host's actors and inference rank leave (each
    ``actor_threads``, 1 for ``"auto"``), shared by the host's learners; a lone learner left fewer than 2 takes 2
    (the second shared with the actors, which wait for it part of the time). On a multi-host run
    (``local_world < roles.world_size``) an ``"auto"`` learner keeps the plain rule (``image_threads`` None: the
    cores shared by the host's processes).

    Example::

        role_threads({}, Roles(learners=1, actors=1), rank=0, cores=8, local_world=2)
        # {'threads': None, 'image_threads': 7}
    """
    key = "learner_threads" if roles.is_learner(rank) else "actor_threads"
    value = al.get(key, "auto")
    threads = None if value == "auto" else int(value)
    if not roles.is_learner(rank):
        return {"threads": threads, "image_threads": 1}
    if local_world != roles.world_size:
        return {"threads": threads, "image_threads": None}
    per_actor = al.get("actor_threads", "auto")
    per_actor = 1 if per_actor == "auto" else int(per_actor)
    others = (roles.actors + roles.inference) * per_actor  # the inference rank takes an actor's threads
    free = max(1, (cores - others) // roles.learners)
    if free < 2 and roles.learners == 1:  # a lone learner left one core shares a second with the actors
        free = min(2, cores)  # (they wait for it part of the time: Pong 1 + 1 on 2 cores 0.76x -> 0.81x, 90 % busy)
    return {"threads": threads, "image_threads": free}
