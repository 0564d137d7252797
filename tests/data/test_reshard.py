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


def _hashes(states: list[dict]) -> Counter:
    """Every stored transition of plain or prioritized states, its truncated flag left out (regrouping marks the
    cuts), with its priority leaf when there is one."""
    found: Counter = Counter()
    for state in states:
        s = state.get("storage", state)
        leaves = np.asarray(state["priorities"]).reshape(s["shape"][0], s["shape"][1]) if "storage" in state else None
        for row in range(s["rows"]):
            for slot in range(s["shape"][1]):
                fields = [np.asarray(v[row, slot]).tobytes() for k, v in sorted(s["data"].items()) if k != "truncated"]
                if leaves is not None:
                    fields.append(leaves[row, slot].tobytes())
                found[hashlib.sha256(b"".join(fields)).hexdigest()] += 1
    return found


def _shards(steps: list[int], envs: int = 4, capacity: int = 80) -> list[ReplayBuffer]:
    """Actor shards of an actor-learner run, each filled for its own number of steps (not in lock step)."""
    out = []
    for i, n in enumerate(steps):
        b = ReplayBuffer(capacity, (2,), num_envs=envs, seed=0)
        for t in range(n):
            g = 100 * i + np.arange(envs)
            obs = np.stack([g, np.full(envs, t)], axis=1).astype(np.float32)
            b.add(obs, g % 3, (g + t).astype(np.float32), obs + 0.5, (t + g) % 7 == 0, np.zeros(envs, bool))
        out.append(b)
    return out


@pytest.mark.parametrize(
    "old, targets, lock_step",
    [
        ("dp2", [(8, 20)], False),  # 2 data-parallel ranks -> 1 learner, 1 actor of all 8 envs
        ("dp2", [(4, 40), (4, 40)], False),  # -> 1 or 2 learners with 2 actors of 4 envs each
        ("dp4", [(8, 20), (8, 20), (8, 20)], False),  # -> 3 actors of 8 envs: each old slot cut over columns
        ("al", [(4, 20), (4, 20)], True),  # 2 actor shards of 4 envs (11 and 5 rows) -> 2 data-parallel ranks
        ("al", [(8, 20)], True),  # -> 1 process
    ],
)
def test_regrouped_between_the_modes_every_transition_is_kept_once(old, targets, lock_step):
    from ding_dist.data.reshard import regroup_states

    before = {"dp2": lambda: _run(2, 7), "dp4": lambda: _run(4, 30), "al": lambda: _shards([11, 5])}[old]()
    states = [b.state_dict() for b in before]
    after = [regroup_states(states, targets, k, lock_step=lock_step) for k in range(len(targets))]
    assert sum(s["rows"] * s["shape"][1] for s in after) == sum(len(b) for b in before)
    assert _hashes(after) == _hashes(states)  # nothing dropped, nothing duplicated
    if lock_step:
        assert len({s["rows"] for s in after}) == 1
    for s in after:  # each column's newest row is marked truncated (new envs follow it), or it terminated
        assert (s["data"]["truncated"][s["rows"] - 1] | s["data"]["terminated"][s["rows"] - 1]).all()
        b = ReplayBuffer(s["shape"][0] * s["shape"][1], (2,), num_envs=s["shape"][1], seed=1)
        b.load_state_dict(s)
        assert len(b.sample(8)["obs"]) == 8
    # Each new column holds old slots' stretches in time order, and a cut between two old slots is truncated.
    seams = 0
    for s in after:
        d = s["data"]
        steps, owner = d["obs"][: s["rows"], :, 1], d["obs"][: s["rows"], :, 0]
        same = owner[1:] == owner[:-1]
        assert (steps[1:][same] == steps[:-1][same] + 1).all()
        assert (d["truncated"][:-1][~same] | d["terminated"][:-1][~same]).all()
        seams += int((~same).sum())
    # dp2: columns of 7 rows = the old slots; dp4: old slots of 20 in columns of 7, 7, 6 rows: 7 of its 7 inner
    # ends fall inside a column; al: slots of 11 and 5 rows in columns of 8: 7 of 7.
    assert seams == {"dp2": 0, "dp4": 7, "al": 7}[old]


def test_regrouping_drops_only_what_cannot_fit_oldest_first_and_keeps_priorities():
    from ding_dist.data.prioritized import PrioritizedReplayBuffer
    from ding_dist.data.reshard import regroup_states

    shards = []
    for i, steps in enumerate((11, 6)):  # 44 + 24 = 68 transitions: 2 lock-step ranks of 4 slots take 64
        p = PrioritizedReplayBuffer(ReplayBuffer(80, (2,), num_envs=4, seed=0), alpha=0.5)
        p.add(_shards([steps])[0].state_dict()["data"], priority=np.arange(steps * 4).reshape(steps, 4) + i)
        p.draws = 7 + i
        shards.append(p.state_dict())
    after = [regroup_states(shards, [(4, 40), (4, 40)], k, lock_step=True) for k in range(2)]
    assert [a["storage"]["rows"] for a in after] == [8, 8] and after[1]["draws"] == 8
    dropped = _hashes(shards) - _hashes(after)
    assert sum(dropped.values()) == 4 and not _hashes(after) - _hashes(shards)
    kept_steps = after[0]["storage"]["data"]["obs"][:, :, 1]
    assert kept_steps.min() == 1  # the longest slot (11 steps) gave up its oldest step 0, nothing newer
    new = PrioritizedReplayBuffer(ReplayBuffer(160, (2,), num_envs=4, seed=0), alpha=0.5)
    new.load_state_dict(after[0])
    assert len(new) == 32 and new.tree.total == pytest.approx(after[0]["priorities"].sum())
