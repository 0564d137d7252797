"""Experience from actors to learners: fixed-size chunks in preallocated byte buffers, sent point to point.

A *chunk* is one rollout of an actor (``[T, num_envs, ...]`` fields, as :class:`~ding_dist.worker.Collector`
returns them) plus a header: the actor, its chunk number, the **policy version** that collected it, the
actor's env-step count, the episodes it finished since its previous chunk and its timings, and a checksum
of the payload. Every chunk of a run has the same :class:`ChunkLayout`, so both sides preallocate their
buffers once and a chunk is one ``isend``/``irecv`` of a flat ``uint8`` tensor (never pickled).

- :class:`ExperienceSender` (actor): ``actor_buffers`` buffers; a thread sends the filled ones in order.
  :meth:`~ExperienceSender.acquire` waits while every buffer is in flight: the actor blocks when its learner
  falls behind.
- :class:`ExperienceReceiver` (learner): ``queue`` chunks per actor, one receiving thread per actor (gloo
  point-to-point requests cannot be polled, so a thread waits on each). Its receive is posted ahead: while
  the learner learns, the actor's next chunk arrives into a preallocated buffer (:attr:`~ExperienceReceiver.ready`
  counts those waiting), so the learner that finishes an update finds it there, and the actor's send completes
  without waiting for the learner. In ``block`` mode a thread stops receiving while its actor's ``queue``
  buffers are full (its actor then blocks once its own buffers are in flight); ``queue=0`` is the on-demand
  mode: a chunk is received only when the learner asks for the next one, so the actor collects its following
  chunk with the weights of that moment (the least lag; the learner then waits for each transfer). In
  ``drop`` mode it keeps receiving and drops the actor's oldest unconsumed chunk beyond ``queue`` (the actor
  never waits; the drop is counted).
- :class:`ReplayShards`: one replay buffer per actor on a learner (each keeps its env slots in time order).

Example::

    layout = chunk_layout(policy, obs_space, num_envs=8, steps=32)
    sender = ExperienceSender(layout, learner_rank=0, group=pair_group)      # on the actor
    receiver = ExperienceReceiver(layout, {1: pair_group})                  # on the learner
"""

from __future__ import annotations

import collections
import logging
import math
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from ding_dist.comm import get_world_size, irecv, isend
from ding_dist.data.prioritized import PrioritizedReplayBuffer
from ding_dist.data.prioritized_shards import draw_prioritized
from ding_dist.data.replay import ReplayBuffer

__all__ = [
    "Chunk",
    "ChunkHeader",
    "ChunkLayout",
    "ExperienceReceiver",
    "ExperienceSender",
    "ReplayShards",
    "chunk_layout",
]

logger = logging.getLogger(__name__)

# The wire format of a chunk's header, known to this module only: slots of ``meta`` (int64) ...
_KIND, _ACTOR, _SEQ, _VERSION, _ENV_STEPS, _EPISODES, _CHECKSUM, _ENV_RESTARTS = range(8)
N_META = 8
# ... and of ``stats`` (float64): episode sums since the previous chunk, then the actor's cumulative timings.
_RETURN_SUM, _LENGTH_SUM, _WALL_S, _WAIT_WEIGHTS_S, _WAIT_SEND_S, _EPSILON = range(6)
N_STATS = 8
# Chunk kinds: experience, and the actor's last message (it stops; nothing follows).
_DATA, _LAST = 1, 2
ROLLOUT_FIELDS = ("obs", "action", "reward", "next_obs", "terminated", "truncated")


def _torch_dtype(dtype: Any) -> torch.dtype:
    return dtype if isinstance(dtype, torch.dtype) else torch.from_numpy(np.zeros(0, dtype=dtype)).dtype


