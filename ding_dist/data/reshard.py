"""Replay buffers re-sharded over another number of ranks: every stored transition kept, none duplicated.

A data-parallel run of ``N`` ranks steps ``collector_env_num`` env slots in all, ``collector_env_num / N`` on each
rank (``ding_dist.config.split``), and every rank writes one row of its slots per vector step, in lock step. So the
replay of the whole run is one ring of ``rows x collector_env_num`` transitions, cut into ``N`` column blocks, and
every block has the same rows and the same write position. On ``M`` ranks the same ring is cut into ``M``
blocks: rank ``r`` takes global slots ``[r E / M, (r + 1) E / M)`` with each slot's transitions in their time
order, so n-step returns still never cross a slot.

Between the modes (a data-parallel run resumed as actors and learners, and back, or an actor-learner run at
another split) the buffers are not written in lock step (each actor fills its learner's shard at its own pace):
:func:`regroup_states` takes every stored slot's transitions, oldest first, and lays them out column by column
over the new buffers, with the last transition of each old slot and of each new column marked truncated (the env
stream was cut there: an n-step return stops and bootstraps, as at the newest row).

Example::

    states = [load_checkpoint(f"ckpt/replay_rank{q}.pt")["buffer"] for q in range(4)]   # a 4-rank run
    mine = reshard_states(states, rank=0, parts=2)   # rank 0 of 2: the old ranks 0 and 1's slots
    buffer.load_state_dict(mine)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["old_ranks_of", "regroup_states", "reshard_states"]


def _slots(state: Mapping[str, Any]) -> int:
    return int(state["shape"][1])


def old_ranks_of(rank: int, parts: int, old_parts: int) -> list[int]:
    """The ranks of an ``old_parts``-rank run whose slots rank ``rank`` of ``parts`` takes (equal blocks).

    Example:
        >>> old_ranks_of(0, parts=2, old_parts=4), old_ranks_of(1, parts=4, old_parts=2)
        ([0, 1], [0])
    """
    lcm = np.lcm(parts, old_parts)  # blocks of lcm / parts old "units" per new rank, lcm / old_parts per old rank
    first, last = rank * (lcm // parts), (rank + 1) * (lcm // parts) - 1
    return list(range(first // (lcm // old_parts), last // (lcm // old_parts) + 1))


def _in_time_order(array: np.ndarray, pos: int, rows: int, rows_capacity: int) -> np.ndarray:
    """The stored rows oldest first (a full ring's oldest row is at the write position)."""
    return np.concatenate([array[pos:rows], array[:pos]]) if rows == rows_capacity else array[:rows]


def reshard_states(
    states: Sequence[Mapping[str, Any]] | Callable[[int], Mapping[str, Any]],
    rank: int,
    parts: int,
    old_parts: int | None = None,
    rows_capacity: int | None = None,
) -> dict[str, Any]:
    """Rank ``rank`` of ``parts``' replay state from the states of the old ranks (a list, or a function of the old
    rank that loads one: only the old ranks this rank needs are asked for).

    Works on :class:`~ding_dist.data.replay.ReplayBuffer` states (``data`` arrays ``[rows, slots, ...]``); every old
    state must have the same rows and write position (the ranks wrote in lock step), else ``ValueError``. With
    ``rows_capacity`` (the new buffer's, when its ring is another length) the rows are laid out oldest first and
    only the newest ``rows_capacity`` are kept. The sampler state is not carried (``rng`` is None: the new rank
    keeps its own).

    Example::

        mine = reshard_states([state_0, state_1], rank=0, parts=1)   # 2 ranks -> 1: every slot of both
    """
    if callable(states):
        if old_parts is None:
            raise ValueError("reshard_states with a loader needs old_parts")
        load = states
    else:
        old_parts = len(states)
        listed = list(states)
        load = listed.__getitem__
    if not (isinstance(parts, int) and parts >= 1 and 0 <= rank < parts and old_parts >= 1):
        raise ValueError(f"rank {rank} of {parts} (from {old_parts} old ranks) is not a valid split")
    wanted = old_ranks_of(rank, parts, old_parts)
    parts_of = {q: load(q) for q in wanted}
    first = parts_of[wanted[0]]
    if "frames" in first:
        raise ValueError("a frame-deduplicated replay (FrameReplayBuffer) cannot be re-sharded over other ranks")
    slots_per_old = _slots(first)
    total = slots_per_old * old_parts
    if total % parts:
        raise ValueError(f"{total} env slots of the replay cannot be split over {parts} ranks")
    for q, s in parts_of.items():
        if _slots(s) != slots_per_old or int(s["rows"]) != int(first["rows"]) or int(s["pos"]) != int(first["pos"]):
            raise ValueError(
                f"replay of old rank {q} has {_slots(s)} slots, rows {s['rows']}, position {s['pos']}; rank "
                f"{wanted[0]}'s has {slots_per_old}, {first['rows']}, {first['pos']}: not written in lock step"
            )
    per_new = total // parts
    lo, hi = rank * per_new, (rank + 1) * per_new  # global slots of this rank
    data: dict[str, np.ndarray] = {}
    for key in first["data"]:
        columns = []
        for q in wanted:
            a, b = max(lo, q * slots_per_old), min(hi, (q + 1) * slots_per_old)
            columns.append(np.asarray(parts_of[q]["data"][key])[:, a - q * slots_per_old : b - q * slots_per_old])
        data[key] = np.concatenate(columns, axis=1)
    old_capacity, _, obs_shape, action_shape = first["shape"]
    pos, rows = int(first["pos"]), int(first["rows"])
    if rows_capacity is not None and int(rows_capacity) != int(old_capacity):
        keep = min(rows, int(rows_capacity))
        data = {k: _in_time_order(v, pos, rows, int(old_capacity))[rows - keep :] for k, v in data.items()}
        rows, pos, old_capacity = keep, keep % int(rows_capacity), int(rows_capacity)
    return {
        "data": data,
        "pos": pos,
        "rows": rows,
        "rng": None,
        "shape": (int(old_capacity), per_new, tuple(obs_shape), tuple(action_shape)),
    }


def _slot_series(state: Mapping[str, Any]) -> list[dict[str, np.ndarray]]:
    """Each slot's stored transitions oldest first (``[length, ...]`` per field); a prioritized state's leaves (its
    transitions' priorities, already raised to ``alpha``) as the field ``"_leaf"``."""
    storage = state["storage"] if "storage" in state else state
    if "frames" in storage:
        raise ValueError("a frame-deduplicated replay (FrameReplayBuffer) cannot be re-sharded over other ranks")
    capacity, slots = int(storage["shape"][0]), int(storage["shape"][1])
    pos, rows = int(storage["pos"]), int(storage["rows"])
    data = {k: _in_time_order(np.asarray(v), pos, rows, capacity) for k, v in storage["data"].items()}
    if "storage" in state:
        leaves = np.asarray(state["priorities"], dtype=np.float64).reshape(capacity, slots)[:rows]
        data["_leaf"] = _in_time_order(leaves, pos, rows, capacity)
    return [{k: v[:, slot] for k, v in data.items()} for slot in range(slots)]


def _rows_of(total: int, targets: Sequence[tuple[int, int]], lock_step: bool) -> list[int]:
    """Rows of each target ``(slots, rows_capacity)`` so that as many of ``total`` transitions as fit are placed
    (every column of a buffer holds its rows; ``lock_step``: the same rows in every buffer)."""
    slots = [int(t[0]) for t in targets]
    caps = [int(t[1]) for t in targets]
    if lock_step:
        return [min(total // sum(slots), min(caps))] * len(targets)
    rows, left = [0] * len(targets), total
    while True:
        open_ = [k for k in range(len(targets)) if rows[k] < caps[k] and slots[k] <= left]
        if not open_:
            return rows
        per = max(1, left // sum(slots[k] for k in open_))
        for k in open_:
            add = min(per, caps[k] - rows[k], left // slots[k])
            rows[k] += add
            left -= add * slots[k]


def _kept_lengths(lengths: np.ndarray, kept: int) -> np.ndarray:
    """How many of each slot's newest transitions to keep, ``kept`` in all: the longest slots (the oldest
    transitions, since every slot ends where its run stopped) give up their oldest first."""
    if kept >= lengths.sum():
        return lengths.copy()
    lo, hi = 0, int(lengths.max())
    while lo < hi:  # the smallest cap h with sum(min(length, h)) >= kept
        h = (lo + hi) // 2
        lo, hi = (h + 1, hi) if np.minimum(lengths, h).sum() < kept else (lo, h)
    level = lo
    out = np.minimum(lengths, level)
    extra = int(out.sum()) - kept
    at_level = np.flatnonzero(out == level)[:extra]
    out[at_level] -= 1
    return out


def regroup_states(
    states: Sequence[Mapping[str, Any]], targets: Sequence[tuple[int, int]], index: int, lock_step: bool = False
) -> dict[str, Any]:
    """The state of new buffer ``index`` of ``targets`` (``(slots, rows_capacity)`` of every new buffer, in order)
    from the old buffers' ``states`` (in order): every old slot's transitions, oldest first, concatenated, and cut
    into the new buffers' columns (buffer by buffer, column by column).

    Works on :class:`~ding_dist.data.replay.ReplayBuffer` states and on prioritized ones (``storage`` plus
    ``priorities``: each transition keeps its priority; the result is then prioritized too, with the old buffers'
    largest ``max_priority`` and ``draws``). The buffers fill as evenly as their capacity allows
    (``lock_step``: the same rows in each, as data-parallel ranks write them); what does not fit (at most the
    new buffers' slots minus one, or beyond their capacity) is dropped oldest first. The last transition of each
    old slot and of each new column is marked truncated unless it terminated: the env stream was cut there, so an
    n-step return stops and bootstraps from its ``next_obs``. The sampler state is not carried (``rng`` None).

    Example::

        # a 2-rank data-parallel run's replay (2 slots each) on one learner with two actors of 4 envs
        shard = regroup_states([rank0, rank1], targets=[(4, 64), (4, 64)], index=1)
    """
    if len({"storage" in s for s in states}) > 1:
        raise ValueError("replay states to regroup must be all prioritized or all uniform")
    series = [s for state in states for s in _slot_series(state)]
    if not series:
        raise ValueError("no replay state to regroup")
    if not 0 <= index < len(targets):
        raise ValueError(f"buffer {index} of {len(targets)} targets")
    lengths = np.array([len(s["reward"]) for s in series], dtype=np.int64)
    rows = _rows_of(int(lengths.sum()), targets, lock_step)
    kept = _kept_lengths(lengths, sum(int(t[0]) * r for t, r in zip(targets, rows)))
    lo = sum(int(t[0]) * r for t, r in zip(targets[:index], rows[:index]))
    slots, r = int(targets[index][0]), rows[index]
    hi = lo + slots * r
    pieces: list[dict[str, np.ndarray]] = []
    start = 0  # stream position of the series' first kept transition
    for s, length, keep in zip(series, lengths, kept):
        if keep and start < hi and start + keep > lo:
            part = {k: v[length - keep :] for k, v in s.items()}
            part["truncated"] = part["truncated"].copy()
            part["truncated"][-1] |= ~part["terminated"][-1]  # the old slot's stream ends here
            a, b = max(lo, start) - start, min(hi, start + keep) - start
            pieces.append({k: v[a:b] for k, v in part.items()})
        start += int(keep)
    first = states[0]["storage"] if "storage" in states[0] else states[0]
    _, _, obs_shape, action_shape = first["shape"]
    data = {}
    for key in series[0]:
        flat = np.concatenate([p[key] for p in pieces]) if pieces else series[0][key][:0]
        data[key] = np.ascontiguousarray(np.swapaxes(flat.reshape(slots, r, *flat.shape[1:]), 0, 1))
    if r:
        data["truncated"][-1] |= ~data["terminated"][-1]  # each column's newest row: new envs follow it
    leaf = data.pop("_leaf", None)
    capacity = int(targets[index][1])
    storage = {
        "data": data,
        "pos": r % capacity,
        "rows": r,
        "rng": None,
        "shape": (capacity, slots, tuple(obs_shape), tuple(action_shape)),
    }
    if leaf is None:
        return storage
    leaves = np.zeros(capacity * slots, dtype=np.float64)
    leaves[: r * slots] = leaf.reshape(-1)
    return {
        "storage": storage,
        "priorities": leaves,
        "max_priority": max(float(s["max_priority"]) for s in states),
        "draws": max(int(s["draws"]) for s in states),
    }
