"""Pipelines on 2 real processes (gloo): identical parameters, global counters, resume, one result."""

from __future__ import annotations

import numpy as np
import torch

from ding_dist.comm import get_rank
from ding_dist.entry import pipeline
from ding_dist.entry.loops.data_parallel import DataParallelLoop
from ding_dist.utils import load_checkpoint, read_metrics
from ding_dist.worker import Collector
from tests.entry.test_pipeline import tiny_dqn, tiny_ppo


def _flat_params(exp_dir, step: int) -> np.ndarray:
    """The model parameters of rank 0's checkpoint of ``step``, flattened like ``run_and_keep_params`` does."""
    state = load_checkpoint(exp_dir / "ckpt" / f"ckpt_{step:09d}.pt")["policy"]
    return torch.cat([v.flatten() for v in state["model"].values()]).numpy()


def _train_on_rank(dqn_dir, ppo_dir):
    """Runs in each rank: DQN 512 steps, resume to 1024, then PPO; returns what the test checks."""
    episodes = [0]
    track = Collector._track_episodes

    def counting(self, reward, done):  # count this rank's finished episodes, then track as usual
        episodes[0] += int(np.count_nonzero(done))
        track(self, reward, done)

    Collector._track_episodes = counting
    out = {}
    first = pipeline.train(tiny_dqn(), seed=0, exp_dir=dqn_dir, max_env_steps=512)
    captured = DataParallelLoop.run

    def run_and_keep_params(self):  # read the live parameters of this rank after training
        result = captured(self)
        out["params"].append(torch.cat([p.detach().flatten() for p in self.policy.model.parameters()]).numpy())
        return result

    DataParallelLoop.run = run_and_keep_params
    out["params"] = []
    second = pipeline.train(tiny_dqn(), seed=0, resume=dqn_dir, max_env_steps=1024)
    ppo = pipeline.train(tiny_ppo(), seed=0, exp_dir=ppo_dir, max_env_steps=1024)
    out["dqn_params"], out["ppo_params"] = out.pop("params")
    out.update(rank=get_rank(), first=first, second=second, ppo=ppo, local_episodes=episodes[0])
    return out


def test_two_rank_training_is_synchronized_and_counts_globally(run_ranks, tmp_path):
    dqn_dir, ppo_dir = tmp_path / "dqn", tmp_path / "ppo"
    r0, r1 = run_ranks(_train_on_rank, 2, dqn_dir, ppo_dir)

    # Gradient sync: after training, every parameter is bitwise identical on both ranks, and equal to
    # rank 0's final checkpoint.
    for key, exp_dir in (("dqn_params", dqn_dir), ("ppo_params", ppo_dir)):
        np.testing.assert_array_equal(r0[key], r1[key])
        np.testing.assert_array_equal(r0[key], _flat_params(exp_dir, 1024))
    # The resumed run trained the checkpoint it started from: same network, other values.
    at_512 = _flat_params(dqn_dir, 512)
    assert at_512.shape == r0["dqn_params"].shape
    assert not np.array_equal(at_512, r0["dqn_params"])

    # Counters are global: 1024 env steps in total (512 per rank), and the same update schedule as
    # one process (iterations ending at 128, 192, ..., 1024 global steps, 4 updates each).
    for r in (r0, r1):
        assert r["second"]["env_steps"] == 1024 and r["second"]["world_size"] == 2
        assert r["first"]["train_iters"] == 7 * 4 and r["second"]["train_iters"] == 15 * 4
        assert r["ppo"]["env_steps"] == 1024 and r["ppo"]["train_iters"] == 8 * 2 * 2
    times = ("wall_time_s", "segment_wall_time_s", "phases_s")  # each rank's own clock
    same = lambda r: {k: v for k, v in r.items() if k not in times}  # noqa: E731
    assert same(r0["second"]) == same(r1["second"]) and same(r0["ppo"]) == same(r1["ppo"])

    # Episodes are summed over ranks (episodes still running at the end are not counted by anyone).
    records = read_metrics(ppo_dir / "tb" / "metrics.jsonl")
    ppo_episodes = [r for r in records if "rollout/episodes" in r][-1]["rollout/episodes"]
    assert ppo_episodes == r0["ppo"]["episodes"]
    total = r0["local_episodes"] + r1["local_episodes"]
    assert r0["second"]["episodes"] + r0["ppo"]["episodes"] == total
    assert r0["local_episodes"] != total  # both ranks contributed

    # Resume continued the counters: TB steps run on from the checkpoint without repeats.
    steps = [r["step"] for r in read_metrics(dqn_dir / "tb" / "metrics.jsonl") if "time/fps" in r]
    assert steps == [256, 512, 768, 1024]
