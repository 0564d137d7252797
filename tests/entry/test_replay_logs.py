"""Ape-X's replay logs (``ding_dist.entry.services.metrics.replay_values``): size, priorities, sampled ages."""

from __future__ import annotations

import numpy as np
import pytest

from ding_dist.data.prioritized import PrioritizedReplayBuffer
from ding_dist.data.replay import ReplayBuffer
from ding_dist.data.replay_shards import ReplayShards
from ding_dist.entry.services.metrics import finish_replay_values, replay_values


def _rollout(rows: int, envs: int = 2) -> dict:
    obs, flags = np.zeros((rows, envs, 2), np.float32), np.zeros((rows, envs), bool)
    return {"obs": obs, "action": np.zeros((rows, envs), np.int64), "reward": np.ones((rows, envs), np.float32),
            "next_obs": obs, "terminated": flags, "truncated": flags}  # fmt: skip


def test_replay_values_give_size_priorities_and_the_age_of_what_was_drawn():
    shards = {}
    for actor, rows in ((1, 3), (2, 5)):
        b = PrioritizedReplayBuffer(ReplayBuffer(20, (2,), num_envs=2, seed=0), alpha=0.5, eps=1e-6)
        b.add(_rollout(rows), priority=np.full((rows, 2), float(actor)))  # shard 1: priority 1, shard 2: 2
        shards[actor] = b
    buffer = ReplayShards(shards)
    buffer.sample(8)
    sums, top = replay_values(buffer)
    finish_replay_values(sums)
    assert sums["replay/size"] == 16 and top == pytest.approx(2.0 + 1e-6)
    assert sums["replay/priority_mean"] == pytest.approx((6 * 1 + 10 * 2) / 16 + 1e-6)
    ages = [b.sampled_age for b in shards.values()]
    assert ages == [[0.0, 0], [0.0, 0]]  # popped: the next record counts new draws only
    assert 0 <= sums["replay/sample_age"] <= 8  # rows after the drawn one (at most 4) x 2 envs
    # the same draw again, its ages counted exactly: row r of a shard with R rows is (R - 1 - r) rows old
    _, _, idx = shards[2].sample(4)
    rows = np.asarray(idx) // 2
    assert shards[2].pop_sample_age() == (float((4 - rows).sum() * 2), 4)
    uniform, _ = replay_values(ReplayShards({1: ReplayBuffer(20, (2,), num_envs=2, seed=0)}))
    finish_replay_values(uniform)
    assert uniform == {"replay/size": 0.0}  # uniform shards: only the size; no mean of nothing
