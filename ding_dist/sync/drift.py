"""How far apart ranks' weights are: the drift that weight-averaging algorithms allow between averagings."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ding_dist import comm

__all__ = ["weight_drift"]


def weight_drift(model: nn.Module, group: Any = None) -> float:
    """Max over ranks of ``||x_r - mean(x)|| / ||mean(x)||`` for the model's parameters (0.0 when equal).

    Two collectives (an allreduce of the parameters, one of a scalar); every rank of ``group`` calls it and
    gets the same value. Meant for logs, not for every step.

    Example:
        >>> weight_drift(nn.Linear(2, 2))   # a world of one
        0.0
    """
    params = [p.detach() for p in model.parameters()]
    if not params or comm.get_world_size(group) == 1:
        return 0.0
    device = comm.comm_device(group, like=params[0])
    flat = torch.cat([p.reshape(-1).to(device=device, dtype=torch.float64) for p in params])
    mean = flat.clone()
    comm.allreduce(mean, op="sum", group=group)
    mean.div_(comm.get_world_size(group))
    ratio = ((flat - mean).norm() / mean.norm().clamp_min(1e-30)).reshape(1)
    comm.allreduce(ratio, op="max", group=group)
    return float(ratio.item())
