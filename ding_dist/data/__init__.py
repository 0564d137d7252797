"""Data: replay buffers and distributed samplers (load-balancing by sample complexity)."""

# One re-export line per module (noqa: these imports exist to be re-exported).
from ding_dist.data.frame_replay import FrameReplayBuffer, replay_buffer_for  # noqa: F401
from ding_dist.data.prioritized import PrioritizedReplayBuffer, SumMinTree  # noqa: F401
from ding_dist.data.replay import ReplayBuffer  # noqa: F401
from ding_dist.data.replay_shards import ReplayShards  # noqa: F401
from ding_dist.data.samplers import LoadBalancingDistributedBatchSampler, LoadBalancingDistributedSampler  # noqa: F401
