"""The collective layer: everything that touches torch.distributed goes through here.

Every helper works the same in a plain single process (the fake link: a world of one) and in a real
process group started by ``dist_init`` (torchrun, SLURM, ``launch`` or explicit arguments).
"""

from .collectives import (
    all_to_all_single,
    allgather,
    allgather_into_tensor,
    allreduce,
    allreduce_async,
    allreduce_data,
    allreduce_with_indicator,
    barrier,
    broadcast,
    get_global_rank,
    irecv,
    isend,
    recv,
    reduce_data,
    reduce_op,
    send,
)
from .debug import (
    CollectiveMismatchError,
    DeadRankError,
    DesyncError,
    check_consistency,
    debug_enabled,
    health_check,
    set_debug,
)
from .groups import get_group, simple_group_split
from .helpers import error_wrapper, to_ddp_config
from .init import (
    DDPContext,
    DistContext,
    dist_finalize,
    dist_init,
    dist_mode,
    get_local_rank,
    get_local_size,
    get_rank,
    get_world_size,
    is_fake,
)
from .launch import LaunchError, launch
from .link import CommHandle, SingleProcessGroup
from .objects import (
    ObjectFuture,
    allgather_object,
    allreduce_object,
    allreduce_object_async,
    broadcast_object,
    broadcast_object_list,
)
from .settings import LaunchSettings, expand_slurm_nodelist, free_port, resolve_launch_settings, resolve_timeout

__all__ = [
    "CollectiveMismatchError",
    "DeadRankError",
    "DesyncError",
    "check_consistency",
    "debug_enabled",
    "health_check",
    "set_debug",
    "CommHandle",
    "DDPContext",
    "DistContext",
    "LaunchError",
    "LaunchSettings",
    "ObjectFuture",
    "SingleProcessGroup",
    "all_to_all_single",
    "allgather",
    "allgather_into_tensor",
    "get_global_rank",
    "allgather_object",
    "allreduce",
    "allreduce_async",
    "allreduce_data",
    "allreduce_object",
    "allreduce_object_async",
    "allreduce_with_indicator",
    "barrier",
    "broadcast",
    "broadcast_object",
    "broadcast_object_list",
    "dist_finalize",
    "dist_init",
    "dist_mode",
    "error_wrapper",
    "expand_slurm_nodelist",
    "free_port",
    "get_group",
    "get_local_rank",
    "get_local_size",
    "get_rank",
    "get_world_size",
    "irecv",
    "is_fake",
    "isend",
    "launch",
    "recv",
    "reduce_data",
    "reduce_op",
    "resolve_launch_settings",
    "resolve_timeout",
    "send",
    "simple_group_split",
    "to_ddp_config",
]
