"""FrameReplayBuffer: exact stacked observations against the naive ReplayBuffer, and its memory per transition."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from ding_dist.data.frame_replay import FrameReplayBuffer, replay_buffer_for
from ding_dist.data.replay import ReplayBuffer

K, H, W = 4, 6, 5


def stacked_stream(num_envs: int, steps: int, seed: int, mean_len: int = 7):
    """Rows of SAME_STEP vector-env transitions with frame-stacked uint8 observations and random episode ends."""
    rng = np.random.default_rng(seed)

    def fresh():  # a reset observation: K arbitrary frames (not necessarily copies)
        return rng.integers(0, 256, (K, H, W), dtype=np.uint8)

    obs = np.stack([fresh() for _ in range(num_envs)])
    for _ in range(steps):
        new = rng.integers(0, 256, (num_envs, 1, H, W), dtype=np.uint8)
        next_obs = np.concatenate([obs[:, 1:], new], axis=1)  # the real successor (final obs when done)
        done = rng.random(num_envs) < 1.0 / mean_len
        terminated = done & (rng.random(num_envs) < 0.5)
        truncated = done & ~terminated
        action = rng.integers(0, 3, num_envs)
        reward = rng.normal(size=num_envs).astype(np.float32)
        yield obs, action, reward, next_obs, terminated, truncated
        obs = next_obs.copy()
        for i in np.flatnonzero(done):
            obs[i] = fresh()


@pytest.mark.parametrize(("capacity", "n_step", "steps"), [(60, 1, 25), (60, 3, 200), (40, 5, 333)])
def test_samples_equal_the_naive_buffer_frame_for_frame(capacity, n_step, steps):
    kw = dict(num_envs=3, n_step=n_step, gamma=0.9, seed=5)
    naive = ReplayBuffer(capacity, (K, H, W), obs_dtype=np.uint8, **kw)
    dedup = FrameReplayBuffer(capacity, (K, H, W), **kw)
    for step in stacked_stream(3, steps, seed=capacity + steps):
        naive.add(*step)
        dedup.add(*step)
        assert len(naive) == len(dedup)
    a, b = naive.sample(512), dedup.sample(512)
    assert set(a) == set(b)
    for key in a:
        assert a[key].dtype == b[key].dtype, key
        torch.testing.assert_close(a[key], b[key], rtol=0, atol=0, msg=key)
    assert b["obs"].dtype == torch.uint8
    assert (b["discount"] == 0).any() and (b["discount"] > 0).any()  # terminations and bootstraps both sampled


def test_state_dict_round_trip_continues_identically():
    kw = dict(num_envs=2, n_step=3, gamma=0.99, seed=1)
    first, second = FrameReplayBuffer(50, (K, H, W), **kw), FrameReplayBuffer(50, (K, H, W), **kw)
    stream = list(stacked_stream(2, 120, seed=3))
    for step in stream[:80]:
        first.add(*step)
    second.load_state_dict(first.state_dict())
    for step in stream[80:]:
        first.add(*step)
        second.add(*step)
    a, b = first.sample(64), second.sample(64)
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=0, atol=0)


def test_rejects_observations_that_are_not_a_frame_stack():
    buf = FrameReplayBuffer(10, (K, H, W), num_envs=1)
    obs = np.zeros((1, K, H, W), np.uint8)
    with pytest.raises(ValueError, match="shifted by one frame"):
        buf.add(obs, np.zeros(1, np.int64), np.zeros(1), obs + 1, np.zeros(1, bool), np.zeros(1, bool))


def test_atari_sized_transition_costs_at_most_1_1_frames():
    num_envs, rows = 4, 500
    buf = FrameReplayBuffer(num_envs * rows, (4, 84, 84), num_envs=num_envs)
    rng = np.random.default_rng(0)
    obs = rng.integers(0, 256, (num_envs, 4, 84, 84), dtype=np.uint8)
    for t in range(rows):
        next_obs = np.concatenate([obs[:, 1:], rng.integers(0, 256, (num_envs, 1, 84, 84), dtype=np.uint8)], axis=1)
        done = np.full(num_envs, t % 400 == 399)  # episodes of 400 steps, shorter than Pong's
        buf.add(
            obs, np.zeros(num_envs, np.int64), np.zeros(num_envs, np.float32), next_obs, done, np.zeros(num_envs, bool)
        )
        obs = next_obs
    per_transition = buf.nbytes() / len(buf)
    assert per_transition <= 1.1 * 84 * 84, per_transition
    naive = ReplayBuffer(num_envs * rows, (4, 84, 84), obs_dtype=np.uint8, num_envs=num_envs)
    assert sum(v.nbytes for v in naive._data.values()) / naive.capacity > 7.9 * 84 * 84


def test_replay_buffer_for_chooses_from_the_observation_space():
    frames = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
    vector = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    assert isinstance(replay_buffer_for(frames, 100, num_envs=2), FrameReplayBuffer)
    plain = replay_buffer_for(frames, 100, num_envs=2, frame_dedup=False)
    assert type(plain) is ReplayBuffer and plain._data["obs"].dtype == np.uint8
    assert type(replay_buffer_for(vector, 100)) is ReplayBuffer
    with pytest.raises(ValueError, match="frame_dedup"):
        replay_buffer_for(vector, 100, frame_dedup=True)


def test_frame_dedup_config_key_is_validated_and_chooses_the_pipeline_buffer():
    from easydict import EasyDict

    from ding_dist.config.rules import value_errors
    from ding_dist.entry.factories import make_replay_buffer

    key = {"policy": {"other": {"replay_buffer": {"frame_dedup": 5}}}}
    assert value_errors(key) == [
        "config key 'policy.other.replay_buffer.frame_dedup' must be True, False or None (auto), got 5"
    ]
    frames, actions = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8), gym.spaces.Discrete(6)
    for dedup, cls in ((None, FrameReplayBuffer), (True, FrameReplayBuffer), (False, ReplayBuffer)):
        assert value_errors({"policy": {"other": {"replay_buffer": {"frame_dedup": dedup}}}}) == []
        cfg = EasyDict(policy={"discount_factor": 0.99, "other": {"replay_buffer": {"frame_dedup": dedup}}})
        assert type(make_replay_buffer(cfg, frames, actions, num_envs=2, capacity=100, seed=0)) is cls
