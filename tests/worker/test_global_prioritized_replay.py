"""One prioritized replay over shards: Ape-X's actor shards (1, 2, 4) and the learners' (or data-parallel ranks')
buffers sample as one PrioritizedReplayBuffer holding every item would, with the global minimum in the weights;
2 learners over gloo, each with its shard, apply the update of one learner holding both."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

import ding_dist as dd
from ding_dist.data.prioritized import PrioritizedReplayBuffer
from ding_dist.data.prioritized_shards import draw_prioritized
from ding_dist.data.replay import ReplayBuffer
from ding_dist.policy.dqn import DQNPolicy
from ding_dist.worker.experience import ReplayShards
from ding_dist.worker.learner import Learner

ALPHA, BETA, EPS = 0.6, 0.4, 1e-6


def shard(delta: np.ndarray, seed: int) -> PrioritizedReplayBuffer:
    """A prioritized buffer holding ``len(delta)`` transitions with those ``|delta|`` (obs: random, 3 floats)."""
    n = len(delta)
    buf = PrioritizedReplayBuffer(ReplayBuffer(n, (3,), seed=seed), alpha=ALPHA, beta=BETA, eps=EPS)
    rng = np.random.default_rng(seed + 1000)
    buf.add(
        {
            "obs": rng.normal(size=(n, 1, 3)).astype(np.float32),
            "action": rng.integers(0, 2, (n, 1)),
            "reward": rng.normal(size=(n, 1)).astype(np.float32),
            "next_obs": rng.normal(size=(n, 1, 3)).astype(np.float32),
            "terminated": rng.uniform(size=(n, 1)) < 0.1,
            "truncated": np.zeros((n, 1), bool),
        },
        priority=np.asarray(delta, np.float64)[:, None],
    )
    return buf


# By hand: p = (|delta| + eps) ** 0.6; 100 ** 0.6 = 10 ** 1.2 = 15.8489. The high shard holds 15.8489 / 16.8489 =
# 94.065 % of the mass (its share of any batch), and its weight is (15.8489 / 1) ** -0.4 = 10 ** -0.48 = 0.33113.
HIGH_SHARE = (100 + EPS) ** ALPHA / ((1 + EPS) ** ALPHA + (100 + EPS) ** ALPHA)
HIGH_WEIGHT = ((100 + EPS) / (1 + EPS)) ** (-ALPHA * BETA)


def test_the_issues_two_shards_give_the_high_priority_shard_its_mass_share_and_weight():
    assert round(HIGH_SHARE, 5) == 0.94065 and round(HIGH_WEIGHT, 5) == 0.33113
    shards = ReplayShards({1: shard(np.ones(500), 1), 2: shard(np.full(500, 100.0), 2)})
    high = []
    for _ in range(50):
        batch, weights, indices = shards.sample(64)
        from_high = indices // ReplayShards._STRIDE == 1
        high.append(from_high.sum())
        np.testing.assert_allclose(weights.numpy(), np.where(from_high, HIGH_WEIGHT, 1.0), rtol=1e-6)
        assert len(indices) == batch["obs"].shape[0] == 64
    assert set(high) <= {60, 61}  # stratified: 64 x 0.94065 = 60.2 (a split by size would give 32)
    assert np.mean(high) / 64 == pytest.approx(HIGH_SHARE, abs=0.01)


def _items(n_shards: int) -> tuple[list[np.ndarray], np.ndarray]:
    """24 |delta|s over ``n_shards`` shards of unequal sizes and masses (the large |delta|s in the small shards)."""
    delta = np.array([0.5, 3.0, 1.0, 0.1, 2.0, 0.7, 4.0, 1.5, 0.2, 0.9, 2.5, 1.2] * 2) * np.repeat([1.0, 8.0], 12)
    cuts = {1: [], 2: [16], 4: [10, 16, 20]}[n_shards]
    return np.split(delta, cuts), delta


@pytest.mark.parametrize("n_shards", [1, 2, 4])
def test_apex_shards_sample_as_one_prioritized_replay(n_shards):
    parts, delta = _items(n_shards)
    one = shard(delta, 0)  # one buffer holding every item: its probabilities and weights are the reference
    p = one.tree.leaves(np.arange(24))
    prob = p / p.sum()
    one_weight = (p / one.tree.min) ** -BETA
    shards = ReplayShards({a: shard(d, 10 + a) for a, d in enumerate(parts)})
    offset = np.cumsum([0, *map(len, parts)])[:-1]  # shard position -> its first item's number
    counts = np.zeros(24)
    for _ in range(300):
        _, weights, indices = shards.sample(32)
        item = offset[indices // ReplayShards._STRIDE] + indices % ReplayShards._STRIDE
        np.testing.assert_allclose(weights.numpy(), one_weight[item], rtol=1e-6)  # the global minimum's weights
        counts += np.bincount(item, minlength=24)
    expected = prob * counts.sum()
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < 49.73  # chi-square, 23 degrees of freedom, p = 0.001 (a split by shard size: chi2 in the hundreds)
    assert all(b.draws == 300 for b in shards.shards.values())  # beta's schedule advances on every shard alike


def test_bad_draws_are_refused():
    with pytest.raises(ValueError, match="at least one buffer"):
        draw_prioritized([], 8)
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        draw_prioritized([shard(np.ones(4), 0)], 0)
    empty = PrioritizedReplayBuffer(ReplayBuffer(4, (3,)))
    with pytest.raises(ValueError, match="empty replay buffer"):
        draw_prioritized([empty], 8)
    model, _ = dd.distribute(torch.nn.Linear(2, 1), None)
    with pytest.raises(ValueError, match="gradient weight must be a finite number >= 0, got -1.0"):
        model.gradient_weight(-1).__enter__()


# --- learners: 2 ranks, each holding one shard, against one process holding both --------------------------------
OBS, ACT = gym.spaces.Box(-5.0, 5.0, (3,)), gym.spaces.Discrete(2)
LOW = np.ones(40)
SCENARIOS = {"high": np.full(40, 100.0), "extreme": np.full(40, 1e6)}  # extreme: the low shard holds 2.5e-4


def _mine(high: np.ndarray) -> dict[int, PrioritizedReplayBuffer]:
    """Shard r (|delta| 1, then ``high``) on rank r, or both on one process."""
    rank, world = dd.get_rank(), dd.get_world_size()
    return {r: shard((LOW, high)[r], 7 + r) for r in range(2) if world == 1 or r == rank}


def _draws(high: np.ndarray) -> dict[int, list[np.ndarray]]:
    """Six global draws of 16: each shard's indices per draw."""
    mine = _mine(high)
    out: dict[int, list[np.ndarray]] = {r: [] for r in mine}
    for _ in range(6):
        for r, (index, _) in zip(mine, draw_prioritized(list(mine.values()), 16)):
            out[r].append(index)
    return out


