"""Resume: which checkpoint a run continues from, and restoring it (policy, counters, RNGs, replay buffers).

Rank 0 picks one file and every rank loads that same file (no rank can see a different newest one). With
``resume=EXP_DIR`` it is the newest loadable checkpoint of ``EXP_DIR/ckpt``; in workers restarted by
torchrun (``TORCHELASTIC_RESTART_COUNT > 0``) the newest complete checkpoint of the run's own folder wins.

Example::

    class MyRun(ResumeMixin, ...):
        ...
        state = self._load_resume_state(resume)  # None: a fresh start
        if state is not None:
            self._restore(state)
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from ding_dist.comm import broadcast_object
from ding_dist.entry.counters import Counters
from ding_dist.utils import CheckpointError, CheckpointManager, load_checkpoint, restore_rng_state

__all__ = ["ResumeMixin"]

logger = logging.getLogger(__name__)


class ResumeMixin:
    """Choosing, loading and restoring the checkpoint a run continues from (part of ``RunSetup``)."""

    rank: int
    world: int
    restarts: int
    ckpt: CheckpointManager
    buffer: Any
    _resume_path: Path | None

    def rng_slot(self) -> tuple[int, int] | None:
        """``(index, count)``: this rank's entry among the RNG states a checkpoint holds and how many it holds
        when written by a run like this one; None when this rank restores no RNG state."""
        return self.rank, self.world

    def _replay_path(self, ckpt_dir: Path, previous: bool = False) -> Path:
        return ckpt_dir / f"replay_rank{self.rank}{'.prev' if previous else ''}.pt"

    def _choose_checkpoint(self, resume: str | os.PathLike | None) -> tuple[str | None, str | None]:
        """(checkpoint to continue from or None, error or None); rank 0 decides for everyone."""
        if self.restarts > 0:
            newest = self.ckpt.latest(move_aside=True)
            if newest is not None:
                logger.warning("restart %d: continuing from %s", self.restarts, newest)
                return str(newest), None
            if resume is None:
                logger.warning(
                    "restart %d: no complete checkpoint in %s, starting over", self.restarts, self.ckpt.directory
                )
                return None, None
        if resume is None:
            return None, None
        newest = CheckpointManager(Path(resume) / "ckpt").latest(move_aside=True)
        if newest is None:
            return None, f"resume={str(resume)!r}: no loadable checkpoint in {Path(resume) / 'ckpt'}"
        return str(newest), None

    def _load_resume_state(self, resume: str | os.PathLike | None) -> dict | None:
        # Rank 0 picks one file and every rank loads that same file (no rank can see a different newest).
        choice = self._choose_checkpoint(resume) if self.rank == 0 else None
        path, error = broadcast_object(choice)
        if error is not None:
            raise FileNotFoundError(error)
        self._resume_path = None if path is None else Path(path)
        if self._resume_path is None:
            return None
        state = load_checkpoint(self._resume_path)
        try:
            self.counters = Counters.from_state(state["counters"])
        except (KeyError, TypeError) as e:
            raise CheckpointError(
                f"checkpoint {path!r} has no training counters ({e!r}); not a pipeline checkpoint"
            ) from e
        return state

    def _restore(self, state: dict) -> None:
        try:
            self.policy.load_state_dict(state["policy"])
        except (KeyError, RuntimeError, ValueError, TypeError) as e:  # another policy, model size or optimizer
            why = " ".join(str(e).split()) or type(e).__name__
            why = why if len(why) <= 300 else why[:297] + "..."
            raise CheckpointError(
                f"checkpoint {str(self._resume_path)!r} does not fit this config's policy: {why}"
            ) from e
        slot = self.rng_slot()
        same_world = slot is not None and len(state["rng"]) == slot[1]
        if same_world:
            restore_rng_state(state["rng"][slot[0]])
        elif slot is not None:
            logger.warning(
                "checkpoint was written by %d ranks, running %d: RNGs and replay buffers start fresh",
                len(state["rng"]),
                slot[1],
            )
        if self.buffer is not None and same_world:
            self._restore_replay()
        logger.info("resumed at env step %d, train iter %d", self.counters.env_steps, self.policy.train_iter)

    def _restore_replay(self) -> None:
        """Load this rank's replay file of the checkpoint's env step (the newest file or the previous one)."""
        ckpt_dir = self._resume_path.parent
        found = []
        for path in (self._replay_path(ckpt_dir), self._replay_path(ckpt_dir, previous=True)):
            if not path.is_file():
                continue
            try:
                saved = load_checkpoint(path)
            except CheckpointError as e:
                logger.warning("skipping unusable replay buffer file: %s", e)
                continue
            if saved.get("env_steps") == self.counters.env_steps:
                self.buffer.load_state_dict(saved["buffer"])
                logger.info("replay buffer restored from %s (%d transitions)", path, len(self.buffer))
                return
            found.append(f"{path.name} (env step {saved.get('env_steps')})")
        if found or self.cfg.policy.other.replay_buffer.get("save_in_checkpoint", False):
            logger.warning(
                "no replay buffer file of env step %d in %s (found: %s): the buffer starts empty",
                self.counters.env_steps,
                ckpt_dir,
                ", ".join(found) or "none",
            )
