"""Replay re-sharded over another number of ranks: every transition kept once, each slot in its time order."""

from __future__ import annotations

import hashlib
from collections import Counter

import numpy as np
import pytest

from ding_dist.data.replay import ReplayBuffer
from ding_dist.data.reshard import old_ranks_of, reshard_states

ENVS = 8  # the run's env slots (collector_env_num)


def _run(world: int, steps: int, capacity: int = 160) -> list[ReplayBuffer]:
    """The replay of each rank of a ``world``-rank run that stepped ``ENVS`` slots for ``steps`` steps: global slot
    ``g`` at step ``t`` stores obs ``[g, t]`` (so every transition is unique and says where it came from)."""
    per = ENVS // world
    buffers = [ReplayBuffer(capacity // world, (2,), num_envs=per, seed=0) for _ in range(world)]
    for t in range(steps):
        for r, b in enumerate(buffers):
            g = np.arange(r * per, (r + 1) * per)
            obs = np.stack([g, np.full(per, t)], axis=1).astype(np.float32)
            b.add(obs, g % 3, (g + t).astype(np.float32), obs + 0.5, (t + g) % 7 == 0, np.zeros(per, bool))
    return buffers


def _transitions(buffers: list[ReplayBuffer]) -> Counter:
    """Every stored transition (row, slot) as a hash of its fields."""
    found: Counter = Counter()
    for b in buffers:
        s = b.state_dict()
        for row in range(s["rows"]):
            for slot in range(s["shape"][1]):
                fields = b"".join(np.asarray(v[row, slot]).tobytes() for _, v in sorted(s["data"].items()))
                found[hashlib.sha256(fields).hexdigest()] += 1
    return found


def _slot_sequences(buffers: list[ReplayBuffer]) -> list[list[int]]:
    """Each global slot's stored steps, oldest first."""
    out = []
    for b in buffers:
        s = b.state_dict()
        obs, pos, rows = s["data"]["obs"], s["pos"], s["rows"]
        ordered = np.concatenate([obs[pos:rows], obs[:pos]]) if rows == s["shape"][0] else obs[:rows]
        out += [ordered[:, slot, 1].astype(int).tolist() for slot in range(s["shape"][1])]
    return out


@pytest.mark.parametrize("old, new", [(4, 2), (2, 1), (1, 2), (2, 4), (4, 1)])
@pytest.mark.parametrize("steps", [7, 30])  # filling, and wrapped around a full ring (20 rows per slot)
def test_every_transition_is_kept_once_in_its_slot_order(old, new, steps):
    before = _run(old, steps)
    states = [b.state_dict() for b in before]
    after = []
    for r in range(new):
        b = ReplayBuffer(160 // new, (2,), num_envs=ENVS // new, seed=1)
        b.load_state_dict(reshard_states(states, rank=r, parts=new))
        after.append(b)
    assert sum(len(b) for b in after) == sum(len(b) for b in before) == ENVS * min(steps, 20)
    assert _transitions(after) == _transitions(before)  # nothing dropped, nothing duplicated
    assert _slot_sequences(after) == _slot_sequences(before)  # global slot g stays slot g, in time order
    assert len(after[0].sample(16)["obs"]) == 16  # the sampler of the new rank works (its own seed)


def test_a_shorter_ring_keeps_the_newest_rows_in_order():
    before = _run(2, 30)  # 20 rows per slot, wrapped
    mine = reshard_states([b.state_dict() for b in before], rank=0, parts=1, rows_capacity=12)
    b = ReplayBuffer(12 * ENVS, (2,), num_envs=ENVS, seed=0)
    b.load_state_dict(mine)
    assert _slot_sequences([b]) == [list(range(18, 30))] * ENVS


def test_only_the_needed_old_ranks_are_loaded():
    assert old_ranks_of(1, parts=2, old_parts=4) == [2, 3] and old_ranks_of(3, parts=4, old_parts=2) == [1]
    assert old_ranks_of(1, parts=3, old_parts=2) == [0, 1]  # a block that straddles two old ranks
    asked = []
    states = [b.state_dict() for b in _run(4, 5)]
    reshard_states(lambda q: asked.append(q) or states[q], rank=1, parts=2, old_parts=4)
    assert asked == [2, 3]


def test_states_not_written_in_lock_step_or_of_frames_are_refused():
    a, b = (x.state_dict() for x in _run(2, 5))
    b["rows"] = 4
    with pytest.raises(ValueError, match="not written in lock step"):
        reshard_states([a, b], rank=0, parts=1)
    with pytest.raises(ValueError, match="cannot be re-sharded"):
        reshard_states([{**a, "frames": np.zeros(1)}], rank=0, parts=2)
    with pytest.raises(ValueError, match="cannot be split over 3 ranks"):
        reshard_states([a, a], rank=0, parts=3)


def test_a_prioritized_replay_is_resharded_with_every_transition_at_the_largest_priority():
    from ding_dist.data.prioritized import PrioritizedReplayBuffer

    old = _run(2, 30)  # two ranks' storages, as a prioritized run saves them inside its state
    states = [{"storage": b.state_dict(), "max_priority": p} for b, p in zip(old, (2.0, 3.0))]
    new = PrioritizedReplayBuffer(ReplayBuffer(160, (2,), num_envs=ENVS, seed=0), alpha=0.5)
    mine = reshard_states(lambda q: states[q]["storage"], 0, 1, 2, rows_capacity=new.storage.rows_capacity)
    new.load_storage_state(mine, max(s["max_priority"] for s in states))
    assert len(new) == sum(len(b) for b in old) == 160 and _transitions([new.storage]) == _transitions(old)
    leaves = np.asarray(new.tree.state_dict()["leaves"])
    assert np.count_nonzero(leaves) == len(new) and set(leaves[leaves > 0].tolist()) == {3.0**0.5}
    batch, weights, index = new.sample(16)
    assert np.array_equal(weights.numpy(), np.ones(16, np.float32)) and index.max() < len(new)
