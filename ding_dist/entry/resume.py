"""Resume: which checkpoint a run continues from, and restoring it (policy, counters, RNGs, replay buffers).

Rank 0 picks one file and every rank loads that same file (no rank can see a different newest one). With
``resume=EXP_DIR`` it is the newest loadable checkpoint of ``EXP_DIR/ckpt``; in workers restarted by
torchrun (``TORCHELASTIC_RESTART_COUNT > 0``) the newest complete checkpoint of the run's own folder wins.

The run's config: ``config.py`` is written at the start; a resume whose resolved config differs (another
CONFIG, ``--set``, ``--seed``) logs a unified diff and saves the new one as ``config_resume<N>.py``, never
over an older file. :func:`run_config` is the newest of them: the default CONFIG of resume and eval.

Example::

    class MyRun(ResumeMixin, ...):
        ...
        state = self._load_resume_state(resume)  # None: a fresh start
        if state is not None:
            self._restore(state)
"""

from __future__ import annotations

import difflib
import logging
import math
import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ding_dist.comm import broadcast_object
from ding_dist.config import save_config
from ding_dist.entry.checkpoints import load_policy_state
from ding_dist.entry.counters import Counters
from ding_dist.utils import CheckpointError, CheckpointManager, load_checkpoint, restore_rng_state

__all__ = ["ResumeMixin", "done_message", "find_run_config", "run_config", "save_run_config"]

logger = logging.getLogger(__name__)

CONFIG_FILE = "config.py"
_RESUME_CONFIG = re.compile(r"^config_resume(\d+)\.py$")


def _resume_configs(exp_dir: Path) -> list[tuple[int, Path]]:
    """``(N, path)`` of the run's ``config_resume<N>.py`` files, by N."""
    if not exp_dir.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in exp_dir.iterdir() if (m := _RESUME_CONFIG.match(p.name)) and p.is_file()]
    return sorted(found)


def run_config(exp_dir: str | os.PathLike) -> Path | None:
    """The config a run last trained with: its newest ``config_resume<N>.py``, else ``config.py``, else None.

    Example::

        run_config("runs/cartpole_dqn")  # Path("runs/cartpole_dqn/config.py") after one run
    """
    folder = Path(exp_dir)
    resumed = _resume_configs(folder)
    if resumed:
        return resumed[-1][1]
    return folder / CONFIG_FILE if (folder / CONFIG_FILE).is_file() else None


def find_run_config(ckpt: str | os.PathLike) -> Path | None:
    """:func:`run_config` of the run a checkpoint (file, ``ckpt/`` folder or run folder) belongs to, or None.

    Example::

        find_run_config("runs/cartpole_dqn/ckpt/ckpt_000040192.pt")  # runs/cartpole_dqn/config.py
    """
    p = Path(ckpt).resolve()
    start = p if p.is_dir() else p.parent
    for folder in (start, start.parent):
        found = run_config(folder)
        if found is not None:
            return found
    return None


def _config_text(cfg: Mapping) -> str:
    """The file :func:`~ding_dist.config.save_config` writes for ``cfg``."""
    with tempfile.TemporaryDirectory() as tmp:
        return save_config(cfg, Path(tmp) / CONFIG_FILE).read_text()


def _saved_text(path: Path) -> str:
    """The resolved config of a saved file as ``save_config`` writes it (the file's own text if it no longer
    compiles)."""
    from ding_dist.entry.experiment import load_config

    try:
        return _config_text(load_config(path))
    except Exception as e:  # e.g. written by an older ding_dist: compare the text as it is
        logger.info("%s does not compile any more (%s); comparing its text", path, e)
        return path.read_text()


def save_run_config(cfg: Mapping, exp_dir: str | os.PathLike, continuing: bool) -> Path | None:
    """Save the resolved config of a run (rank 0); return the file written, or None when nothing changed.

    A fresh run writes ``config.py``. A run that continues a checkpoint compares ``cfg`` with
    :func:`run_config`: the same config writes nothing; a different one is logged as a unified diff and
    saved as the next ``config_resume<N>.py`` (atomically), never over an older file.

    Example::

        save_run_config(cfg, "runs/cartpole_dqn", continuing=True)  # None: same config as config.py
    """
    folder = Path(exp_dir)
    saved = run_config(folder) if continuing else None
    if saved is None:
        return save_config(cfg, folder / CONFIG_FILE)
    old, new = _saved_text(saved), _config_text(cfg)
    if old == new:
        return None
    numbers = [n for n, _ in _resume_configs(folder)]
    path = folder / f"config_resume{(numbers[-1] if numbers else 0) + 1}.py"
    save_config(cfg, path)
    diff = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), fromfile=str(saved), tofile=str(path)
    )
    logger.warning(
        "resuming with another config than the run's %s; the new one is saved as %s:\n%s",
        saved.name,
        path.name,
        "".join(diff).rstrip("\n"),
    )
    return path


def done_message(
    exp_dir: str | os.PathLike, state: Mapping[str, Any], stop_value: float | None, max_env_steps: int | None
) -> str | None:
    """One line saying that the run a checkpoint ``state`` continues is already done, or None when it is not.

    Done: the checkpoint's last evaluation reached ``stop_value``, or its env steps reached ``max_env_steps``.

    Example::

        done_message("runs/x", load_checkpoint(path), stop_value=195, max_env_steps=None)
    """
    c = state.get("counters") or {}
    steps, last = c.get("env_steps", 0), c.get("last_eval")
    ret = "none" if last is None else f"{last:.2f}"
    where = f"run {str(exp_dir)!r} is already done at env step {steps} with eval return {ret}"
    solved = stop_value is not None and last is not None and math.isfinite(last) and last >= stop_value
    at_budget = max_env_steps is not None and steps >= max_env_steps
    if solved:  # advice that works as printed: the stop value must go, and the budget too if it was spent
        budget = f" and --max-env-steps above {steps}" if at_budget else ""
        return (
            f"{where} >= env.stop_value={stop_value:g}; to continue, give --set env.stop_value=None "
            f"(or a value above {ret}){budget}"
        )
    if at_budget:
        return f"{where}, at its --max-env-steps {max_env_steps}; to continue, give --max-env-steps above {steps}"
    return None


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
        load_policy_state(self.policy, state, self._resume_path, self.cfg.create_config.policy.type)
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
