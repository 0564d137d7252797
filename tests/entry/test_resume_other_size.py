"""A run trained on N processes resumes on M, and as actors and learners and back: counters, policy and optimizer
carry on, RNG streams start afresh, and every transition of every rank's replay is kept once, re-sharded over the
new ranks (or regrouped over the learners' actor shards)."""

from __future__ import annotations

import hashlib
import os
import shutil
from collections import Counter

import numpy as np

from ding_dist.comm import get_rank
from ding_dist.entry import train
from ding_dist.utils import load_checkpoint
from tests.entry.test_actor_learner import _al
from tests.entry.test_pipeline import tiny_dqn


def _transitions(*states: dict) -> Counter:
    found: Counter = Counter()
    for s in states:
        for row in range(s["rows"]):
            for slot in range(s["shape"][1]):
                fields = b"".join(np.asarray(v[row, slot]).tobytes() for _, v in sorted(s["data"].items()))
                found[hashlib.sha256(fields).hexdigest()] += 1
    return found


def _without_truncated(*states: dict) -> Counter:
    """As :func:`_transitions`, the truncated flag left out (a regrouped replay marks where slots were cut)."""
    return _transitions(*({**s, "data": {k: v for k, v in s["data"].items() if k != "truncated"}} for s in states))


def _modes(exp_dir: str) -> tuple:
    """Data-parallel on 2 ranks, resumed as 1 learner + 1 actor (trains on), resumed as data-parallel again;
    each rank keeps a copy of the replay file it wrote."""
    rank, run = get_rank(), os.path.join(exp_dir, "run")
    saved = os.path.join(exp_dir, "saved")
    os.makedirs(saved, exist_ok=True)

    def keep(name: str) -> None:
        shutil.copy(os.path.join(run, "ckpt", f"replay_rank{rank}.pt"), os.path.join(saved, f"{name}{rank}.pt"))

    dp = train(tiny_dqn(), seed=0, exp_dir=run, max_env_steps=512)
    keep("dp")
    al = train(_al(tiny_dqn(), 1), seed=0, resume=run, max_env_steps=640)
    if rank == 0:
        keep("al")
    back = train(tiny_dqn(), seed=0, resume=run, max_env_steps=640)
    keep("back")
    return dp, al, back


def test_two_rank_dqn_resumes_as_actors_and_learners_and_back_then_on_one_process_with_all_its_replay(
    run_ranks, tmp_path
):
    (dp, al, back), (_, actor, _) = run_ranks(_modes, 2, str(tmp_path))
    run, saved = tmp_path / "run", tmp_path / "saved"
    old = [load_checkpoint(saved / f"dp{r}.pt")["buffer"] for r in (0, 1)]
    assert [s["shape"][1] for s in old] == [2, 2]  # tiny_dqn's 4 envs, 2 per rank
    shards = load_checkpoint(saved / "al0.pt")["buffer"]["shards"]
    assert list(shards) == [1] and shards[1]["shape"][1] == 4  # the actor's 4 envs: one shard on the learner
    back_states = [load_checkpoint(saved / f"back{r}.pt")["buffer"] for r in (0, 1)]
    # The learner took every transition of both ranks once, then added its actor's 128 new ones ...
    assert sum(_transitions(*old).values()) == 512 and sum(_transitions(shards[1]).values()) == 640
    assert not _without_truncated(*old) - _without_truncated(shards[1])
    # ... and the data-parallel ranks took all 640 back, 2 slots each, in lock step.
    assert [s["shape"][1] for s in back_states] == [2, 2] and back_states[0]["rows"] == back_states[1]["rows"]
    assert _without_truncated(*back_states) == _without_truncated(shards[1])
    # Global counters carry on through both switches: 4 updates per 64 env steps, as one process.
    assert (al["env_steps"], al["train_iters"], al["actor_learner"]["role"]) == (640, dp["train_iters"] + 8, "learner")
    assert actor["role"] == "actor"
    assert (back["env_steps"], back["train_iters"], back["world_size"]) == (640, al["train_iters"], 2)

    # On one process: the same budget (no iteration, only the final checkpoint, which writes the re-sharded buffer)
    same = train(tiny_dqn(), seed=0, resume=run, max_env_steps=640)
    assert (same["env_steps"], same["train_iters"], same["world_size"]) == (640, back["train_iters"], 1)
    new = load_checkpoint(run / "ckpt" / "replay_rank0.pt")["buffer"]
    assert new["shape"][1] == 4 and sum(_transitions(new).values()) == 640
    assert _transitions(new) == _transitions(*back_states)  # every transition once: nothing dropped, nothing duplicated

    # and it trains on: 4 updates per 64 global env steps, as on two processes
    more = train(tiny_dqn(), seed=0, resume=run, max_env_steps=896)
    assert (more["env_steps"], more["train_iters"]) == (896, back["train_iters"] + 4 * 4)
    assert more["eval_history"][0] == dp["eval_history"][0]
