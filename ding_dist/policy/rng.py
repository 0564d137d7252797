"""Per-update random draws that are the same on every rank and for every world size (IQN's fractions, Rainbow's
noise, TD3's target noise), so N ranks apply the update one process would: :func:`step_generator`,
:func:`parameter_seed` and :func:`global_rows`.
"""

from __future__ import annotations

import hashlib
from typing import Any

import torch
from torch import nn

from ding_dist.comm import get_rank, get_world_size

__all__ = ["global_rows", "parameter_seed", "step_generator"]


def step_generator(base_seed: int, step: int, device: str | torch.device = "cpu") -> torch.Generator:
    """A generator seeded by ``(base_seed, step)``: the same draws on every rank for the same update, with no
    state to checkpoint (a resumed run continues the sequence from its ``train_iter``).

    Example::

        g = step_generator(torch.initial_seed(), policy.train_iter)
        tau = torch.rand(64, 32, generator=g)
    """
    g = torch.Generator(device=device)
    g.manual_seed((int(base_seed) * 1_000_003 + int(step)) % (2**63 - 1))
    return g


def parameter_seed(model: nn.Module) -> int:
    """A seed from ``model``'s first parameter: after :meth:`Policy.distribute` (which gives every rank rank 0's
    initial parameters) the same on every rank, and the one a single process seeded as rank 0 gets, so it can
    seed :func:`step_generator` without a collective.

    Example::

        self.noise_seed = parameter_seed(self.model)  # right after init_q_learning(self, ...)
    """
    first = next(model.parameters()).detach().cpu().numpy().tobytes()
    return int.from_bytes(hashlib.sha256(first).digest()[:7], "little")


def global_rows(draw: torch.Tensor, local_rows: int, group: Any = None) -> torch.Tensor:
    """This rank's rows of a draw made for the global batch: ``draw`` has ``local_rows * world`` rows (the same
    on every rank, e.g. from :func:`step_generator`) and rank ``r`` of ``group`` takes rows
    ``[r * local_rows, (r + 1) * local_rows)``, the rows of its share of the global batch. So a per-sample draw
    (IQN's quantile fractions) is the one a single process makes for the same sample.

    Example::

        world = get_world_size()
        tau = global_rows(torch.rand(64 * world, 32, generator=g), 64)
    """
    rank = get_rank(group)
    if draw.shape[0] != local_rows * get_world_size(group):
        raise ValueError(f"draw has {draw.shape[0]} rows, expected {local_rows} x {get_world_size(group)} ranks")
    return draw[rank * local_rows : (rank + 1) * local_rows]
