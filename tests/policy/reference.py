"""By-hand references the policy tests share: estimators written out as loops in numpy (float64), never calling
the code under test, and helpers that make a target network differ from its online copy.

The tests feed these the network outputs they read from a copy of the policy's network, then compare the result
with what the policy's real ``learn`` reports and the gradient it leaves in ``.grad``.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn


def perturb(module: nn.Module, scale: float = 0.5, seed: int = 1) -> None:
    """Add ``scale`` times standard-normal noise to every parameter of ``module`` (a target network, which starts
    as a copy of the online one, so that the two networks' values and argmaxes differ)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(scale * torch.randn(p.shape, generator=g, dtype=p.dtype))


def gae(reward, value, next_value, done, gamma: float, lam: float) -> np.ndarray:
    """GAE advantages ``[T, N]``, one env column at a time, the recursion written out backwards."""
    reward, value, next_value = (np.asarray(x, np.float64) for x in (reward, value, next_value))
    steps, envs = reward.shape
    adv = np.zeros((steps, envs))
    for n in range(envs):
        running = 0.0
        for t in reversed(range(steps)):
            if done[t, n]:
                delta, running = reward[t, n] - value[t, n], 0.0
            else:
                delta = reward[t, n] + gamma * next_value[t, n] - value[t, n]
            running = delta + gamma * lam * running
            adv[t, n] = running
    return adv


def normalized(x) -> np.ndarray:
    """``(x - mean) / (std + 1e-8)`` with the unbiased standard deviation, over every element."""
    x = np.asarray(x, np.float64)
    return (x - x.mean()) / (x.std(ddof=1) + 1e-8)


def huber(d, kappa: float = 1.0) -> np.ndarray:
    """``d^2 / 2`` inside ``|d| <= kappa``, ``kappa (|d| - kappa / 2)`` outside."""
    d = np.asarray(d, np.float64)
    return np.where(np.abs(d) <= kappa, 0.5 * d * d, kappa * (np.abs(d) - 0.5 * kappa))


def quantile_huber(pred, target, tau, kappa: float = 1.0) -> np.ndarray:
    """Per-sample quantile Huber loss ``sum_i mean_j |tau_i - 1{target_j < pred_i}| huber(target_j - pred_i) / kappa``
    of ``pred [B, N]`` at fractions ``tau [B, N]`` against ``target [B, M]``, by loops."""
    pred, target, tau = (np.asarray(x, np.float64) for x in (pred, target, tau))
    out = np.zeros(len(pred))
    for b in range(len(pred)):
        for i in range(pred.shape[1]):
            for j in range(target.shape[1]):
                d = target[b, j] - pred[b, i]
                out[b] += abs(tau[b, i] - (d < 0)) * huber(d, kappa) / kappa / target.shape[1]
    return out


def project(probs, reward, discount, support) -> np.ndarray:
    """C51's projection of ``reward + discount * z`` onto ``support``, one atom at a time (Bellemare et al. 2017,
    Algorithm 1): each shifted atom, clipped to the support, splits its mass between its two neighbours."""
    probs, support = np.asarray(probs, np.float64), np.asarray(support, np.float64)
    v_min, v_max, n = support[0], support[-1], len(support)
    dz = (v_max - v_min) / (n - 1)
    out = np.zeros_like(probs)
    for b in range(len(probs)):
        for j in range(n):
            tz = min(max(float(reward[b]) + float(discount[b]) * support[j], v_min), v_max)
            pos = (tz - v_min) / dz
            lo, hi = int(np.floor(pos)), int(np.ceil(pos))
            if lo == hi:
                out[b, lo] += probs[b, j]
            else:
                out[b, lo] += probs[b, j] * (hi - pos)
                out[b, hi] += probs[b, j] * (pos - lo)
    return out


def grads(module: nn.Module) -> list[torch.Tensor]:
    """The ``.grad`` of every parameter (zeros where a parameter got none)."""
    return [torch.zeros_like(p) if p.grad is None else p.grad.detach().clone() for p in module.parameters()]


def assert_grads_close(module: nn.Module, expected: list[torch.Tensor], rtol: float = 1e-4, atol: float = 1e-6) -> None:
    """The gradients ``learn`` left in ``module`` equal ``expected`` (one tensor per parameter)."""
    got = grads(module)
    assert len(got) == len(expected)
    assert any(e.abs().max() > 0 for e in expected)  # a reference of all zeros would test nothing
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, rtol=rtol, atol=atol)


def value_batch(n: int = 16, obs_size: int = 3, n_actions: int = 2, seed: int = 0) -> dict[str, torch.Tensor]:
    """A replay batch for a Q-learner: rewards of std 2 around 0.5, a quarter of the samples terminated
    (``discount`` 0), the rest ``discount`` 0.9."""
    g = torch.Generator().manual_seed(seed)
    return {
        "obs": torch.randn(n, obs_size, generator=g),
        "action": torch.randint(0, n_actions, (n,), generator=g),
        "reward": 2.0 * torch.randn(n, generator=g) + 0.5,
        "next_obs": torch.randn(n, obs_size, generator=g),
        "discount": torch.where(torch.arange(n) % 4 == 1, 0.0, 0.9),
    }


def disagreements(q_online: torch.Tensor, q_target: torch.Tensor) -> int:
    """How many rows of two ``[batch, actions]`` Q-value tables have different greedy actions."""
    return int((q_online.argmax(-1) != q_target.argmax(-1)).sum())
