"""ding_dist.utils.stats against by-hand references (loops written out) and, where it is installed, rliable."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from ding_dist.utils.stats import auc, curve_iqm, first_reach, iqm, stratified_bootstrap_ci


def _iqm_by_hand(values: list[float]) -> float:
    ordered = sorted(values)
    cut = len(ordered) // 4
    kept = ordered[cut : len(ordered) - cut]
    return sum(kept) / len(kept)


@pytest.mark.parametrize("n", [1, 3, 4, 5, 8, 11])
def test_iqm_cuts_a_quarter_from_each_end(n):
    values = [float(v) for v in np.random.default_rng(n).normal(size=n) * 10]
    assert iqm(values) == pytest.approx(_iqm_by_hand(values), abs=1e-12)


def test_iqm_ignores_outliers_where_the_mean_does_not():
    assert iqm([1.0, 2.0, 3.0, 4.0, 100.0]) == pytest.approx(3.0)  # the mean is 22
    assert iqm([0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 100.0]) == pytest.approx(3.5)  # middle 4 of 8


def test_iqm_pools_every_value_without_axis_and_slices_with_one():
    scores = np.array([[1.0, 10.0], [2.0, 20.0], [3.0, 30.0], [40.0, 0.0]])  # 4 runs x 2 tasks
    assert iqm(scores) == pytest.approx(_iqm_by_hand(scores.ravel().tolist()))  # 8 values: cut 2 each side
    np.testing.assert_allclose(iqm(scores, axis=0), [2.5, 15.0])  # per task: middle 2 of 4


def _bootstrap_by_hand(scores: np.ndarray, reps: int, seed: int) -> tuple[float, float]:
    """The same draws as stratified_bootstrap_ci, one replicate at a time: runs resampled within each task."""
    rng = np.random.default_rng(seed)
    runs, tasks = scores.shape
    rows = rng.integers(0, runs, size=(reps, runs, tasks))
    values = []
    for r in range(reps):
        pooled = []
        for draw in range(runs):
            for task in range(tasks):
                pooled.append(scores[rows[r, draw, task], task])
        values.append(_iqm_by_hand(pooled))
    values.sort()

    def percentile(q: float) -> float:  # numpy's default (linear) interpolation, written out
        pos = q / 100 * (len(values) - 1)
        lo = int(np.floor(pos))
        hi = min(lo + 1, len(values) - 1)
        return values[lo] + (values[hi] - values[lo]) * (pos - lo)

    return percentile(2.5), percentile(97.5)


def test_stratified_bootstrap_matches_the_loop_written_out():
    scores = np.array([[1.0, 100.0], [2.0, 140.0], [7.0, 90.0], [3.0, 120.0]])
    got = stratified_bootstrap_ci(scores, reps=300, seed=3)
    assert got == pytest.approx(_bootstrap_by_hand(scores, 300, 3))


def test_stratified_bootstrap_never_mixes_tasks():
    # Task 0 holds only 0s, task 1 only 1000s: every replicate pools two of each (stratified), so the IQM is
    # always the mean of one 0 and one 1000 after cutting one value from each end: exactly 500.
    scores = np.array([[0.0, 1000.0], [0.0, 1000.0]])
    assert stratified_bootstrap_ci(scores, reps=200) == (500.0, 500.0)


def test_stratified_bootstrap_interval_holds_the_point_and_narrows_with_runs():
    rng = np.random.default_rng(0)
    few, many = rng.normal(size=(5, 1)), rng.normal(size=(200, 1))
    low, high = stratified_bootstrap_ci(few, reps=2000)
    assert low < iqm(few) < high
    low_m, high_m = stratified_bootstrap_ci(many, reps=2000)
    assert high_m - low_m < (high - low) / 2


def test_stratified_bootstrap_bad_input_is_named():
    with pytest.raises(ValueError, match="confidence"):
        stratified_bootstrap_ci([1.0, 2.0], confidence=95)
    with pytest.raises(ValueError, match="runs, tasks"):
        stratified_bootstrap_ci(np.zeros((2, 2, 2)))


def test_auc_is_the_trapezoid_area_over_the_span():
    steps, returns = [0, 10, 30], [0.0, 2.0, 2.0]
    area = 10 * (0 + 2) / 2 + 20 * (2 + 2) / 2  # 50
    assert auc(steps, returns, normalize=False) == pytest.approx(area)
    assert auc(steps, returns) == pytest.approx(area / 30)
    assert auc([5], [3.0]) == 3.0
    with pytest.raises(ValueError, match="increasing"):
        auc([0, 2, 1], [0.0, 0.0, 0.0])


def test_first_reach_is_the_first_point_at_or_above_the_target():
    xs, ys = [0, 100, 200, 300], [-5.0, 4.0, 3.0, 9.0]
    assert first_reach(xs, ys, 4.0) == 100.0  # equal counts as reached
    assert first_reach(xs, ys, 5.0) == 300.0
    assert first_reach(xs, ys, 10.0) is None


def test_curve_iqm_is_per_point_and_cut_to_the_shortest_curve():
    curves = [[0.0, 1.0, 2.0, 9.0], [0.0, 3.0, 4.0], [0.0, 2.0, 8.0], [0.0, 100.0, 5.0]]
    np.testing.assert_allclose(curve_iqm(curves), [0.0, 2.5, 4.5])


@pytest.mark.skipif(importlib.util.find_spec("rliable") is None, reason="rliable (optional, the bench extra)")
def test_agrees_with_rliable_on_a_fixed_input():
    from rliable import library, metrics

    scores = np.array([[1.0, 50.0, 7.0], [3.0, 20.0, 9.0], [2.0, 35.0, 4.0], [8.0, 40.0, 6.0], [5.0, 10.0, 5.0]])
    assert iqm(scores) == pytest.approx(metrics.aggregate_iqm(scores), abs=1e-12)
    point, interval = library.get_interval_estimates(
        {"x": scores},
        lambda s: np.array([metrics.aggregate_iqm(s)]),
        reps=5000,
        random_state=np.random.RandomState(0),
    )
    ours = stratified_bootstrap_ci(scores, reps=5000, seed=0)
    assert point["x"][0] == pytest.approx(iqm(scores))
    # different random draws: the two percentile intervals agree to within bootstrap noise
    np.testing.assert_allclose(ours, interval["x"][:, 0], atol=0.4)
