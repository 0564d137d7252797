"""The collective layer: everything that touches torch.distributed goes through here.

Every helper works the same in a plain single process (the fake link: a world of one) and in a real
process group started by ``dist_init`` (torchrun, SLURM, ``launch`` or explicit arguments).

Submodules load on first use (``ding_dist.comm.processes`` and ``.settings`` need no torch).
"""

from __future__ import annotations

from ding_dist._lazy import lazy_names

_WHERE: dict[str, str] = {
    "all_to_all_single": ".collectives",
    "allgather": ".collectives",
    "allgather_into_tensor": ".collectives",
    "allreduce": ".collectives",
    "allreduce_async": ".collectives",
    "allreduce_data": ".collectives",
    "allreduce_with_indicator": ".collectives",
    "barrier": ".collectives",
    "broadcast": ".collectives",
    "get_global_rank": ".collectives",
    "irecv": ".collectives",
    "isend": ".collectives",
    "recv": ".collectives",
    "reduce_data": ".collectives",
    "reduce_op": ".collectives",
    "send": ".collectives",
    "CollectiveMismatchError": ".debug",
    "DeadRankError": ".debug",
    "DesyncError": ".debug",
    "check_consistency": ".debug",
    "debug_enabled": ".debug",
    "health_check": ".debug",
    "set_debug": ".debug",
    "side_group": ".debug",
    "DeviceMismatchError": ".devices",
    "backend_device_types": ".devices",
    "check_comm_device": ".devices",
    "comm_device": ".devices",
    "rank_cuda_index": ".devices",
    "resolve_device": ".devices",
    "error_wrapper": ".fallbacks",
    "get_group": ".groups",
    "new_group": ".groups",
    "simple_group_split": ".groups",
    "Heartbeat": ".heartbeat",
    "HeartbeatMonitor": ".heartbeat",
    "current_heartbeat": ".heartbeat",
    "heartbeat_running": ".heartbeat",
    "heartbeat_scope": ".heartbeat",
    "start_heartbeat": ".heartbeat",
    "stop_heartbeat": ".heartbeat",
    "watch_heartbeats": ".heartbeat",
    "DDPContext": ".init",
    "DistContext": ".init",
    "dist_finalize": ".init",
    "dist_init": ".init",
    "dist_mode": ".init",
    "get_local_rank": ".init",
    "get_local_size": ".init",
    "get_rank": ".init",
    "get_world_size": ".init",
    "is_fake": ".init",
    "LaunchError": ".launch",
    "launch": ".launch",
    "CommHandle": ".link",
    "SingleProcessGroup": ".link",
    "ObjectFuture": ".objects",
    "allgather_object": ".objects",
    "allreduce_object": ".objects",
    "allreduce_object_async": ".objects",
    "broadcast_object": ".objects",
    "broadcast_object_list": ".objects",
    "LaunchSettings": ".settings",
    "expand_slurm_nodelist": ".settings",
    "free_port": ".settings",
    "resolve_heartbeat": ".settings",
    "resolve_launch_settings": ".settings",
    "resolve_timeout": ".settings",
}

__all__ = sorted(_WHERE)
__getattr__, __dir__ = lazy_names(__name__, _WHERE)
