"""Statistics for comparing learning curves over seeds (Agarwal et al. 2021, "Deep RL at the edge of the
statistical precipice"; the ``rliable`` package): interquartile mean, stratified bootstrap intervals, area
under the curve, and the env steps (or wall time) a curve needs to reach a target.

Scores are arrays of shape ``(runs, tasks)``: one row per seed, one column per task (env). A 1-D array is
one task. Everything here is numpy only, vectorized over bootstrap replicates.

Example::

    from ding_dist.utils.stats import iqm, stratified_bootstrap_ci
    scores = np.array([[1.0, 10.0], [2.0, 12.0], [4.0, 11.0]])  # 3 seeds x 2 tasks
    iqm(scores), stratified_bootstrap_ci(scores, reps=2000)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

__all__ = ["iqm", "stratified_bootstrap_ci", "auc", "first_reach", "curve_iqm"]


def iqm(scores: np.ndarray | Sequence[float], axis: int | None = None) -> float | np.ndarray:
    """Interquartile mean: the mean after cutting ``floor(n / 4)`` of the ``n`` values from each end (rliable's
    ``aggregate_iqm``, i.e. ``scipy.stats.trim_mean(x, 0.25)``). ``axis=None`` pools every value (all runs of all
    tasks); with an axis, one IQM per slice along it. With fewer than 4 values nothing is cut: the plain mean.

    Example::

        iqm([1.0, 2.0, 3.0, 4.0, 100.0])  # 3.0: the middle three of five
    """
    x = np.asarray(scores, dtype=np.float64)
    if axis is None:
        x, axis = x.reshape(-1), 0
    x = np.sort(np.moveaxis(x, axis, -1), axis=-1)
    n = x.shape[-1]
    if n == 0:
        raise ValueError("iqm of no values")
    cut = n // 4  # int(0.25 * n), as trim_mean
    out = x[..., cut : n - cut].mean(axis=-1)
    return float(out) if out.ndim == 0 else out


def stratified_bootstrap_ci(
    scores: np.ndarray | Sequence[float],
    statistic: Callable[..., np.ndarray] = iqm,
    *,
    reps: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile interval of ``statistic`` over a stratified bootstrap (rliable's ``get_interval_estimates``):
    each replicate resamples the runs of every task with replacement, within that task, and computes the statistic
    of all resampled values pooled; the interval is the ``(1 - confidence) / 2`` and ``(1 + confidence) / 2``
    percentiles of the replicates. ``statistic(values, axis=1)`` gets ``(reps, runs * tasks)``.

    Example::

        low, high = stratified_bootstrap_ci(np.array([[1.0], [2.0], [4.0]]))  # one task, 3 seeds
    """
    x = np.asarray(scores, dtype=np.float64)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2 or x.shape[0] == 0:
        raise ValueError(f"scores must be (runs, tasks) with at least one run, got shape {x.shape}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    runs, tasks = x.shape
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, runs, size=(int(reps), runs, tasks))  # a run index per (replicate, draw, task)
    resampled = x[rows, np.arange(tasks)[None, None, :]].reshape(int(reps), runs * tasks)
    values = np.asarray(statistic(resampled, axis=1), dtype=np.float64)
    tail = (1.0 - confidence) / 2.0
    low, high = np.percentile(values, [100.0 * tail, 100.0 * (1.0 - tail)])
    return float(low), float(high)


def auc(steps: Sequence[float], returns: Sequence[float], *, normalize: bool = True) -> float:
    """Area under a learning curve by the trapezoid rule over ``steps``; with ``normalize`` divided by the steps'
    span, so it reads as the curve's average return (comparable across budgets). One point: its value.

    Example::

        auc([0, 10, 20], [0.0, 1.0, 1.0])  # (5 + 10) / 20 = 0.75
    """
    x, y = np.asarray(steps, dtype=np.float64), np.asarray(returns, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1 or len(x) == 0:
        raise ValueError(f"steps and returns must be equal-length 1-D, got {x.shape} and {y.shape}")
    if np.any(np.diff(x) < 0):
        raise ValueError("steps must be increasing")
    if len(x) == 1:
        return float(y[0])
    area = float(np.sum((x[1:] - x[:-1]) * (y[1:] + y[:-1]) / 2.0))
    return area / float(x[-1] - x[0]) if normalize else area


def first_reach(xs: Sequence[float], ys: Sequence[float], target: float) -> float | None:
    """The first ``x`` (env steps, or wall seconds) at which the curve ``ys`` is at or above ``target``; None
    when it never is.

    Example::

        first_reach([0, 1000, 2000], [1.0, 5.0, 9.0], target=5.0)  # 1000
    """
    x, y = np.asarray(xs, dtype=np.float64), np.asarray(ys, dtype=np.float64)
    if x.shape != y.shape:
        raise ValueError(f"xs and ys differ in shape: {x.shape} and {y.shape}")
    hit = np.flatnonzero(y >= target)
    return float(x[hit[0]]) if len(hit) else None


def curve_iqm(curves: Sequence[Sequence[float]]) -> np.ndarray:
    """The IQM over seeds at each evaluation point of equally long curves (``(runs, points)`` -> ``(points,)``),
    cut to the shortest curve.

    Example::

        curve_iqm([[0, 1, 2], [0, 3, 4], [0, 2]])  # [0., 2.]: the third run has two points
    """
    if len(curves) == 0:
        raise ValueError("curve_iqm of no curves")
    n = min(len(c) for c in curves)
    return np.asarray(iqm(np.array([np.asarray(c[:n], dtype=np.float64) for c in curves]), axis=0))
