"""Data: replay buffers and distributed samplers (load-balancing by sample complexity).

Names are imported on first use (PEP 562): an on-policy run imports no replay buffer.

Example:
    >>> from ding_dist.data import ReplayBuffer
"""

from __future__ import annotations

import importlib
from typing import Any

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


def __getattr__(name: str) -> Any:
    module = _NAMES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_NAMES])
