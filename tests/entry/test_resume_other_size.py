"""A run trained on N processes resumes on M: counters, policy and optimizer carry on, RNG streams start afresh,
and every transition of every rank's replay is kept once, re-sharded over the new ranks."""

from __future__ import annotations

import hashlib
import shutil
from collections import Counter

import numpy as np

from ding_dist.entry import train
from ding_dist.utils import load_checkpoint
from tests.entry.test_pipeline import tiny_dqn


def _transitions(*states: dict) -> Counter:
    found: Counter = Counter()
    for s in states:
        for row in range(s["rows"]):
            for slot in range(s["shape"][1]):
                fields = b"".join(np.asarray(v[row, slot]).tobytes() for _, v in sorted(s["data"].items()))
                found[hashlib.sha256(fields).hexdigest()] += 1
    return found


def _two_ranks(exp_dir: str) -> dict:
    return train(tiny_dqn(), seed=0, exp_dir=exp_dir, max_env_steps=512)


def test_two_rank_dqn_resumes_on_one_process_with_all_its_replay(run_ranks, tmp_path):
    run = tmp_path / "run"
    first, _ = run_ranks(_two_ranks, 2, str(run))
    saved = tmp_path / "saved"
    shutil.copytree(run / "ckpt", saved)
    old = [load_checkpoint(saved / f"replay_rank{r}.pt")["buffer"] for r in (0, 1)]
    assert [s["shape"][1] for s in old] == [2, 2]  # tiny_dqn's 4 envs, 2 per rank

    # the same budget: no iteration, only the final checkpoint, which writes the re-sharded buffer of the one rank
    same = train(tiny_dqn(), seed=0, resume=run, max_env_steps=512)
    assert (same["env_steps"], same["train_iters"], same["world_size"]) == (512, first["train_iters"], 1)
    new = load_checkpoint(run / "ckpt" / "replay_rank0.pt")["buffer"]
    assert new["shape"][1] == 4 and sum(_transitions(new).values()) == 512
    assert _transitions(new) == _transitions(*old)  # every transition once: nothing dropped, nothing duplicated

    # and it trains on: 4 updates per 64 global env steps, as on two processes
    more = train(tiny_dqn(), seed=0, resume=run, max_env_steps=768)
    assert (more["env_steps"], more["train_iters"]) == (768, first["train_iters"] + 4 * 4)
    assert more["eval_history"][0] == first["eval_history"][0]
