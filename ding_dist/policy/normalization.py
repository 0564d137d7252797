"""Observation normalization with running statistics synchronized across ranks (one allreduce per sync).

:class:`RunningObsNorm` keeps global statistics (``count``, ``mean``, ``m2``; float64 buffers, so they
are saved with the module's ``state_dict`` in checkpoints) that are identical on every rank, and per-rank
pending statistics of the observations seen since the last :meth:`~RunningObsNorm.sync`. ``sync``
packs every rank's pending ``(n, n * (mean - g), m2 + n * (mean - g)**2)``, shifted by the shared global
mean ``g`` for accuracy, into one tensor, sums it with one allreduce, and merges the result into the
global statistics (Chan et al.'s parallel variance). Normalization uses only the global statistics, so
every rank normalizes identically; call ``sync`` at the same point on every rank (e.g. after each update).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from ding_dist.comm import allreduce, comm_device

__all__ = ["RunningObsNorm"]


class RunningObsNorm(nn.Module):
    """``(obs - mean) / sqrt(var + eps)``, clipped to ``[-clip, clip]``, with rank-synchronized statistics.

    Example::

        norm = RunningObsNorm((17,))
        norm.observe(obs_batch)  # this rank's new observations (pending)
        norm.sync()  # one allreduce: every rank now holds the same count/mean/m2
        x = norm(torch.as_tensor(obs_batch))
    """

    def __init__(self, shape: Sequence[int], *, eps: float = 1e-8, clip: float = 10.0, group: Any = None) -> None:
        super().__init__()
        self.shape, self.eps, self.clip, self.group = tuple(int(s) for s in shape), float(eps), float(clip), group
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))
        self.register_buffer("mean", torch.zeros(self.shape, dtype=torch.float64))
        self.register_buffer("m2", torch.zeros(self.shape, dtype=torch.float64))
        self._reset_pending()

    def _reset_pending(self) -> None:
        self._n = 0.0
        self._pmean = torch.zeros(self.shape, dtype=torch.float64)
        self._pm2 = torch.zeros(self.shape, dtype=torch.float64)

    @property
    def var(self) -> torch.Tensor:
        """Population variance of the global statistics (1 before any sync)."""
        return self.m2 / self.count if self.count > 0 else torch.ones_like(self.m2)

    @torch.no_grad()
    def observe(self, obs: Any) -> None:
        """Add a batch ``[..., *shape]`` to this rank's pending statistics (no communication)."""
        x = torch.as_tensor(obs, dtype=torch.float64).cpu().reshape(-1, *self.shape)
        n = float(x.shape[0])
        if n == 0:
            return
        bmean = x.mean(0)
        bm2 = ((x - bmean) ** 2).sum(0)
        total = self._n + n
        delta = bmean - self._pmean
        self._pmean = self._pmean + delta * (n / total)
        self._pm2 = self._pm2 + bm2 + delta**2 * (self._n * n / total)
        self._n = total

    @torch.no_grad()
    def sync(self) -> None:
        """Merge every rank's pending statistics into the global ones with one allreduce (collective)."""
        g = self.mean.detach().cpu()
        shifted = self._pmean - g
        packed = torch.cat(
            [
                torch.tensor([self._n], dtype=torch.float64),
                self._n * shifted.flatten(),
                (self._pm2 + self._n * shifted**2).flatten(),
            ]
        )
        packed = packed.to(comm_device(self.group, like=packed))
        allreduce(packed, op="sum", group=self.group)
        packed = packed.cpu()
        size = g.numel()
        n = float(packed[0])
        self._reset_pending()
        if n == 0:
            return
        mean_new = g + (packed[1 : 1 + size] / n).reshape(self.shape)  # mean of the new observations, all ranks
        m2_new = (packed[1 + size :].reshape(self.shape)) - n * (mean_new - g) ** 2
        count = float(self.count)
        total = count + n
        delta = mean_new - g
        self.mean.copy_((g + delta * (n / total)).to(self.mean.device))
        self.m2.add_((m2_new + delta**2 * (count * n / total)).to(self.m2.device))
        self.count.fill_(total)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        std = (self.var + self.eps).sqrt()
        out = (obs.to(torch.float64) - self.mean) / std
        return out.clamp(-self.clip, self.clip).to(torch.float32)
