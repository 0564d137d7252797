"""ReplayBuffer: ring storage per env slot, n-step returns, bootstrapping rules, checkpoint state."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ding_dist.data.replay import ReplayBuffer


def fill(buf: ReplayBuffer, steps: int, seed: int = 0) -> list[dict]:
    """Add ``steps`` rows of random episodes; obs encodes (time, env) so a sample can be traced back."""
    rng = np.random.default_rng(seed)
    history = []
    for t in range(steps):
        n = buf.num_envs
        obs = np.stack([np.full(buf.obs_shape, t * 100 + e, dtype=np.float32) for e in range(n)])
        row = dict(
            obs=obs,
            action=rng.integers(0, 3, n),
            reward=rng.normal(size=n).astype(np.float32),
            next_obs=obs + 0.5,  # distinct from every stored obs
            terminated=rng.random(n) < 0.15,
            truncated=rng.random(n) < 0.1,
        )
        row["truncated"] &= ~row["terminated"]
        buf.add(**row)
        history.append(row)
    return history


def reference(history: list[dict], t: int, e: int, n_step: int, gamma: float, newest: int):
    """n-step target pieces for the transition at time t, env e, by a plain loop."""
    ret, disc, k = 0.0, 1.0, 0
    while True:
        row = history[t + k]
        ret += disc * float(row["reward"][e])
        disc *= gamma
        k += 1
        if row["terminated"][e]:
            return ret, 0.0, row["next_obs"][e]
        if row["truncated"][e] or k == n_step or t + k > newest:
            return ret, disc, row["next_obs"][e]


@pytest.mark.parametrize("n_step", [1, 3])
@pytest.mark.parametrize("steps", [7, 40])  # 40 > capacity rows: the ring has wrapped
def test_sample_matches_reference_n_step(n_step, steps):
    gamma = 0.9
    buf = ReplayBuffer(60, obs_shape=(2,), num_envs=3, n_step=n_step, gamma=gamma, seed=1)
    history = fill(buf, steps)
    assert len(buf) == min(steps, 20) * 3
    batch = buf.sample(256)
    assert set(batch) == {"obs", "action", "reward", "next_obs", "discount"}
    assert batch["obs"].dtype == torch.float32 and batch["action"].dtype == torch.int64
    oldest = max(0, steps - 20)
    seen_times = set()
    for i in range(256):
        code = int(batch["obs"][i, 0])
        t, e = divmod(code, 100)
        seen_times.add(t)
        assert oldest <= t < steps  # overwritten rows are never sampled
        ret, disc, nxt = reference(history, t, e, n_step, gamma, newest=steps - 1)
        assert batch["action"][i] == history[t]["action"][e]
        assert batch["reward"][i].item() == pytest.approx(ret, rel=1e-5, abs=1e-5)
        assert batch["discount"][i].item() == pytest.approx(disc, rel=1e-6)
        np.testing.assert_allclose(batch["next_obs"][i].numpy(), nxt)
    assert len(seen_times) > min(steps, 20) // 2  # uniform-ish coverage of the stored rows


def test_termination_cuts_and_truncation_bootstraps():
    buf = ReplayBuffer(10, obs_shape=(1,), num_envs=1, n_step=3, gamma=0.5, seed=0)
    one = lambda x: np.array([[x]], dtype=np.float32)  # noqa: E731
    # t=0: r=1, truncated (time limit); t=1: r=2; t=2: r=4, terminated; t=3: r=8
    buf.add(one(0), [0], [1.0], one(0.5), [False], [True])
    buf.add(one(1), [0], [2.0], one(1.5), [False], [False])
    buf.add(one(2), [0], [4.0], one(2.5), [True], [False])
    buf.add(one(3), [0], [8.0], one(3.5), [False], [False])
    batch = buf.sample(200)
    by_start = {
        int(o): (r.item(), d.item(), float(n))
        for o, r, d, n in zip(batch["obs"][:, 0], batch["reward"], batch["discount"], batch["next_obs"][:, 0])
    }
    assert by_start[0] == (1.0, 0.5, 0.5)  # truncated: bootstrap from the final obs after one step
    assert by_start[1] == (2.0 + 0.5 * 4.0, 0.0, 2.5)  # terminated at t=2: no bootstrap
    assert by_start[3] == (8.0, 0.5, 3.5)  # newest row: a shorter return that still bootstraps


def test_state_dict_round_trip_continues_identically():
    a = ReplayBuffer(30, obs_shape=(2,), num_envs=2, n_step=2, seed=3)
    fill(a, 25)
    b = ReplayBuffer(30, obs_shape=(2,), num_envs=2, n_step=2, seed=99)
    b.load_state_dict(a.state_dict())
    assert len(b) == len(a)
    for key in ("obs", "reward", "discount"):
        torch.testing.assert_close(a.sample(16)[key], b.sample(16)[key])
    with pytest.raises(ValueError, match="obs_shape"):
        ReplayBuffer(30, obs_shape=(3,), num_envs=2).load_state_dict(a.state_dict())


def test_continuous_actions_and_bad_input():
    buf = ReplayBuffer(8, obs_shape=(3,), action_shape=(2,), action_dtype=np.float32, num_envs=2)
    with pytest.raises(ValueError, match="empty"):
        buf.sample(4)
    with pytest.raises(ValueError, match=r"'action' must have shape \(2, 2\)"):
        buf.add(np.zeros((2, 3)), np.zeros(2), np.zeros(2), np.zeros((2, 3)), [False] * 2, [False] * 2)
    buf.add(np.zeros((2, 3)), np.ones((2, 2)), np.zeros(2), np.zeros((2, 3)), [False] * 2, [False] * 2)
    assert buf.sample(4)["action"].dtype == torch.float32
    for kwargs, match in (({"capacity": 0}, "capacity"), ({"n_step": 0}, "n_step"), ({"gamma": 1.5}, "gamma")):
        args = {"capacity": 8, "obs_shape": (3,), **kwargs}
        with pytest.raises(ValueError, match=match):
            ReplayBuffer(**args)


def test_extend_adds_every_rollout_row():
    buf = ReplayBuffer(100, obs_shape=(1,), num_envs=2)
    rollout = {
        "obs": np.zeros((5, 2, 1)),
        "action": np.zeros((5, 2), dtype=np.int64),
        "reward": np.ones((5, 2)),
        "next_obs": np.zeros((5, 2, 1)),
        "terminated": np.zeros((5, 2), bool),
        "truncated": np.zeros((5, 2), bool),
        "logp": np.zeros((5, 2)),  # extra fields are ignored
    }
    buf.extend(rollout)
    assert len(buf) == 10


@pytest.mark.parametrize("wrapped", [False, True])  # True: the ring is full and its newest row is not the last
def test_cut_streams_stops_n_step_returns_at_a_resume(wrapped):
    buf = ReplayBuffer(8, obs_shape=(1,), num_envs=2, n_step=3, gamma=0.5, seed=0)  # 4 rows of 2 slots
    one = lambda x: np.array([[x], [x + 10]], dtype=np.float32)  # noqa: E731
    rows = 6 if wrapped else 2
    for t in range(rows):  # env 1's newest step terminates; env 0's episode goes on
        buf.add(one(t), [0, 0], [1.0, 1.0], one(t + 0.5), [False, t == rows - 1], [False, False])
    buf.cut_streams()
    # after the resume, the reset envs' first steps: a reward that no earlier transition may sum
    buf.add(one(100), [0, 0], [64.0, 64.0], one(100.5), [False, False], [False, False])
    batch = buf.sample(400)
    by_start = {
        float(o): (r.item(), d.item(), float(n))
        for o, r, d, n in zip(batch["obs"][:, 0], batch["reward"], batch["discount"], batch["next_obs"][:, 0])
    }
    last = rows - 1
    assert by_start[last] == (1.0, 0.5, last + 0.5)  # cut: truncated, bootstrapped from its own next_obs
    assert by_start[last - 1] == (1.5, 0.25, last + 0.5)  # stops at the cut, two steps
    assert by_start[last + 10] == (1.0, 0.0, last + 10.5)  # terminated stays terminated (no bootstrap)
    assert by_start[100] == (64.0, 0.5, 100.5)
