"""The sequence replay (R2D2): sequences cut across rollouts and episode ends hold the right steps and start
states, the sequence priority formula, prioritized draws and checkpoints."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ding_dist.data.sequence_replay import SequenceReplayBuffer, sequence_priority


def _stream(steps: int, envs: int, ends: dict[int, list[int]]) -> dict[str, np.ndarray]:
    """Every field names its step: obs = 100 * env + step, h = -(that); ``ends[env]``: steps that terminate."""
    label = (100 * np.arange(envs)[None, :] + np.arange(steps)[:, None]).astype(np.float32)
    terminated = np.zeros((steps, envs), dtype=bool)
    for env, at in ends.items():
        terminated[at, env] = True
    return {
        "obs": label[..., None],
        "action": (label % 3).astype(np.int64),
        "reward": label / 10,
        "next_obs": label[..., None] + 0.5,
        "terminated": terminated,
        "truncated": np.zeros((steps, envs), dtype=bool),
        "h": -label[..., None].repeat(2, axis=2),
        "c": label[..., None].repeat(2, axis=2),
    }


def _buffer(**kw) -> SequenceReplayBuffer:
    args = dict(num_envs=2, state_shapes={"h": (2,), "c": (2,)}, seq_len=4, burnin=1, overlap=2, seed=0)
    return SequenceReplayBuffer(1000, (1,), **{**args, **kw})


def _stored(buf: SequenceReplayBuffer) -> list[tuple[list[float], float, int, int]]:
    """(valid obs labels, the start state's h label, burn-in, valid steps) of each stored sequence, in order."""
    d = buf._data
    out = []
    for s in range(len(buf)):
        valid = int(d["mask"][s].sum())
        out.append((d["obs"][s, : valid + 1, 0].tolist(), float(d["h"][s, 0]), int(d["burnin"][s]), valid))
    return out


def test_sequences_cross_rollouts_and_end_at_episode_ends_with_their_start_states():
    whole = _stream(12, 2, ends={0: [5]})  # env 0's episode ends at step 5; env 1 runs on
    buf = _buffer()
    for lo, hi in ((0, 3), (3, 7), (7, 12)):  # three chunks: sequences cross their boundaries
        buf.add({k: v[lo:hi] for k, v in whole.items()})
    got = _stored(buf)
    # seq_len 4, overlap 2: a new sequence every 2 steps; position `valid` holds the last step's next_obs (+0.5)
    assert got == [
        ([0, 1, 2, 3, 3.5], 0.0, 0, 4),  # env 0, the episode's start: no burn-in
        ([100, 101, 102, 103, 103.5], -100.0, 0, 4),  # env 1
        ([2, 3, 4, 5, 5.5], -2.0, 1, 4),  # env 0: full at its episode's end
        ([102, 103, 104, 105, 105.5], -102.0, 1, 4),
        ([104, 105, 106, 107, 107.5], -104.0, 1, 4),
        ([6, 7, 8, 9, 9.5], -6.0, 0, 4),  # env 0's next episode starts afresh at step 6
        ([106, 107, 108, 109, 109.5], -106.0, 1, 4),
        ([8, 9, 10, 11, 11.5], -8.0, 1, 4),
        ([108, 109, 110, 111, 111.5], -108.0, 1, 4),
    ]
    d = buf._data
    np.testing.assert_array_equal(d["reward"][2], np.float32([0.2, 0.3, 0.4, 0.5]))
    np.testing.assert_array_equal(d["terminated"][2], [False, False, False, True])
    np.testing.assert_array_equal(d["c"][2], [2.0, 2.0])


def test_an_episode_end_pads_the_sequence_and_burnin_only_sequences_are_dropped():
    buf = _buffer(seq_len=5, burnin=2, overlap=3)
    buf.add(_stream(9, 2, ends={0: [1, 6], 1: [7]}))
    assert _stored(buf) == [
        ([0, 1, 1.5], 0.0, 0, 2),  # env 0: a 2-step episode, padded; learned from its first step
        ([100, 101, 102, 103, 104, 104.5], -100.0, 0, 5),
        ([2, 3, 4, 5, 6, 6.5], -2.0, 0, 5),  # env 0's second episode ends with the sequence: the next opens fresh
        ([102, 103, 104, 105, 106, 106.5], -102.0, 2, 5),
        ([104, 105, 106, 107, 107.5], -104.0, 2, 4),  # episode end after 4 valid steps: padded
    ]
    d = buf._data
    np.testing.assert_array_equal(d["mask"][4], [True, True, True, True, False])
    np.testing.assert_array_equal(d["terminated"][4], [False, False, False, True, False])
    assert d["obs"][0, 3:, 0].tolist() == [0.0, 0.0, 0.0] and d["reward"][0, 2:].tolist() == [0.0, 0.0, 0.0]
    drop = _buffer(num_envs=1, seq_len=4, burnin=3, overlap=2)
    drop.add(_stream(6, 1, ends={0: [4]}))  # [0..3] stored; [2, 3, 4] ends: 3 valid, all burn-in: dropped
    assert [g[0][0] for g in _stored(drop)] == [0]
    drop.add(_stream(4, 1, ends={}))  # step 5 of the first stream opened a fresh sequence: [5, 0, 1, 2] (labels)
    assert [(g[0][0], g[2]) for g in _stored(drop)] == [(0, 0), (5, 0)]


def test_sequence_priority_is_eta_max_plus_rest_mean_over_the_mask():
    td = torch.tensor([[1.0, -3.0, 10.0], [2.0, 2.0, 2.0], [5.0, 5.0, 5.0]])
    mask = torch.tensor([[True, True, False], [True, True, True], [False, False, False]])
    got = sequence_priority(td, mask, eta=0.9)
    torch.testing.assert_close(got, torch.tensor([0.9 * 3 + 0.1 * 2, 2.0, 0.0]))


def test_prioritized_draws_weights_updates_and_checkpoint():
    buf = _buffer(alpha=1.0, beta=1.0)
    buf.add(_stream(12, 2, ends={}))  # 10 sequences
    assert len(buf) == 10
    index = np.arange(10)
    buf.update_priorities(index, np.where(index == 3, 9.0, 1.0) - 1e-6)  # sequence 3: priority 9, others 1
    batch, weights, drawn = buf.sample(18)
    counts = np.bincount(drawn, minlength=10)
    assert counts[3] == 9 and (np.delete(counts, 3) == 1).all()  # stratified: 9/18 of the mass, one per segment
    torch.testing.assert_close(weights, torch.where(torch.as_tensor(drawn) == 3, 1 / 9, 1.0).float())
    assert batch["obs"].shape == (18, 5, 1) and batch["h"].shape == (18, 2) and batch["burnin"].dtype == torch.int64
    state = buf.state_dict()
    again = _buffer(alpha=1.0, beta=1.0)
    again.load_state_dict(state)
    assert _stored(again) == _stored(buf) and again.max_priority == buf.max_priority
    np.testing.assert_array_equal(again.sample_indices(18)[0], drawn)  # same priorities, same strata
    with pytest.raises(ValueError, match="no per-step priority"):
        buf.add(_stream(1, 2, ends={}), priority=np.ones((1, 2)))
    with pytest.raises(ValueError, match="must be longer than burnin"):
        _buffer(seq_len=3, burnin=3)


def test_rows_are_allocated_as_sequences_arrive_and_kept_across_growth_and_checkpoints():
    """A replay of 10000 sequences of stacked frames (DI-engine's Atari R2D2: 26 GB at capacity) allocates rows
    as they fill: the first 64, then doubling; what growth copies is the same, and a checkpoint restores it."""
    big = SequenceReplayBuffer(10000 * 4, (4, 84, 84), num_envs=1, seq_len=4, burnin=0, overlap=0,
                               obs_dtype=np.uint8, seed=0)  # fmt: skip
    assert big.capacity == 10000 and big.nbytes() < 10000 * 5 * 4 * 84 * 84 / 100
    small = _buffer()
    stream = _stream(100, 2, {})
    small.add({k: v[:40] for k, v in stream.items()})
    before = _stored(small)
    assert len(before) < 64 and len(small._data["burnin"]) == 64
    small.add({k: v[40:] for k, v in stream.items()})
    assert len(small) > 64 and len(small._data["burnin"]) == 128  # grown once: 64 -> 128 rows
    restored = _buffer()
    restored.load_state_dict(small.state_dict())
    assert _stored(small)[: len(before)] == before and _stored(restored) == _stored(small)


def test_each_draw_takes_one_slot_per_equal_stratum_and_beta_rises_per_draw():
    buf = _buffer(alpha=1.0, beta=0.5, anneal_step=4)
    buf.add(_stream(12, 2, ends={}))  # 10 sequences at priority 1: total mass 10
    assert buf.beta == 0.5
    for draws in (1, 2, 3):
        drawn, _ = buf.sample_indices(5)  # strata of mass 10 / 5 = 2: slots {0, 1}, {2, 3}, ... {8, 9}
        np.testing.assert_array_equal(drawn // 2, np.arange(5))
        assert buf.draws == draws
    assert buf.beta == 0.5 + 0.5 * 3 / 4
