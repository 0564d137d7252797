"""Building a run's parts from its compiled config: the policy (with the run seed's initial parameters), the replay
buffer of the policy's kind and its per-rank capacity, the env manager's type.

Example::

    policy = build_policy(cfg, venv.single_observation_space, venv.single_action_space)
    buffer = make_replay_buffer(cfg, obs_space, act_space, num_envs=8, capacity=replay_capacity(cfg, 2), seed=0)
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import gymnasium as gym
import numpy as np
import torch
from easydict import EasyDict

from ding_dist.comm import resolve_device
from ding_dist.policy import Policy, get_policy_cls

if TYPE_CHECKING:  # the buffers are imported where one is made: an on-policy run needs none
    from ding_dist.data.frame_replay import FrameReplayBuffer
    from ding_dist.data.prioritized import PrioritizedReplayBuffer
    from ding_dist.data.replay import ReplayBuffer
    from ding_dist.data.sequence_replay import SequenceReplayBuffer

__all__ = ["build_policy", "env_manager", "make_replay_buffer", "replay_capacity"]


def env_manager(cfg: EasyDict) -> str:
    """``create_config.env_manager.type`` (``sync`` when unset)."""
    return ((cfg.create_config.get("env_manager") or {}).get("type")) or "sync"


def build_policy(
    cfg: EasyDict, obs_space: gym.Space, action_space: gym.Space, device: str | torch.device | None = None
) -> Policy:
    """The config's policy on ``device`` (default ``policy.device``), with the run seed's initial parameters.

    Example::

        policy = build_policy(cfg, venv.single_observation_space, venv.single_action_space)
    """
    policy_cls = get_policy_cls(cfg.create_config.policy.type)
    # Same seed on every rank: identical initial parameters (the sync engine also broadcasts rank 0's).
    torch.manual_seed(cfg.seed)
    device = resolve_device(cfg.policy.get("device", "auto") if device is None else device)
    if device.type == "cuda":  # the rank's GPU becomes its current one (ranks on the CPU never touch CUDA)
        torch.cuda.set_device(device)
    return policy_cls(cfg.policy, obs_space, action_space, device)


def make_replay_buffer(
    cfg: EasyDict, obs_space: gym.Space, act_space: gym.Space, num_envs: int, capacity: int, seed: int
) -> ReplayBuffer | FrameReplayBuffer | PrioritizedReplayBuffer | SequenceReplayBuffer:
    """A replay buffer of ``capacity`` transitions over ``num_envs`` env slots for the config's policy.

    Stacked uint8 frames (Atari) get a :class:`~ding_dist.data.frame_replay.FrameReplayBuffer` that stores
    each frame once, unless ``policy.other.replay_buffer.frame_dedup`` is False (True: required). With
    ``policy.priority`` the storage is wrapped in a :class:`~ding_dist.data.prioritized.PrioritizedReplayBuffer`
    (``other.replay_buffer.alpha``, ``beta``, ``anneal_step``): one shard per rank (or actor), sampled with the
    others as one prioritized replay (:func:`~ding_dist.data.prioritized_shards.draw_prioritized`).
    A recurrent policy (R2D2) gets a :class:`~ding_dist.data.sequence_replay.SequenceReplayBuffer` (``policy.sequence``;
    uniform, ``alpha=0``, without ``policy.priority``).

    Example::

        buffer = make_replay_buffer(cfg, obs_space, act_space, num_envs=8, capacity=100_000, seed=0)
    """
    from ding_dist.data.frame_replay import replay_buffer_for
    from ding_dist.data.prioritized import PrioritizedReplayBuffer
    from ding_dist.data.sequence_replay import SequenceReplayBuffer

    p = cfg.policy
    discrete = isinstance(act_space, gym.spaces.Discrete)
    policy_type = ((cfg.get("create_config") or {}).get("policy") or {}).get("type")  # absent: a plain replay
    policy_cls = get_policy_cls(policy_type) if policy_type else None
    if getattr(policy_cls, "recurrent", False):  # R2D2: sequences with their recurrent start states
        policy_cls.check_sequence_config(p)
        s, rb = p.sequence, p.other.replay_buffer
        return SequenceReplayBuffer(
            capacity, obs_space.shape, obs_dtype=obs_space.dtype, action_shape=() if discrete else act_space.shape,
            action_dtype=np.int64 if discrete else np.float32, num_envs=num_envs,
            state_shapes=policy_cls.recurrent_state_shapes(p), seq_len=s.seq_len, burnin=s.burnin, overlap=s.overlap,
            alpha=rb.alpha if p.priority else 0.0, beta=rb.beta, anneal_step=rb.anneal_step, seed=seed,
        )  # fmt: skip
    storage = replay_buffer_for(
        obs_space,
        capacity,
        frame_dedup=p.other.replay_buffer.get("frame_dedup"),
        action_shape=() if discrete else act_space.shape,
        action_dtype=np.int64 if discrete else np.float32,
        num_envs=num_envs,
        n_step=p.get("nstep", 1),
        gamma=p.discount_factor,
        seed=seed,
    )
    if not p.get("priority", False):
        return storage
    rb = p.other.replay_buffer
    return PrioritizedReplayBuffer(storage, alpha=rb.alpha, beta=rb.beta, anneal_step=rb.anneal_step)


def replay_capacity(cfg: EasyDict, parts: int) -> int:
    """One of ``parts`` equal shares of the global ``replay_buffer_size`` (rounded up).

    Example::

        replay_capacity(cfg, parts=2)  # half the global replay on each of 2 ranks
    """
    return math.ceil(cfg.policy.other.replay_buffer.replay_buffer_size / parts)