class ChunkLayout:
    """Named fields of fixed shape and dtype at fixed offsets of one flat ``uint8`` buffer (8-byte aligned).

    The fields ``meta`` (int64) and ``stats`` (float64) form the header; the rest is the payload the
    checksum covers.

    Example::

        layout = ChunkLayout({"reward": ((32, 8), np.float32)})
        buf = layout.new_buffer()
        layout.views(buf)["reward"].shape  # torch.Size([32, 8])
    """

    def __init__(self, fields: Mapping[str, tuple[tuple[int, ...], Any]]) -> None:
        spec = {"meta": ((N_META,), np.int64), "stats": ((N_STATS,), np.float64), **fields}
        self.fields: dict[str, tuple[tuple[int, ...], torch.dtype, int, int]] = {}
        offset = 0
        for name, (shape, dtype) in spec.items():
            dtype = _torch_dtype(dtype)
            nbytes = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
            self.fields[name] = (tuple(int(s) for s in shape), dtype, offset, nbytes)
            offset += -(-nbytes // 8) * 8
        self.payload_start = self.fields[next(iter(fields))][2] if fields else offset
        self.nbytes = offset
        n = self.nbytes - self.payload_start
        self._weights = torch.arange(n, dtype=torch.int64) % 251 + 1  # position-weighted byte sum

    def new_buffer(self) -> torch.Tensor:
        return torch.zeros(self.nbytes, dtype=torch.uint8)

    def views(self, buf: torch.Tensor) -> dict[str, torch.Tensor]:
        """Tensors viewing ``buf`` (no copy), one per field."""
        return {
            name: buf[offset : offset + nbytes].view(dtype).view(shape)
            for name, (shape, dtype, offset, nbytes) in self.fields.items()
        }

    def checksum(self, buf: torch.Tensor) -> int:
        """Position-weighted sum of the payload bytes: a reordered, lost or changed byte changes it."""
        return int((buf[self.payload_start :].to(torch.int64) * self._weights).sum())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ChunkLayout) and self.fields == other.fields


def chunk_layout(policy: Any, obs_space: gym.Space, num_envs: int, steps: int) -> ChunkLayout:
    """The layout of a chunk of ``steps`` vector steps of ``num_envs`` envs for ``policy``.

    The action dtype and the policy's extras (PPO: ``logp``, ``value``) come from one dry run of
    ``policy.collect_action`` on sampled observations, with every RNG left as it was. A policy whose
    ``sends_priority`` is true (prioritized DQN: Ape-X) adds ``priority`` (float32 ``[T, num_envs]``), which the
    actor fills with ``policy.initial_priority(rollout)``.

    Example::

        layout = chunk_layout(policy, venv.single_observation_space, num_envs=8, steps=32)
    """
    obs = np.stack([obs_space.sample() for _ in range(num_envs)]).astype(obs_space.dtype)
    devices = [policy.device.index or 0] if policy.device.type == "cuda" else []
    np_state = np.random.get_state()
    with torch.random.fork_rng(devices=devices, device_type="cuda"):
        action, extras = policy.collect_action(obs, 0)
    np.random.set_state(np_state)
    step, obs_shape = (steps, num_envs), tuple(obs_space.shape)
    fields: dict[str, tuple[tuple[int, ...], Any]] = {
        "obs": ((*step, *obs_shape), obs_space.dtype),
        "action": ((*step, *action.shape[1:]), action.dtype),
        "reward": (step, np.float32),
        "next_obs": ((*step, *obs_shape), obs_space.dtype),
        "terminated": (step, np.bool_),
        "truncated": (step, np.bool_),
    }
    for name, value in sorted(extras.items()):
        fields[name] = ((*step, *value.shape[1:]), value.dtype)
    if getattr(policy, "sends_priority", False):
        fields["priority"] = (step, np.float32)
    fields["last_obs"] = ((num_envs, *obs_shape), obs_space.dtype)
    return ChunkLayout(fields)


@dataclass(frozen=True)
class ChunkHeader:
    """What an actor says about a chunk: who sent it (``actor`` rank, its ``seq`` number), the policy
    ``version`` that collected it, the actor's total ``env_steps``, the ``episodes`` it finished since its
    previous chunk with their ``return_sum`` and ``length_sum``, and its cumulative timings (seconds since it
    started, waiting for weights, waiting for its learner) and its collector envs recreated after a crash so far
    (``env_restarts``), and the exploration ``epsilon`` it collected with (NaN: a policy without one)."""

    actor: int
    seq: int
    version: int
    env_steps: int
    episodes: int = 0
    return_sum: float = 0.0
    length_sum: float = 0.0
    wall_s: float = 0.0
    wait_weights_s: float = 0.0
    wait_send_s: float = 0.0
    env_restarts: int = 0
    epsilon: float = float("nan")


