"""Data: replay buffers and distributed samplers (load-balancing by sample complexity).

Names are imported on first use (PEP 562): an on-policy run imports no replay buffer.

Example:
    >>> from ding_dist.data import ReplayBuffer
"""

from __future__ import annotations

from ding_dist._lazy import lazy_names

_NAMES = {
    "FrameReplayBuffer": ".frame_replay",
    "replay_buffer_for": ".frame_replay",
    "PrioritizedReplayBuffer": ".prioritized",
    "SumMinTree": ".prioritized",
    "ReplayBuffer": ".replay",
    "ReplayShards": ".replay_shards",
    "LoadBalancingDistributedBatchSampler": ".samplers",
    "LoadBalancingDistributedSampler": ".samplers",
}

__all__ = sorted(_NAMES)
__getattr__, __dir__ = lazy_names(__name__, _NAMES)
