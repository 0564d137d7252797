"""Checkpoints of a run: a health check, each learning rank's replay file (if configured), then rank 0's
checkpoint file (policy, counters, every learning rank's RNG state), written atomically.

Example::

    run.checkpoint()  # on every rank that learns, at the same env step
"""

from __future__ import annotations

import os
from typing import Any

from ding_dist.comm import allgather_object, debug_enabled, health_check
from ding_dist.utils import capture_rng_state, save_checkpoint

__all__ = ["CheckpointMixin"]


class CheckpointMixin:
    """Writing checkpoints (part of ``RunSetup``); ``learn_group`` is the group of the ranks that learn."""

    learn_group: Any

    def checkpoint_extra(self) -> dict[str, Any]:
        """Mode-specific entries of the checkpoint file (e.g. the roles of an actor-learner run)."""
        return {"world_size": self.world}

    def checkpoint(self) -> None:
        """Health check, then each rank's replay file (if configured), then rank 0's checkpoint file.

        The RNG allgather sits between the two, so it doubles as a barrier: when ``ckpt_<step>.pt`` exists,
        every rank's replay file of that step is complete. A rank keeps its previous replay file as
        ``replay_rank<r>.prev.pt`` until the new one is written, so a crash in between still leaves the
        replay file that matches the newest complete checkpoint.
        """
        health_check(self.health_timeout, group=self.learn_group)
        if debug_enabled():
            self.check_consistency()
        rng = capture_rng_state()
        c = self.counters
        if self.buffer is not None and self.cfg.policy.other.replay_buffer.get("save_in_checkpoint", False):
            current = self._replay_path(self.ckpt.directory)
            if current.is_file() and self._replay_saved_at != c.env_steps:  # a second save of a step replaces
                os.replace(current, self._replay_path(self.ckpt.directory, previous=True))
            save_checkpoint({"env_steps": c.env_steps, "buffer": self.buffer.state_dict()}, current)
            self._replay_saved_at = c.env_steps
        rng_states = allgather_object(rng, group=self.learn_group)  # every rank's RNG, so resume restores each
        if self.rank == 0:
            state = {
                "policy": self.policy.state_dict(),
                "counters": c.state(),
                "rng": rng_states,
                **self.checkpoint_extra(),
            }
            self.ckpt.save(state, c.env_steps)