@dataclass(frozen=True)
class Chunk(ChunkHeader):
    """A received chunk: its header, ``rollout`` (numpy views of the learner's buffer, valid until released),
    the buffer ``slot`` and how many chunks still waited behind it (``queue_depth``)."""

    slot: int = 0
    queue_depth: int = 0
    rollout: dict[str, np.ndarray] = field(default_factory=dict)


# ------------------------------------------------------------------------------------------- actor side
class ExperienceSender:
    """The actor's side: fill a free buffer (:meth:`acquire`), then :meth:`send` it; a thread does the sends.

    Example::

        sender = ExperienceSender(layout, learner_rank=0, group=pair_group, buffers=2)
        slot = sender.acquire()                  # waits while every buffer is in flight
        sender.send(slot, rollout, ChunkHeader(actor=1, seq=0, version=3, env_steps=256))
        sender.finish()                          # the last message; the thread ends after it
    """

    def __init__(self, layout: ChunkLayout, learner_rank: int, group: Any, buffers: int = 2) -> None:
        self.layout, self.learner_rank, self.group = layout, learner_rank, group
        self._buffers = [layout.new_buffer() for _ in range(buffers)]
        self._views = [layout.views(b) for b in self._buffers]
        self._free: collections.deque[int] = collections.deque(range(buffers))
        self._pending: collections.deque[int] = collections.deque()
        self._cv = threading.Condition()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._send_loop, name="experience-sender", daemon=True)
        self._thread.start()

    def _send_loop(self) -> None:
        while True:
            with self._cv:
                self._cv.wait_for(lambda: self._pending)
                slot = self._pending[0]
            try:
                isend(self._buffers[slot], self.learner_rank, self.group).wait()
            except BaseException as e:  # the learner went away
                with self._cv:
                    self.error = e
                    self._cv.notify_all()
                return
            last = int(self._views[slot]["meta"][_KIND]) == _LAST
            with self._cv:
                self._pending.popleft()
                self._free.append(slot)
                self._cv.notify_all()
            if last:
                return

    def _raise_if_failed(self) -> None:
        if self.error is not None:
            raise ConnectionError(f"sending experience to learner rank {self.learner_rank} failed: {self.error}")

    def acquire(self, stop: threading.Event | None = None) -> int | None:
        """A free buffer slot; waits while all are in flight (the learner is behind). None if ``stop`` is set
        first."""
        with self._cv:
            while not self._free:
                self._raise_if_failed()
                if stop is not None and stop.is_set():
                    return None
                self._cv.wait(0.05)
            self._raise_if_failed()
            return self._free.popleft()

    def send(self, slot: int, rollout: Mapping[str, np.ndarray], header: ChunkHeader) -> None:
        """Write ``rollout`` (the layout's fields, ``[T, num_envs, ...]``) and ``header`` into buffer ``slot`` (from
        :meth:`acquire`) and queue it for sending; the checksum is added here."""
        views = self._views[slot]
        for name, value in rollout.items():
            views[name].copy_(torch.from_numpy(np.asarray(value)))
        meta, stats = views["meta"], views["stats"]
        meta[_ACTOR], meta[_SEQ], meta[_VERSION] = header.actor, header.seq, header.version
        meta[_ENV_STEPS], meta[_EPISODES] = header.env_steps, header.episodes
        meta[_ENV_RESTARTS], stats[_EPSILON] = header.env_restarts, header.epsilon
        stats[_RETURN_SUM], stats[_LENGTH_SUM] = header.return_sum, header.length_sum
        stats[_WALL_S], stats[_WAIT_WEIGHTS_S], stats[_WAIT_SEND_S] = (
            header.wall_s, header.wait_weights_s, header.wait_send_s,
        )  # fmt: skip
        self._queue(slot, _DATA)

    def _queue(self, slot: int, kind: int) -> None:
        meta = self._views[slot]["meta"]
        meta[_KIND] = kind
        meta[_CHECKSUM] = self.layout.checksum(self._buffers[slot])
        with self._cv:
            self._raise_if_failed()
            self._pending.append(slot)
            self._cv.notify_all()

    def finish(self, timeout: float | None = None) -> None:
        """Send the last message (after every queued chunk) and wait until the thread has sent it."""
        slot = self.acquire()
        if slot is not None:
            self._views[slot]["meta"].zero_()
            self._queue(slot, _LAST)
        self._thread.join(timeout)
        self._raise_if_failed()


