"""Checkpoints of a run: a health check, each learning rank's replay file (if configured), then rank 0's
checkpoint file (policy, its type, counters, the run's ``max_env_steps``, every learning rank's RNG state),
written atomically; :func:`load_policy_state` loads one into a policy or says in one line why it cannot.

Example::

    run.checkpoint()  # on every rank that learns, at the same env step
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ding_dist.comm import allgather_object, debug_enabled, health_check
from ding_dist.utils import CheckpointError, capture_rng_state, save_checkpoint

__all__ = ["CheckpointMixin", "load_policy_state"]


def load_policy_state(policy: Any, state: Mapping[str, Any], path: str | os.PathLike, policy_type: str) -> None:
    """Load a checkpoint's policy state into ``policy`` (of type ``policy_type``), or raise ``CheckpointError``
    in one line: the checkpoint was trained by another policy type (stored since checkpoints record it), or
    its networks do not fit (another policy or network size, for older checkpoints too).

    Example::

        load_policy_state(policy, load_checkpoint(path), path, cfg.create_config.policy.type)
    """
    trained = state.get("policy_type")
    if trained is not None and trained != policy_type:
        raise CheckpointError(
            f"checkpoint {str(path)!r} was trained by policy {trained!r}, the config asks for {policy_type!r}"
        )
    try:
        policy.load_state_dict(state["policy"])
    except (KeyError, RuntimeError, ValueError, TypeError) as e:  # another policy, model size or optimizer
        trained = trained or _run_policy_type(path)  # older checkpoints: the type their run's config names
        if trained is not None and trained != policy_type:
            raise CheckpointError(
                f"checkpoint {str(path)!r} was trained by policy {trained!r} (its run's config), the config asks "
                f"for {policy_type!r}"
            ) from e
        why = " ".join(str(e).split()) or type(e).__name__
        why = why if len(why) <= 300 else why[:297] + "..."
        raise CheckpointError(
            f"checkpoint {str(path)!r} does not fit this config's policy {policy_type!r}: {why}"
        ) from e


def _run_policy_type(path: str | os.PathLike) -> str | None:
    """``create_config.policy.type`` of the saved config of the run a checkpoint file lies in, or None."""
    from ding_dist.config import read_config
    from ding_dist.entry.resume import find_run_config

    try:
        found = find_run_config(path)
        return None if found is None else read_config(found)[1].get("policy", {}).get("type")
    except Exception:  # no readable config: nothing to name
        return None


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
                "policy_type": self.cfg.create_config.policy.type,
                "max_env_steps": self.max_env_steps,
                "counters": {**c.state(), "wall_time_s": c.wall_time_s + self.segment_wall_time()},
                "rng": rng_states,
                **self.checkpoint_extra(),
            }
            self.ckpt.save(state, c.env_steps)
