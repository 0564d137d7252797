"""RunningObsNorm: statistics synchronized over real gloo ranks are identical and exact; checkpointed."""

from __future__ import annotations

import numpy as np
import torch

from ding_dist.comm import get_rank
from ding_dist.policy.normalization import RunningObsNorm


def _rank_data(rank: int, round_: int) -> np.ndarray:
    rng = np.random.default_rng(100 * rank + round_)
    return rng.normal(loc=3.0 + rank, scale=1.0 + 2 * rank, size=(5 + 7 * rank + round_, 3))


def _sync_rounds(rounds: int) -> dict[str, np.ndarray]:
    rank = get_rank()
    norm = RunningObsNorm((3,))
    for r in range(rounds):
        data = _rank_data(rank, r)
        norm.observe(data[:2])  # several observe calls per sync
        norm.observe(data[2:])
        norm.sync()
    return {k: v.numpy().copy() for k, v in norm.state_dict().items()}


def _expected(world: int, rounds: int) -> np.ndarray:
    return np.concatenate([_rank_data(rank, r) for r in range(rounds) for rank in range(world)])


def test_two_rank_statistics_are_identical_on_every_rank_and_equal_the_pooled_data(run_ranks):
    states = run_ranks(_sync_rounds, 2, 3)
    for key in ("count", "mean", "m2"):
        np.testing.assert_array_equal(states[0][key], states[1][key])  # bit-identical across ranks
    pooled = _expected(2, 3)
    assert states[0]["count"] == len(pooled)
    np.testing.assert_allclose(states[0]["mean"], pooled.mean(0), rtol=1e-12)
    np.testing.assert_allclose(states[0]["m2"] / states[0]["count"], pooled.var(0), rtol=1e-10)


def test_single_process_normalizes_and_round_trips_through_state_dict():
    norm = RunningObsNorm((3,), clip=5.0)
    data = _expected(1, 2)
    norm.observe(data)
    assert float(norm(torch.ones(1, 3)).min()) == 1.0  # pending statistics are not used before a sync
    norm.sync()
    out = norm(torch.as_tensor(data)).numpy()
    np.testing.assert_allclose(out.mean(0), 0.0, atol=1e-6)
    np.testing.assert_allclose(out.std(0), 1.0, atol=1e-5)
    assert out.dtype == np.float32
    restored = RunningObsNorm((3,), clip=5.0)
    restored.load_state_dict(norm.state_dict())
    torch.testing.assert_close(restored(torch.as_tensor(data)), norm(torch.as_tensor(data)))
    assert float(restored(torch.full((1, 3), 1e9)).max()) == 5.0