# ----------------------------------------------------------------------------------------- learner side
class ExperienceReceiver:
    """The learner's side: ``queue`` buffers per actor, filled by one receiving thread per actor.

    :meth:`next` returns the oldest received chunk (any actor) and :meth:`release` gives its buffer back.
    A dead actor (its connection closed) is reported by :meth:`next` raising :class:`ActorLost` once;
    :meth:`drain` (at the end) discards what arrives until every live actor has sent its last message.

    Example::

        receiver = ExperienceReceiver(layout, {1: group_1, 2: group_2}, queue=2, drop_when_full=False)
        chunk = receiver.next()
        learn(chunk.rollout)
        receiver.release(chunk)
    """

    def __init__(
        self, layout: ChunkLayout, groups: Mapping[int, Any], queue: int = 2, drop_when_full: bool = False
    ) -> None:
        self.layout = layout
        self.drop_when_full = drop_when_full
        self.queue = max(queue, 1) if drop_when_full else queue
        # Drop mode receives before it drops: room for the queue, the chunk being consumed and the one arriving.
        n_buffers = self.queue + 2 if drop_when_full else max(queue, 1)
        self._wanted = False  # queue 0: a chunk is received only once next() asks for one
        self._buffers = {a: [layout.new_buffer() for _ in range(n_buffers)] for a in groups}
        self._views = {a: [layout.views(b) for b in bufs] for a, bufs in self._buffers.items()}
        self._free = {a: collections.deque(range(n_buffers)) for a in groups}
        self._ready: collections.deque[tuple[int, int]] = collections.deque()  # (actor, slot), oldest first
        self._cv = threading.Condition()
        self._draining = False
        self.dropped = 0  # chunks overwritten before they were consumed (drop mode)
        self.lost: dict[int, str] = {}  # actor rank -> why its connection ended
        self._reported: set[int] = set()
        self.finished: set[int] = set()  # actors that sent their last message
        self._threads = [
            threading.Thread(target=self._receive_loop, args=(a, g), name=f"experience-from-{a}", daemon=True)
            for a, g in groups.items()
        ]
        for t in self._threads:
            t.start()

    @property
    def ready(self) -> int:
        """Chunks received and waiting for :meth:`next` (all actors)."""
        with self._cv:
            return len(self._ready)

    def wait_ready(self, n: int = 1, timeout: float | None = None) -> bool:
        """Wait until at least ``n`` chunks are received and waiting (true), or ``timeout`` seconds (false);
        false at once when no actor can send any more.

        Example::

            receiver.wait_ready(1, timeout=30)  # the next chunk arrived while the learner was busy
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cv:
            while len(self._ready) < n:
                if all(a in self.lost or a in self.finished for a in self._buffers):
                    return False
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cv.wait(0.5 if left is None else min(left, 0.5))
            return True

    @property
    def live_actors(self) -> list[int]:
        with self._cv:
            return [a for a in self._buffers if a not in self.lost and a not in self.finished]

    def _take_slot(self, actor: int) -> int:
        with self._cv:  # block mode: until the learner consumes one (queue 0: until it asks for the next)
            self._cv.wait_for(lambda: self._free[actor] and (self.queue > 0 or self._wanted or self._draining))
            return self._free[actor].popleft()

    def _keep_newest(self, actor: int) -> None:
        """Drop mode: overwrite this actor's oldest unconsumed chunks beyond the queue (lock held)."""
        mine = [i for i, (a, _) in enumerate(self._ready) if a == actor]
        for i in reversed(mine[: max(0, len(mine) - self.queue)]):
            self._free[actor].append(self._ready[i][1])
            del self._ready[i]
            self.dropped += 1

    def _receive_loop(self, actor: int, group: Any) -> None:
        while True:
            slot = self._take_slot(actor)
            buf = self._buffers[actor][slot]
            try:
                irecv(buf, actor, group).wait()
            except BaseException as e:  # the actor went away
                with self._cv:
                    self.lost[actor] = " ".join(str(e).split())[:300] or type(e).__name__
                    self._free[actor].append(slot)
                    self._cv.notify_all()
                return
            meta = self._views[actor][slot]["meta"]
            with self._cv:
                if int(meta[_KIND]) == _LAST:
                    self.finished.add(actor)
                    self._free[actor].append(slot)
                    self._cv.notify_all()
                    return
                if self.layout.checksum(buf) != int(meta[_CHECKSUM]):
                    self.lost[actor] = f"chunk {int(meta[_SEQ])} arrived corrupted (checksum mismatch)"
                    self._cv.notify_all()
                    return
                if self._draining:
                    self._free[actor].append(slot)
                else:
                    self._ready.append((actor, slot))
                    self._wanted = False
                    if self.drop_when_full:
                        self._keep_newest(actor)
                self._cv.notify_all()

    def next(self, timeout: float | None = None) -> Chunk:
        """The oldest received chunk; waits for one. Raises :class:`ActorLost` once per actor that died (its
        rank and why), and ``TimeoutError`` after ``timeout`` seconds without a chunk."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cv:
            while True:
                for actor, why in self.lost.items():
                    if actor not in self._reported:
                        self._reported.add(actor)
                        raise ActorLost(actor, why, [a for a in self._buffers if a not in self.lost])
                if self._ready:
                    depth = len(self._ready) - 1  # chunks still waiting behind this one
                    actor, slot = self._ready.popleft()
                    break
                if not self._wanted:
                    self._wanted = True
                    self._cv.notify_all()
                if all(a in self.lost or a in self.finished for a in self._buffers):
                    raise ActorLost(-1, "no actor is left", [])
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError(f"no experience arrived within {timeout:g} s")
                self._cv.wait(0.5 if left is None else min(left, 0.5))
        v = self._views[actor][slot]
        meta, stats = v["meta"].tolist(), v["stats"].tolist()
        rollout = {k: t.numpy() for k, t in v.items() if k not in ("meta", "stats")}
        return Chunk(
            actor=actor,
            seq=meta[_SEQ],
            version=meta[_VERSION],
            env_steps=meta[_ENV_STEPS],
            episodes=meta[_EPISODES],
            return_sum=stats[_RETURN_SUM],
            length_sum=stats[_LENGTH_SUM],
            wall_s=stats[_WALL_S],
            wait_weights_s=stats[_WAIT_WEIGHTS_S],
            wait_send_s=stats[_WAIT_SEND_S],
            env_restarts=meta[_ENV_RESTARTS],
            epsilon=stats[_EPSILON],
            slot=slot,
            queue_depth=depth,
            rollout=rollout,
        )

    def release(self, chunk: Chunk) -> None:
        """Give the chunk's buffer back for receiving (its ``rollout`` views become invalid)."""
        with self._cv:
            self._free[chunk.actor].append(chunk.slot)
            self._cv.notify_all()

    def drain(self) -> None:
        """From now on discard what arrives, until each live actor's last message."""
        with self._cv:
            self._draining = True
            while self._ready:
                actor, slot = self._ready.popleft()
                self._free[actor].append(slot)
            self._cv.notify_all()

    def join(self, timeout: float) -> list[int]:
        """Wait up to ``timeout`` seconds for the receiving threads; returns the actors still not finished."""
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        return self.live_actors


