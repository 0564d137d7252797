"""Replay buffers re-sharded over another number of ranks: every stored transition kept, none duplicated.

A data-parallel run of ``N`` ranks steps ``collector_env_num`` env slots in all, ``collector_env_num / N`` on each
rank (``ding_dist.config.split``), and every rank writes one row of its slots per vector step, in lock step. So the
replay of the whole run is one ring of ``rows x collector_env_num`` transitions, cut into ``N`` column blocks, and
every block has the same rows and the same write position. On ``M`` ranks the same ring is cut into ``M``
blocks: rank ``r`` takes global slots ``[r E / M, (r + 1) E / M)`` with each slot's transitions in their time
order, so n-step returns still never cross a slot.

Example::

    states = [load_checkpoint(f"ckpt/replay_rank{q}.pt")["buffer"] for q in range(4)]   # a 4-rank run
    mine = reshard_states(states, rank=0, parts=2)   # rank 0 of 2: the old ranks 0 and 1's slots
    buffer.load_state_dict(mine)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["old_ranks_of", "reshard_states"]


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