def _learn(high: np.ndarray, as_shards: bool) -> tuple[np.ndarray, dict[int, np.ndarray]]:
    """4 prioritized DQN updates on a global batch of 16: the parameters, then every shard's priorities.
    ``as_shards``: a learner's ReplayShards; else a data-parallel rank's own buffer."""
    world = dd.get_world_size()
    mine = _mine(high)
    buffer = ReplayShards(mine) if as_shards or world == 1 else next(iter(mine.values()))
    cfg = DQNPolicy.default_config()
    cfg.device = "cpu"
    cfg.model.hidden_sizes = [8]
    cfg.priority, cfg.priority_IS_weight = True, True
    cfg.learn.update(learning_rate=0.01, target_update_freq=2)
    torch.manual_seed(0)
    policy = DQNPolicy(cfg, OBS, ACT)
    Learner(policy).train_replay(buffer, 4, 16 // world)
    params = torch.cat([p.detach().flatten() for p in policy.model.parameters()]).numpy()
    return params, {r: b.tree.leaves(np.arange(40)) for r, b in mine.items()}


def _all() -> dict:
    torch.set_num_threads(1)
    return {
        "draws": {name: _draws(high) for name, high in SCENARIOS.items()},
        "data_parallel": _learn(SCENARIOS["high"], as_shards=False),
        "learners": _learn(SCENARIOS["extreme"], as_shards=True),
    }


def test_two_learners_sample_and_update_as_one_learner_holding_both_shards(run_ranks):
    whole = _all()
    split = run_ranks(_all, 2)
    for name in SCENARIOS:  # the same transitions drawn: each rank serves the draws in its shard's mass
        for r in (0, 1):
            for mine, ref in zip(split[r]["draws"][name][r], whole["draws"][name][r], strict=True):
                np.testing.assert_array_equal(mine, ref)
    high = [len(i) for i in whole["draws"]["high"][1]]
    assert set(high) <= {15, 16} and sum(high) > 6 * 14  # 16 x 0.94065 = 15.05
    assert 0 in [len(i) for i in whole["draws"]["extreme"][0]]  # a learner with none of a batch: a stand-in step
    for key in ("data_parallel", "learners"):
        params, leaves = whole[key]
        np.testing.assert_array_equal(split[0][key][0], split[1][key][0], err_msg=key)
        np.testing.assert_allclose(split[0][key][0], params, rtol=1e-5, atol=1e-6, err_msg=key)
        for r in (0, 1):
            np.testing.assert_allclose(split[r][key][1][r], leaves[r], rtol=1e-5, err_msg=key)
