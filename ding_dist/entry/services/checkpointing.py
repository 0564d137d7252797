"""Checkpoints of a run and resuming from them, for the ranks that learn.

Saving: a health check, each learning rank's replay file (if configured), then rank 0's checkpoint file (policy,
its type, counters, the run's ``max_env_steps``, every learning rank's RNG state, the world it came from),
written atomically from a snapshot by a background thread (:mod:`~ding_dist.utils.background_save`), so the loop
goes on while the file is written. When: every ``policy.other.checkpoint.freq`` global env steps (0: off), every
``policy.other.checkpoint.every_minutes`` of wall time (0: off; :meth:`Checkpointing.due_by_time` is each rank's
view, which the loops share at their log points) and at the end. An evaluation that beats the best return so far
writes ``ckpt/best.pt`` (:meth:`Checkpointing.save_best`, rank 0): the policy of that evaluation, which rotation
never removes and ``ding-dist eval --ckpt RUN`` loads by default.

Resuming: rank 0 picks one file and every rank loads that same file (no rank can see a
different newest one). With ``resume=EXP_DIR`` it is the newest loadable checkpoint of ``EXP_DIR/ckpt``; in
workers restarted by torchrun (``TORCHELASTIC_RESTART_COUNT > 0``), and in a torchrun job that re-formed at
another size (an elastic node joined or left: the folder's run is this job's, ``Experiment.rejoined``), the newest
complete checkpoint of the run's own folder wins, re-sharded over the new world. :func:`load_policy_state` loads
one into a policy or says in one line why it cannot.

Example::

    ckpt = Checkpointing(exp, rng_slot=(rank, world))
    state = ckpt.load()                       # None: a fresh start
    ... build the policy ...
    if state is not None:
        ckpt.restore(state, policy, buffer)
    ckpt.save(policy, counters, buffer)       # on every rank that learns, at the same env step
    ckpt.finish()                             # the file in flight is on disk
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ding_dist.comm import allgather_object, broadcast_object, get_global_rank, health_check
from ding_dist.data.reshard import regroup_states, reshard_states
from ding_dist.entry.experiment import Experiment
from ding_dist.entry.services.counters import Counters
from ding_dist.entry.services.run_folder import find_run_config
from ding_dist.utils import (
    CheckpointError,
    CheckpointManager,
    capture_rng_state,
    check_finite_weights,
    load_checkpoint,
    restore_rng_state,
    save_checkpoint,
)
from ding_dist.utils.background_save import BackgroundWriter

__all__ = ["BEST_FILE", "Checkpointing", "load_policy_state"]

#: The best checkpoint's name in a run's ``ckpt/`` folder: the policy of the best evaluation so far.
BEST_FILE = "best.pt"

logger = logging.getLogger(__name__)


def load_policy_state(policy: Any, state: Mapping[str, Any], path: str | os.PathLike, policy_type: str) -> None:
    """Load a checkpoint's policy state into ``policy`` (of type ``policy_type``), or raise ``CheckpointError``
    in one line: the checkpoint was trained by another policy type (stored since checkpoints record it), its
    weights hold a NaN or inf, or its networks do not fit (another policy or network size, for older checkpoints
    too).

    Example::

        load_policy_state(policy, load_checkpoint(path), path, cfg.create_config.policy.type)
    """
    trained = state.get("policy_type")
    if trained is not None and trained != policy_type:
        raise CheckpointError(
            f"checkpoint {str(path)!r} was trained by policy {trained!r}, the config asks for {policy_type!r}"
        )
    check_finite_weights(state, path)
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

    try:
        found = find_run_config(path)
        return None if found is None else read_config(found)[1].get("policy", {}).get("type")
    except Exception:  # no readable config: nothing to name
        return None


def _best_return(path: Path) -> float:
    """The best evaluation return a ``best.pt`` records (-inf when there is none or it does not load)."""
    if not path.is_file():
        return -math.inf
    try:
        value = load_checkpoint(path)["counters"]["best_eval"]
        return float(value)
    except (CheckpointError, KeyError, TypeError, ValueError) as e:
        logger.warning("%s is not a usable best checkpoint (%s): the next best evaluation replaces it", path, e)
        return -math.inf


class Checkpointing:
    """A run's checkpoints: choosing and loading the one it resumes from, restoring it, saving new ones.

    ``rng_slot`` is ``(index, count)``: this rank's entry among the RNG states a checkpoint holds and how many a
    run like this one writes (None: this rank restores no RNG state, e.g. an actor). ``group`` holds the ranks
    that learn (health checks and the RNG allgather run in it); ``choose_group`` the ranks that agree on the file
    to resume from (default: the world; its first rank chooses); ``extra`` goes into every checkpoint file.
    """

    def __init__(
        self,
        exp: Experiment,
        *,
        rng_slot: tuple[int, int] | None,
        group: Any = None,
        choose_group: Any = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        self.exp, self.rng_slot, self.group, self.choose_group = exp, rng_slot, group, choose_group
        self.extra = dict(extra or {})
        settings = exp.cfg.policy.other.checkpoint
        self.manager = CheckpointManager(exp.exp_dir / "ckpt", keep_last=settings.keep_last)
        self.path: Path | None = None  # the checkpoint this segment continues from
        self._replay_saved_at: int | None = None
        self.every_s = 60.0 * float(settings.get("every_minutes", 0) or 0)  # 0: no timed checkpoints
        self._saved_at = time.monotonic()  # the segment's start counts as the last save
        self.writer = BackgroundWriter()
        self._last: Path | None = None  # the newest checkpoint this segment wrote (rank 0; every rank knows its name)
        self._best_asked = False  # an evaluation of this segment beat the best so far (every rank knows)
        self._best_on_disk: float | None = None  # rank 0: the return of the folder's best.pt (read once)

    # --- resuming -------------------------------------------------------------------------------------
    def _choose(self) -> tuple[str | None, str | None]:
        """(checkpoint to continue from or None, error or None); rank 0 decides for everyone."""
        exp = self.exp
        if exp.continues:
            how = f"restart {exp.restarts}" if exp.restarts else f"job re-formed with {exp.world} process(es)"
            newest = self.manager.latest(move_aside=True)
            if newest is not None:
                logger.warning("%s: continuing from %s", how, newest)
                return str(newest), None
            if exp.resume is None:
                logger.warning("%s: no complete checkpoint in %s, starting over", how,
                               self.manager.directory)  # fmt: skip
                return None, None
        if exp.resume is None:
            return None, None
        newest = CheckpointManager(exp.resume / "ckpt").latest(move_aside=True)
        if newest is None:
            return None, f"resume={str(exp.resume)!r}: no loadable checkpoint in {exp.resume / 'ckpt'}"
        return str(newest), None

    def load(self) -> tuple[dict | None, Counters]:
        """The checkpoint this segment continues from and its counters (``(None, Counters())``: a fresh start).
        Raises ``FileNotFoundError`` (resume without a checkpoint) or ``CheckpointError`` (not a run's)."""
        choice = self._choose() if self.exp.rank == 0 else None
        path, error = broadcast_object(choice, src=get_global_rank(self.choose_group, 0), group=self.choose_group)
        if error is not None:
            raise FileNotFoundError(error)
        if path is None:
            return None, Counters()
        self.path = Path(path)
        state = load_checkpoint(self.path)
        try:
            counters = Counters.from_state(state["counters"])
        except (KeyError, TypeError) as e:
            raise CheckpointError(
                f"checkpoint {path!r} has no training counters ({e!r}); not a pipeline checkpoint"
            ) from e
        return state, counters

    def restore(self, state: dict, policy: Any, buffer: Any, counters: Counters) -> None:
        """The policy, this rank's RNG state and replay buffer from ``state``. A checkpoint of another world size
        keeps the policy, counters and schedules; RNG streams start afresh (this segment's seeds), and a
        data-parallel run's replay is re-sharded over the new ranks (:mod:`ding_dist.data.reshard`): every stored
        transition kept, none duplicated. A checkpoint of the other mode (data-parallel <-> actors and learners)
        or of another split of actors and learners has its replay regrouped over the new buffers (every learning
        rank's, or each learner's one shard per actor): every transition kept, the cuts marked truncated."""
        load_policy_state(policy, state, self.path, self.exp.policy_type)
        slot = self.rng_slot
        old_world = len(state["rng"])
        same_world = slot is not None and old_world == slot[1]
        roles = self.exp.roles
        same_roles = state.get("roles") == (None if roles is None else {"learners": roles.learners,
                                                                         "actors": roles.actors})  # fmt: skip
        if same_world:
            restore_rng_state(state["rng"][slot[0]])
        elif slot is not None:
            logger.warning("checkpoint was written by %d rank(s), running %d: RNG streams start afresh", old_world,
                           slot[1])  # fmt: skip
        if buffer is not None and same_world and same_roles:
            found = self._replay_state(self.exp.rank, counters.env_steps)
            if found is not None:
                buffer.load_state_dict(found[1])
                for b in buffer.shards.values() if hasattr(buffer, "shards") else [buffer]:
                    storage = getattr(b, "storage", b)  # a prioritized buffer wraps its storage
                    if hasattr(storage, "cut_streams"):  # the envs start new episodes: no n-step return crosses
                        storage.cut_streams()
                logger.info("replay buffer restored from %s (%d transitions)", found[0], len(buffer))
        elif buffer is not None and slot is not None and same_roles:
            self._reshard_replay(buffer, state, old_world, slot[1], counters.env_steps)
        elif buffer is not None and slot is not None:
            self._regroup_replay(buffer, state, old_world, counters.env_steps)
        logger.info("resumed at env step %d, train iter %d", counters.env_steps, policy.train_iter)

    def _regroup_replay(self, buffer: Any, state: dict, old_world: int, env_steps: int) -> None:
        """Between the modes (data-parallel <-> actors and learners) or at another split of actors and learners:
        every old buffer's slots, oldest first, laid out over the new buffers of every learning rank
        (:func:`~ding_dist.data.reshard.regroup_states`). Collective over the learning ranks (``group``)."""
        if not self._saves_replay:
            return
        mine = list(buffer.shards.values()) if hasattr(buffer, "shards") else [buffer]  # ReplayShards: one per actor

        def storage(b: Any) -> Any:
            return getattr(b, "storage", b)

        targets = allgather_object([(storage(b).num_envs, storage(b).rows_capacity) for b in mine], group=self.group)
        first = sum(len(t) for t in targets[: self.exp.rank])
        targets = [t for per_rank in targets for t in per_rank]
        try:
            states = []
            for q in range(old_world):
                found = self._replay_state(q, env_steps)
                if found is None:
                    raise FileNotFoundError(f"no replay file of rank {q} at env step {env_steps}")
                saved = found[1]  # a learner's ReplayShards: one buffer per actor, in actor order
                states += [saved["shards"][a] for a in sorted(saved["shards"])] if "shards" in saved else [saved]
            for i, b in enumerate(mine):
                new = regroup_states(states, targets, first + i, lock_step=self.exp.roles is None)
                if storage(b) is b:
                    b.load_state_dict(new.get("storage", new))
                elif "storage" in new:
                    b.load_state_dict(new)
                else:
                    b.load_storage_state(new)  # uniform old replay: each transition at the current max priority
        except (FileNotFoundError, ValueError, KeyError) as e:
            logger.warning("replay buffers of %d rank(s) of another mode or split cannot be regrouped (%s): the "
                           "buffer starts empty", old_world, e)  # fmt: skip
            return
        logger.info("replay regrouped from %d rank(s) of %s: %d transitions on this rank", old_world,
                    "actors and learners" if "roles" in state else "a data-parallel run", len(buffer))  # fmt: skip

    def _reshard_replay(self, buffer: Any, state: dict, old_world: int, world: int, env_steps: int) -> None:
        """This rank's share of every old rank's replay (data-parallel runs: the env slots are regrouped)."""
        if not self._saves_replay:
            return

        storage = getattr(buffer, "storage", buffer)  # a prioritized buffer wraps its storage
        priorities: list[float] = []

        def load(q: int) -> dict:
            found = self._replay_state(q, env_steps)
            if found is None:
                raise FileNotFoundError(f"no replay file of rank {q} at env step {env_steps}")
            state = found[1]
            if "storage" in state:  # prioritized: transitions re-sharded, each at the old ranks' largest priority
                priorities.append(float(state["max_priority"]))
                state = state["storage"]
            return state

        try:
            mine = reshard_states(load, self.exp.rank, world, old_world, rows_capacity=storage.rows_capacity)
            if storage is buffer:
                buffer.load_state_dict(mine)
            else:
                buffer.load_storage_state(mine, max(priorities, default=None))
        except (FileNotFoundError, ValueError) as e:
            logger.warning("replay buffers of %d rank(s) cannot be re-sharded over %d (%s): the buffer starts empty",
                           old_world, world, e)  # fmt: skip
            return
        logger.info("replay re-sharded from %d rank(s) over %d: %d transitions on this rank", old_world, world,
                    len(buffer))  # fmt: skip

    def _replay_path(self, ckpt_dir: Path, rank: int, previous: bool = False) -> Path:
        return ckpt_dir / f"replay_rank{rank}{'.prev' if previous else ''}.pt"

    def _replay_state(self, rank: int, env_steps: int) -> tuple[Path, dict] | None:
        """Rank ``rank``'s replay state of the checkpoint's env step (its newest file or the previous one), or None
        (with a warning when the run saves its replay)."""
        ckpt_dir = self.path.parent
        found = []
        for path in (self._replay_path(ckpt_dir, rank), self._replay_path(ckpt_dir, rank, previous=True)):
            if not path.is_file():
                continue
            try:
                saved = load_checkpoint(path)
            except CheckpointError as e:
                logger.warning("skipping unusable replay buffer file: %s", e)
                continue
            if saved.get("env_steps") == env_steps:
                return path, saved["buffer"]
            found.append(f"{path.name} (env step {saved.get('env_steps')})")
        if found or self._saves_replay:
            logger.warning(
                "no replay buffer file of rank %d at env step %d in %s (found: %s): the buffer starts empty",
                rank,
                env_steps,
                ckpt_dir,
                ", ".join(found) or "none",
            )
        return None

    # --- saving ---------------------------------------------------------------------------------------
    def due_by_time(self) -> bool:
        """This rank's view: ``policy.other.checkpoint.every_minutes`` have passed since the last checkpoint (or
        the segment's start). Ranks may see it differently; a loop shares it (any rank's True counts) before acting.

        Example::

            if reduce_log({"ckpt/due": ckpt.due_by_time()}, {})["ckpt/due"] > 0:
                ckpt.save(policy, counters, buffer)
        """
        return self.every_s > 0 and time.monotonic() - self._saved_at >= self.every_s

    def save_best(self, policy: Any, counters: Counters) -> Path | None:
        """Rank 0: ``ckpt/best.pt``, the policy just evaluated with the run's best return so far (its counters
        say which step and return), written in the background; other ranks write nothing (None).

        Example::

            if mean > counters.best_eval: ...; ckpt.save_best(policy, counters)
        """
        self._best_asked = True
        if self.exp.rank != 0:
            return None
        path = self.manager.directory / BEST_FILE
        if self._best_on_disk is None:  # a restarted run may have written a better one after its checkpoint
            self._best_on_disk = _best_return(path)
        if not counters.best_eval > self._best_on_disk:
            return None
        self._best_on_disk = counters.best_eval
        state = {
            "policy": policy.state_dict(),
            "policy_type": self.exp.policy_type,
            "max_env_steps": self.exp.max_env_steps,
            "counters": counters.state(),
            "best": True,
            **self.extra,
        }
        self.writer.submit(lambda copy: save_checkpoint(copy, path), state)
        return path

    def finish(self) -> None:
        """Wait until the file in flight is on disk; raises the error of a write that failed (e.g. a full disk)."""
        self.writer.wait()

    def finish_quietly(self) -> None:
        """:meth:`finish` on the way out of a failed run: a write's error is logged, not raised over the first one."""
        try:
            self.writer.wait()
        except Exception as e:
            logger.error("a checkpoint write failed: %s", e)

    def written(self) -> dict[str, str | None]:
        """The run's checkpoint files so far, the same on every rank: ``last`` (the newest this segment wrote, else
        the folder's newest) and ``best`` (``ckpt/best.pt`` when there is one), as paths; None where there is none.

        Example::

            ckpt.written()  # {"last": "runs/x/ckpt/ckpt_000020480.pt", "best": "runs/x/ckpt/best.pt"}
        """
        last = self._last if self._last is not None else self.manager.latest()
        best = self.manager.directory / BEST_FILE
        has_best = self._best_asked or best.is_file()
        return {"last": None if last is None else str(last), "best": str(best) if has_best else None}

    @property
    def _saves_replay(self) -> bool:
        return bool(self.exp.cfg.policy.other.replay_buffer.get("save_in_checkpoint", False))

    def save(
        self,
        policy: Any,
        counters: Counters,
        buffer: Any = None,
        segment_s: float = 0.0,
        before: Callable[[], None] | None = None,
    ) -> None:
        """Health check (then ``before``, e.g. the debug mode's consistency check), each rank's replay file (if
        configured), then rank 0's checkpoint file, from a snapshot taken now and written by the background writer
        (the previous one is waited for first, and its error raised). ``segment_s``: this segment's training time so
        far.

        The RNG allgather sits between the two, so it doubles as a barrier: when ``ckpt_<step>.pt`` exists,
        every rank's replay file of that step is complete. A rank keeps its previous replay file as
        ``replay_rank<r>.prev.pt`` until the new one is written, so a crash in between still leaves the
        replay file that matches the newest complete checkpoint.
        """
        self.writer.wait()  # the previous file is on disk before any rank rotates its replay file (the health check)
        health_check(self.exp.health_timeout, group=self.group)
        if before is not None:
            before()
        rng = capture_rng_state()
        c = counters
        if buffer is not None and self._saves_replay:
            current = self._replay_path(self.manager.directory, self.exp.rank)
            if current.is_file() and self._replay_saved_at != c.env_steps:  # a second save of a step replaces
                os.replace(current, self._replay_path(self.manager.directory, self.exp.rank, previous=True))
            save_checkpoint({"env_steps": c.env_steps, "buffer": buffer.state_dict()}, current)
            self._replay_saved_at = c.env_steps
        rng_states = allgather_object(rng, group=self.group)  # every rank's RNG, so resume restores each
        if self.exp.rank == 0:
            state = {
                "policy": policy.state_dict(),
                "policy_type": self.exp.policy_type,
                "max_env_steps": self.exp.max_env_steps,
                "counters": {**c.state(), "wall_time_s": c.wall_time_s + segment_s},
                "rng": rng_states,
                **self.extra,
            }
            self.writer.submit(lambda copy, step=c.env_steps: self.manager.save(copy, step), state)
        self._last = self.manager.path_for(c.env_steps)
        self._saved_at = time.monotonic()

    def newest(self) -> Path | None:
        """The newest complete checkpoint of the run's folder (None: none yet)."""
        return self.manager.latest()
