"""The actor-learner channels over real gloo processes: experience chunks and versioned weights."""

from __future__ import annotations

import hashlib
import threading
import time

import numpy as np
import pytest
import torch
from torch import nn

from ding_dist.comm import get_rank
from ding_dist.data.replay_shards import ReplayShards
from ding_dist.entry.roles import RoleGroups, Roles
from ding_dist.worker.experience import (
    ChunkHeader,
    ChunkLayout,
    ExperienceReceiver,
    ExperienceSender,
)
from ding_dist.worker.weight_sync import WeightPublisher, WeightSubscriber

FIELDS = {"obs": ((16, 4, 3), np.float32), "action": ((16, 4), np.int64), "done": ((16, 4), np.bool_)}
CHUNKS = 20


def _digest(tensors: dict[str, torch.Tensor]) -> str:
    return hashlib.sha256(b"".join(tensors[k].numpy().tobytes() for k in FIELDS)).hexdigest()


def _fill(fields: dict[str, torch.Tensor], seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    fields["obs"].copy_(torch.randn(fields["obs"].shape, generator=g))
    fields["action"].copy_(torch.randint(0, 1000, fields["action"].shape, generator=g))
    fields["done"].copy_(torch.rand(fields["done"].shape, generator=g) < 0.1)


def _rollout(seed: int) -> dict[str, np.ndarray]:
    """Arrays of the FIELDS' shapes and dtypes, as an actor hands them to its channel."""
    fields = {k: torch.zeros(shape, dtype=torch.from_numpy(np.zeros(0, dtype)).dtype) for k, (shape, dtype) in
              FIELDS.items()}  # fmt: skip
    _fill(fields, seed)
    return {k: t.numpy() for k, t in fields.items()}


def test_checksum_sees_a_changed_and_a_swapped_byte():
    layout = ChunkLayout(FIELDS)
    buf = layout.new_buffer()
    _fill(layout.views(buf), seed=0)
    base = layout.checksum(buf)
    changed = buf.clone()
    changed[layout.payload_start + 5] ^= 1
    swapped = buf.clone()
    i = layout.payload_start
    swapped[i], swapped[i + 1] = buf[i + 1].item(), buf[i].item()
    assert buf[i] != buf[i + 1]
    assert layout.checksum(changed) != base and layout.checksum(swapped) != base
    header = buf.clone()
    layout.views(header)["meta"][:4] = 7  # the header is not part of the payload
    assert layout.checksum(header) == base


def _chunks_between_two_actors_and_a_learner():
    roles = Roles(learners=1, actors=2)
    groups = RoleGroups.create(roles)
    layout = ChunkLayout(FIELDS)
    rank = get_rank()
    if rank == 0:
        receiver = ExperienceReceiver(layout, {a: groups.experience[a] for a in (1, 2)}, queue=1)
        got = []
        for _ in range(2 * CHUNKS):
            chunk = receiver.next(timeout=60)
            got.append((chunk.actor, chunk.seq, chunk.version, _digest({k: torch.from_numpy(v)
                        for k, v in chunk.rollout.items()})))  # fmt: skip
            receiver.release(chunk)
        receiver.drain()
        left = receiver.join(30)
        return got, left, receiver.dropped
    sender = ExperienceSender(layout, 0, groups.experience[rank], buffers=2)
    sent = []
    for seq in range(CHUNKS):
        slot = sender.acquire()
        rollout = _rollout(seed=1000 * rank + seq)
        sent.append((rank, seq, seq // 3, _digest({k: torch.from_numpy(v) for k, v in rollout.items()})))
        sender.send(slot, rollout, ChunkHeader(actor=rank, seq=seq, version=seq // 3, env_steps=0))
    sender.finish(timeout=30)
    return sent


def test_chunks_arrive_intact_and_in_order_from_each_actor(run_ranks):
    (got, left, dropped), sent_1, sent_2 = run_ranks(_chunks_between_two_actors_and_a_learner, 3)
    assert left == [] and dropped == 0
    assert [g for g in got if g[0] == 1] == sent_1  # every chunk, in order, byte for byte (sha256), header too
    assert [g for g in got if g[0] == 2] == sent_2
    assert len({g[3] for g in got}) == 2 * CHUNKS  # the fills differ: the comparison could fail


def _learner_that_does_not_consume(mode: str):
    roles = Roles(learners=1, actors=1)
    groups = RoleGroups.create(roles)
    layout = ChunkLayout(FIELDS)
    if get_rank() == 0:
        queue = 0 if mode == "on_demand" else 1
        receiver = ExperienceReceiver(layout, {1: groups.experience[1]}, queue, drop_when_full=mode == "drop")
        deadline = time.monotonic() + 30
        while mode == "drop" and receiver.dropped < CHUNKS - 1 and time.monotonic() < deadline:
            time.sleep(0.01)  # the actor sends everything; the receiving thread keeps only the newest
        time.sleep(0.0 if mode == "drop" else 2.0)  # the actor meanwhile blocks
        # Received ahead: the chunk is in the learner's buffer before next() asks (on demand: not yet).
        ready = [receiver.ready if mode == "on_demand" else int(receiver.wait_ready(1, timeout=30))]
        first = receiver.next(timeout=30)
        seq, dropped = first.seq, receiver.dropped
        receiver.release(first)  # ... and the following one arrives while the learner is busy (learning)
        ready.append(receiver.ready if mode == "on_demand" else int(receiver.wait_ready(1, timeout=30)))
        receiver.drain()
        return seq, dropped, ready, receiver.join(30)
    sender = ExperienceSender(layout, 0, groups.experience[1], buffers=1)
    stop, acquired = threading.Event(), 0
    timer = threading.Timer(1.0, stop.set)
    timer.start()
    for seq in range(CHUNKS):
        slot = sender.acquire(stop=None if mode == "drop" else stop)
        if slot is None:
            break
        sender.send(slot, _rollout(seq), ChunkHeader(actor=1, seq=seq, version=0, env_steps=0))
        acquired += 1
    timer.join()
    sender.finish(timeout=30)
    return acquired


@pytest.mark.parametrize("mode", ["block", "on_demand", "drop"])
def test_a_full_learner_blocks_its_actor_or_keeps_only_the_newest_chunk(run_ranks, mode):
    (seq, dropped, ready, left), acquired = run_ranks(_learner_that_does_not_consume, 2, mode)
    assert left == []
    if mode == "block":  # one chunk in the learner's buffer, one in the actor's: the third waits
        assert (acquired, seq, dropped, ready) == (2, 0, 0, [1, 1])
    elif mode == "on_demand":  # queue 0: nothing is received before the learner asks, the second chunk waits
        assert (acquired, seq, dropped, ready) == (1, 0, 0, [0, 0])
    else:  # the actor never waits; the learner overwrote each unconsumed chunk with the next one
        assert (acquired, seq, dropped, ready) == (CHUNKS, CHUNKS - 1, CHUNKS - 1, [1, 0])


class _Net:
    """The smallest policy-like object the weight channel needs: the tensors it publishes (``named_weights``)."""

    def __init__(self) -> None:
        self.model = nn.Linear(4, 3)
        self.scale = torch.zeros(2)

    def named_weights(self) -> dict[str, torch.Tensor]:
        return {**{f"model.{k}": v for k, v in self.model.state_dict(keep_vars=True).items()}, "scale": self.scale}

    @torch.no_grad()
    def fill(self, value: float) -> None:
        for t in (*self.model.parameters(), self.scale):
            t.fill_(value)


VERSIONS = 300


def _weights_from_learner_to_actor():
    roles = Roles(learners=1, actors=1)
    groups = RoleGroups.create(roles)
    net = _Net()
    if get_rank() == 0:
        publisher = WeightPublisher(net, [1], groups.weights)
        for version in range(VERSIONS + 1):
            net.fill(float(version))
            publisher.publish(version, train_iter=10 * version, env_steps=100 * version, stop=version == VERSIONS)
            time.sleep(0.001)
        return publisher.join(30), publisher.lost
    subscriber = WeightSubscriber(net, source=0, group=groups.weights)
    seen = []
    subscriber.wait_first(timeout=30)
    while True:
        values = {float(v) for t in (*net.model.parameters(), net.scale) for v in t.flatten()}
        seen.append((subscriber.version, subscriber.train_iter, subscriber.env_steps, values))
        if subscriber.stop.is_set() and not subscriber.poll():
            break
        while not subscriber.poll() and not subscriber.stop.is_set():
            time.sleep(0.0005)
    return seen, subscriber.received


def test_actor_weights_are_versioned_whole_and_only_get_newer(run_ranks):
    (joined, lost), (seen, received) = run_ranks(_weights_from_learner_to_actor, 2)
    assert joined and lost == {}
    versions = [s[0] for s in seen]
    assert versions == sorted(set(versions)), "versions strictly increase at the actor"
    assert versions[-1] == VERSIONS  # the stop version is the last one loaded
    assert len(versions) >= 3 and received >= len(set(versions)) - 1
    for version, train_iter, env_steps, values in seen:  # never a mix of two versions
        assert (train_iter, env_steps, values) == (10 * version, 100 * version, {float(version)})


def test_replay_shards_split_batches_by_size():
    from ding_dist.data.replay import ReplayBuffer

    shards = ReplayShards({a: ReplayBuffer(64, (2,), num_envs=2, seed=a) for a in (1, 2)})
    rows = {"obs": np.zeros((8, 2, 2), np.float32), "action": np.zeros((8, 2), np.int64),
            "reward": np.zeros((8, 2), np.float32), "next_obs": np.zeros((8, 2, 2), np.float32),
            "terminated": np.zeros((8, 2), bool), "truncated": np.zeros((8, 2), bool)}  # fmt: skip
    shards.extend(rows, shard=1)
    assert len(shards) == 16 and shards.sample(10)["obs"].shape == (10, 2)
    rows["reward"][:] = 1.0
    shards.extend({k: v[:4] for k, v in rows.items()}, shard=2)  # 8 transitions with reward 1
    batch = shards.sample(12)  # 16 : 8 -> 8 from shard 1, 4 from shard 2
    assert batch["reward"].tolist() == [0.0] * 8 + [1.0] * 4


def test_prioritized_replay_shards_send_priorities_back_to_their_shard():
    from ding_dist.data.prioritized import PrioritizedReplayBuffer
    from ding_dist.data.replay import ReplayBuffer

    shards = ReplayShards({a: PrioritizedReplayBuffer(ReplayBuffer(16, (1,), seed=a), alpha=1.0) for a in (3, 5)})
    for a, value in ((3, 0.0), (5, 1.0)):
        rows = {"obs": np.full((8, 1, 1), value, np.float32), "action": np.zeros((8, 1), np.int64),
                "reward": np.full((8, 1), value, np.float32), "next_obs": np.zeros((8, 1, 1), np.float32),
                "terminated": np.zeros((8, 1), bool), "truncated": np.zeros((8, 1), bool)}  # fmt: skip
        shards.extend(rows, shard=a)
    batch, weights, indices = shards.sample(6)  # 3 from each shard
    assert batch["reward"].tolist() == [0.0] * 3 + [1.0] * 3 and weights.shape == (6,)
    shards.update_priorities(indices, torch.arange(6.0))
    for pos, a in enumerate((3, 5)):
        mine = indices // ReplayShards._STRIDE == pos
        assert mine.sum() == 3
        leaves = shards.shards[a].tree.leaves(indices[mine] % ReplayShards._STRIDE)
        np.testing.assert_allclose(leaves, np.arange(6.0)[mine] + 1e-6)
    with pytest.raises(ValueError, match="all prioritized or all uniform"):
        ReplayShards({1: ReplayBuffer(8, (1,)), 2: PrioritizedReplayBuffer(ReplayBuffer(8, (1,)))})


def test_apex_chunks_carry_the_actors_priorities_into_the_learners_shard():
    import gymnasium as gym

    from ding_dist.data.prioritized import PrioritizedReplayBuffer
    from ding_dist.data.replay import ReplayBuffer
    from ding_dist.policy.base import acting_only
    from ding_dist.policy.dqn import DQNPolicy
    from ding_dist.worker.experience import chunk_layout

    obs_space, act_space = gym.spaces.Box(-1.0, 1.0, (3,)), gym.spaces.Discrete(2)
    cfg = DQNPolicy.default_config()
    cfg.model.hidden_sizes = [8]
    with acting_only():  # as actors build theirs (no optimizer)
        assert "priority" not in chunk_layout(DQNPolicy(cfg, obs_space, act_space), obs_space, 2, 4).fields
        cfg.priority = True
        policy = DQNPolicy(cfg, obs_space, act_space)
    layout = chunk_layout(policy, obs_space, num_envs=2, steps=4)
    assert layout.fields["priority"][:2] == ((4, 2), torch.float32)
    rng = np.random.default_rng(0)
    rollout = {"obs": rng.normal(size=(4, 2, 3)).astype(np.float32), "action": rng.integers(0, 2, (4, 2)),
               "reward": rng.normal(size=(4, 2)).astype(np.float32),
               "next_obs": rng.normal(size=(4, 2, 3)).astype(np.float32), "terminated": np.zeros((4, 2), bool),
               "truncated": np.zeros((4, 2), bool), "last_obs": np.zeros((2, 3), np.float32)}  # fmt: skip
    rollout["priority"] = policy.initial_priority(rollout)  # as the actor loop does
    buf = layout.new_buffer()
    views = layout.views(buf)
    for name, value in rollout.items():  # what the sender writes and the receiver reads
        views[name].copy_(torch.from_numpy(value))
    received = {k: t.numpy() for k, t in views.items() if k not in ("meta", "stats")}
    shards = ReplayShards({a: PrioritizedReplayBuffer(ReplayBuffer(16, (3,), num_envs=2), alpha=0.5) for a in (2, 3)})
    shards.extend(received, shard=3)
    leaves = shards.shards[3].tree.leaves(np.arange(8)).reshape(4, 2)
    np.testing.assert_allclose(leaves, (rollout["priority"].astype(np.float64) + 1e-6) ** 0.5)
    assert shards.shards[3].max_priority == max(1.0, float(rollout["priority"].max()) + 1e-6)
    shards.extend({k: v for k, v in received.items() if k != "priority"}, shard=2)  # none sent: the maximum (1)
    np.testing.assert_array_equal(shards.shards[2].tree.leaves(np.arange(8)), np.ones(8))