class ActorLost(ConnectionError):
    """An actor's connection ended (it died or stopped); ``rank == -1`` when no actor is left at all."""

    def __init__(self, rank: int, why: str, left: list[int]) -> None:
        what = "no actor is left" if rank < 0 else f"actor rank {rank} is gone ({why})"
        super().__init__(what)
        self.rank, self.why, self.left = rank, why, left

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.rank, self.why, self.left)


# ------------------------------------------------------------------------------------------ replay shards
class ReplayShards:
    """One replay buffer per actor (each actor's env slots stay in time order); batches mix all shards.

    Prioritized shards (:class:`~ding_dist.data.prioritized.PrioritizedReplayBuffer`, ``policy.priority``): one
    prioritized replay over every shard of every learner (:func:`~ding_dist.data.prioritized_shards.draw_prioritized`:
    a shard's share of the batch follows its priority sum, the weights use the global minimum); :meth:`sample`
    returns ``(batch, weights, indices)``, :meth:`update_priorities` sends each priority back to its shard, and
    :meth:`extend` takes a chunk's ``priority`` field (Ape-X: computed by the actor) as its transitions' first
    priorities. Uniform shards: each batch split over the shards in proportion to their sizes.

    Example::

        shards = ReplayShards({1: buffer_a, 2: buffer_b})
        shards.extend(rollout, shard=1)
        batch = shards.sample(64)  # uniform: about 32 from each, in proportion to their sizes
    """

    _STRIDE = 1 << 40  # a prioritized index is shard position * _STRIDE + index in that shard

    def __init__(self, shards: Mapping[int, ReplayBuffer | PrioritizedReplayBuffer]) -> None:
        self.shards = dict(shards)
        kinds = {bool(getattr(b, "prioritized", False)) for b in self.shards.values()}  # also sequence replay
        if len(kinds) > 1:
            raise ValueError("replay shards must be all prioritized or all uniform")
        self.prioritized = kinds == {True}

    def __len__(self) -> int:
        return sum(len(b) for b in self.shards.values())

    def extend(self, rollout: Mapping[str, np.ndarray], shard: int) -> None:
        """Add a rollout to ``shard``; prioritized shards take its ``priority`` field (the actor's ``|delta|``,
        Ape-X) when it has one, else the shard's current maximum priority."""
        if self.prioritized and "priority" in rollout:
            self.shards[shard].add(rollout, priority=rollout["priority"])
        else:
            self.shards[shard].extend(rollout)

    def sample(self, batch_size: int, device: str | torch.device = "cpu", group: Any = None) -> Any:
        """``batch_size`` transitions (uniform: split over the shards in proportion to their sizes).

        Prioritized: ``(batch, weights, indices)``, this learner's draws of a global batch of ``batch_size`` times
        the ranks of ``group`` (the learners; every one calls it) over every learner's shards, so the rows vary
        around ``batch_size`` with the priority mass held here. With none of the batch here, the batch is one
        transition of weight 0 and ``indices`` is empty (the learner weights its gradient 0 and updates no
        priority).
        """
        if not self.prioritized:
            return self._sample_uniform(batch_size, device)
        buffers = list(self.shards.values())
        draws = draw_prioritized(buffers, batch_size * get_world_size(group), group)
        parts = [(pos, buffers[pos].gather(i, w, device)) for pos, (i, w) in enumerate(draws) if len(i)]
        if not parts:  # a stand-in for this learner's step, counted 0 times
            pos = next((p for p, b in enumerate(buffers) if len(b)), None)
            if pos is None:
                raise ValueError("cannot sample from an empty replay buffer (this learner's shards hold nothing)")
            index = buffers[pos].tree.find(np.zeros(1))
            batch, weights, _ = buffers[pos].gather(index, np.zeros(1), device)
            return batch, weights, np.zeros(0, dtype=np.int64)
        batch = {key: torch.cat([part[0][key] for _, part in parts]) for key in parts[0][1][0]}
        indices = np.concatenate([pos * self._STRIDE + part[2] for pos, part in parts])
        return batch, torch.cat([part[1] for _, part in parts]), indices

    def _sample_uniform(self, batch_size: int, device: str | torch.device) -> dict[str, torch.Tensor]:
        sizes = {k: len(b) for k, b in self.shards.items() if len(b)}
        if not sizes:
            raise ValueError("cannot sample from an empty replay buffer")
        total = sum(sizes.values())
        counts = {k: batch_size * n // total for k, n in sizes.items()}
        for k in sorted(sizes, key=lambda k: -sizes[k])[: batch_size - sum(counts.values())]:
            counts[k] += 1
        parts = [self.shards[k].sample(n, device) for k, n in counts.items() if n]
        return {key: torch.cat([p[key] for p in parts]) for key in parts[0]}

    def update_priorities(self, indices: np.ndarray, priorities: Any) -> None:
        """Send each of ``priorities`` (``|delta|``) to the shard that :meth:`sample` drew its index from."""
        if isinstance(priorities, torch.Tensor):
            priorities = priorities.detach().cpu().numpy()
        p = np.asarray(priorities).reshape(-1)
        shard, index = np.divmod(np.asarray(indices, dtype=np.int64).reshape(-1), self._STRIDE)
        for pos, buffer in enumerate(self.shards.values()):
            mine = shard == pos
            if mine.any():
                buffer.update_priorities(index[mine], p[mine])

    def state_dict(self) -> dict[str, Any]:
        return {"shards": {k: b.state_dict() for k, b in self.shards.items()}}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        saved = state["shards"]
        if sorted(saved) != sorted(self.shards):
            raise ValueError(f"replay shards of actors {sorted(saved)} saved, this learner has {sorted(self.shards)}")
        for k, b in self.shards.items():
            b.load_state_dict(saved[k])
