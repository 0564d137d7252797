"""Every run keeps the policy of its best evaluation as ``ckpt/best.pt`` and says in its summary what it wrote."""

from __future__ import annotations

import logging

import torch

from ding_dist.entry import train
from ding_dist.entry.services.checkpointing import BEST_FILE
from ding_dist.entry.services.summary import run_summary
from ding_dist.utils import load_checkpoint
from tests.entry.test_pipeline import tiny_dqn


def test_best_checkpoint_holds_the_first_best_evaluation_and_its_policy(tmp_path, caplog):
    main, create = tiny_dqn()
    main.policy.eval.eval_freq = 256
    main.policy.other.checkpoint = dict(freq=256, keep_last=10)
    with caplog.at_level(logging.INFO, logger="ding_dist"):
        result = train((main, create), seed=1, exp_dir=tmp_path, max_env_steps=2048)
    history = result["eval_history"]
    best_return = max(r for _, r in history)
    first_best_step = next(s for s, r in history if r == best_return)
    best = load_checkpoint(tmp_path / "ckpt" / BEST_FILE)
    assert (best["counters"]["best_eval"], best["counters"]["env_steps"]) == (best_return, first_best_step)
    assert best["policy_type"] == "dqn" and best["best"] is True
    same_step = load_checkpoint(tmp_path / "ckpt" / f"ckpt_{first_best_step:09d}.pt")  # written at that evaluation
    for name, value in best["policy"]["model"].items():
        assert torch.equal(value, same_step["policy"]["model"][name]), name
    assert result["checkpoint"] == {"last": str(tmp_path / "ckpt" / "ckpt_000002048.pt"),
                                    "best": str(tmp_path / "ckpt" / BEST_FILE)}  # fmt: skip
    logged = [r.getMessage() for r in caplog.records if r.name == "ding_dist.entry.pipeline"]
    assert logged == run_summary(result)  # the Python API closes with the CLI's summary


def test_summary_says_why_the_run_stopped_and_a_next_command_that_ends():
    common = {"env_steps": 20480, "train_iters": 1600, "world_size": 2, "wall_time_s": 9.5, "best_eval_return": 500.0,
              "last_eval_return": 500.0, "exp_dir": "runs/x",
              "checkpoint": {"last": "runs/x/ckpt/ckpt_000020480.pt", "best": None}}  # fmt: skip
    solved = run_summary({**common, "stopped_by": "stop_value"})
    assert solved[1:] == [
        "stopped by stop_value: an evaluation reached env.stop_value",
        "checkpoints: runs/x/ckpt/ckpt_000020480.pt (last)",
        "next: ding-dist eval --ckpt runs/x  |  "
        "ding-dist resume runs/x --set env.stop_value=None --max-env-steps 40960",
    ]
    signalled = run_summary({**common, "stopped_by": "SIGTERM"})
    assert signalled[1] == "stopped by SIGTERM at env step 20480, checkpointed"
    assert signalled[3] == "next: ding-dist eval --ckpt runs/x  |  ding-dist resume runs/x"


def test_time_line_shares_and_the_hint_for_a_collect_bound_run():
    from ding_dist.entry.services.summary import time_lines

    phases = {"startup": 2.5, "collect": 5.4, "learn": 2.4, "eval": 0.6, "log": 0.6, "checkpoint": 0.01}
    lines = time_lines(phases, world_size=1, cores=4)
    # the loop: 9.01 s; collect 5.4 / 9.01 = 59.9%, learn 26.6%, eval and log 6.7% each; a checkpoint under 0.05 s
    assert lines[0] == (
        "time: start-up 2.5 s; loop: collect 5.4 s (60%), learn 2.4 s (27%), eval 0.6 s (7%), log 0.6 s (7%)"
    )
    assert lines[1].startswith("hint: stepping the envs and acting took 60% of the loop; with 4 cores, --nproc N")
    assert time_lines(phases, world_size=2, cores=4) == lines[:1], "a run of several processes gets no hint"
    assert time_lines(phases, world_size=1, cores=1) == lines[:1], "nor does a one-core machine"
    learn_bound = {**phases, "collect": 2.0, "learn": 5.8}  # collect 2.0 / 9.01 = 22%
    assert len(time_lines(learn_bound, world_size=1, cores=4)) == 1
    assert time_lines({}) == [] and time_lines({"startup": 1.0}) == []
