"""Distributional losses shared by several policies: :func:`categorical_projection` (C51's and D4PG's projection of
the Bellman-shifted distribution onto the support) and :func:`quantile_huber_loss` (QR-DQN, IQN, FQF).
"""

from __future__ import annotations

import torch

__all__ = ["categorical_projection", "quantile_huber_loss"]


def categorical_projection(
    next_probs: torch.Tensor, reward: torch.Tensor, discount: torch.Tensor, support: torch.Tensor
) -> torch.Tensor:
    """C51's target: the distribution of ``reward + discount * Z`` (``Z ~ next_probs`` on ``support``) projected
    onto ``support``, ``[batch, n_atom]``.

    Each shifted atom ``z' = clip(r + d z, v_min, v_max)`` at fractional position ``b = (z' - v_min) / dz``
    gives its probability to the two atoms around it, ``floor(b)`` getting ``ceil(b) - b`` and ``ceil(b)`` getting
    ``b - floor(b)``; a ``b`` that falls on an atom gives that atom all of it. ``discount = 0`` (a termination)
    puts the whole mass on ``r``.

    Example::

        z = torch.linspace(-1, 1, 3)  # atoms -1, 0, 1
        categorical_projection(torch.tensor([[0.0, 0.0, 1.0]]), torch.tensor([0.5]), torch.tensor([0.0]), z)
        # tensor([[0.0000, 0.5000, 0.5000]])
    """
    n_atom = support.shape[0]
    v_min, v_max = support[0], support[-1]
    delta = (v_max - v_min) / (n_atom - 1)
    shifted = (reward.unsqueeze(-1) + discount.unsqueeze(-1) * support).clamp(v_min, v_max)
    b = ((shifted - v_min) / delta).clamp(0, n_atom - 1)
    lower, upper = b.floor(), b.ceil()
    to_lower = (upper - b) + (lower == upper).to(b.dtype)  # an exact atom keeps all of its mass
    to_upper = b - lower
    out = torch.zeros_like(next_probs)
    out.scatter_add_(-1, lower.long(), next_probs * to_lower)
    out.scatter_add_(-1, upper.long(), next_probs * to_upper)
    return out


def quantile_huber_loss(
    pred: torch.Tensor, target: torch.Tensor, tau: torch.Tensor, kappa: float = 1.0
) -> torch.Tensor:
    """Quantile Huber loss per sample ``[batch]`` (QR-DQN, IQN, FQF): for predicted quantile values ``pred``
    ``[batch, N]`` at fractions ``tau`` (``[batch, N]`` or ``[N]``) and target samples ``target`` ``[batch, M]``,
    ``sum_i mean_j |tau_i - 1{delta_ij < 0}| * L_kappa(delta_ij) / kappa`` with ``delta_ij = target_j - pred_i``
    and the Huber function ``L_kappa(d) = d**2 / 2`` for ``|d| <= kappa``, else ``kappa * (|d| - kappa / 2)``.
    The target gets no gradient.

    Example::

        loss = quantile_huber_loss(q_taken, target_quantiles, tau=(torch.arange(32) + 0.5) / 32)  # [batch]
    """
    if not kappa > 0:
        raise ValueError(f"learn.kappa must be > 0, got {kappa}")
    delta = target.detach().unsqueeze(1) - pred.unsqueeze(2)  # [batch, N, M]
    abs_delta = delta.abs()
    huber = torch.where(abs_delta <= kappa, 0.5 * delta.pow(2), kappa * (abs_delta - 0.5 * kappa))
    tau = tau.expand(pred.shape).unsqueeze(2)
    weight = (tau - (delta.detach() < 0).to(pred.dtype)).abs()
    return (weight * huber / kappa).sum(dim=1).mean(dim=1)
