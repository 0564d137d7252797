"""Seed streams: no two seeds, ranks, roles, restarts or resumed segments of a run share a stream."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ding_dist.envs import env_seeds
from ding_dist.envs.seeding import RunSeeds


def _all_env_seeds(seeds: RunSeeds, ranks: int = 4, num: int = 8) -> list[int]:
    return [s for r in range(ranks) for role in ("collector", "evaluator") for s in seeds.env_seeds(role, r, num)]


def test_runs_seeded_0_and_1_share_no_env_seed():
    zero, one = _all_env_seeds(RunSeeds(0)), _all_env_seeds(RunSeeds(1))
    assert len(set(zero)) == len(zero) == 64  # no two envs, ranks or roles of one run
    assert set(zero).isdisjoint(one)
    # the old scheme (seed + 1000 * rank + i) shared 7 of 8 collector seeds between seeds 0 and 1
    assert set(env_seeds(0, 0, "collector", 8)).isdisjoint(env_seeds(1, 0, "collector", 8))


def test_restarts_and_resumed_segments_get_streams_of_their_own():
    segments = [RunSeeds(0), RunSeeds(0, restart=1), RunSeeds(0, start_step=1000), RunSeeds(0, restart=1, start_step=1)]
    found = [_all_env_seeds(s) for s in segments]
    for i in range(len(found)):
        for j in range(i + 1, len(found)):
            assert set(found[i]).isdisjoint(found[j]), (segments[i], segments[j])
    # the old resume seeded seed + env_steps: a run of seed 0 resumed at step 1000 replayed rank 1's streams
    assert set(RunSeeds(0, start_step=1000).env_seeds("collector", 0, 8)).isdisjoint(
        RunSeeds(0).env_seeds("collector", 1, 8)
    )


def test_streams_are_fixed_by_their_key_and_the_key_has_a_fixed_length():
    assert RunSeeds(5, 2, 2**40 + 3).env_seeds("collector", 3, 4) == RunSeeds(5, 2, 2**40 + 3).env_seeds(
        "collector", 3, 4
    )
    # numpy pads short entropy with zeros: [1] and [1, 0] would be one pool. Ours always has six words.
    assert len(RunSeeds(1).sequence("collector", 0).entropy) == len(RunSeeds(1, 0, 2**33).sequence("replay", 7).entropy)
    assert RunSeeds(0, start_step=2**32).env_seeds("collector", 0, 4) != RunSeeds(0, restart=1).env_seeds(
        "collector", 0, 4
    )
    assert all(0 <= s < 2**31 for s in _all_env_seeds(RunSeeds(2**32 - 1, 7, 2**63)))


def test_process_streams_differ_by_rank():
    draws = []
    for rank in (0, 1):
        RunSeeds(0).seed_process(rank)
        draws.append((float(np.random.random()), float(torch.rand(()))))
    assert draws[0] != draws[1]
    RunSeeds(0).seed_process(0)
    assert (float(np.random.random()), float(torch.rand(()))) == draws[0]


@pytest.mark.parametrize(
    "args, message",
    [
        (dict(seed=-1), "seed must be an int >= 0"),
        (dict(seed=0, restart=1.5), "restart must be an int"),
        (dict(seed=0, start_step=-3), "start_step must be an int >= 0"),
    ],
)
def test_bad_keys_name_the_value(args, message):
    with pytest.raises(ValueError, match=message):
        RunSeeds(**args)


def test_bad_roles_and_counts_name_the_value():
    with pytest.raises(ValueError, match="role must be one of"):
        RunSeeds(0).sequence("learner", 0)
    with pytest.raises(ValueError, match="env role must be 'collector' or 'evaluator', got 'replay'"):
        RunSeeds(0).env_seeds("replay", 0, 2)
    with pytest.raises(ValueError, match="number of envs must be an int >= 1, got 0"):
        RunSeeds(0).env_seeds("collector", 0, 0)
