"""``ding-dist plot RUN...``: learning curves of runs, seeds grouped into a mean and a 95% confidence band.

A folder given that is not a run itself (no ``tb/metrics.jsonl``, ``metrics.jsonl`` or TensorBoard events)
stands for the runs inside it, one or two levels down. Runs whose saved ``config.py`` (and world size in
``result.json``) are the same except for ``seed``, each seed once, form one group (a run that repeats a seed
of its config's group is a line of its own: the same seed twice is not two seeds), drawn as the mean over its
runs with a 95% confidence band of that mean (Student t: ``mean ± t(0.975, n-1) · s / sqrt(n)``, cut to the
lowest and highest value the runs reach) or, with ``--band iqm``, as their interquartile mean (4 seeds or
more; the plain mean under 4, as the legend says) with a stratified bootstrap 95% interval (rliable's), each
run interpolated linearly on a common x grid. Runs of a group need not be equally long: at each x, the mean
and band are over the runs present there (a band needs 2); a run that stopped because it reached
``env.stop_value`` (``result.json``: ``"stopped_by": "stop_value"``) is present up to the group's end, holding
its last value, any other run (stopped otherwise, still running, crashed) only up to its last record. A run
alone is drawn as its own line. ``smooth`` is a trailing moving average over the last W points of each run,
applied after a finished run's last value is held (a solved run ends on its solved value). Labels name the
config values that tell the lines apart (world size included; keys shortened to their last parts), else the
folder names. The x axis ``wall_time`` is the run's seconds of training (``time/wall_time_s``), so a resumed
run's curve goes on where it stopped instead of drawing a line across the idle time before the resume.

Example::

    ding-dist plot runs/dqn_s1 runs/dqn_s2 runs/dqn_s3 --smooth 3 --keys eval/mean_reward,train/loss
    ding-dist plot runs                                   # every run in runs/ (and one level further)
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from ding_dist.entry.cli.errors import UsageError, refuse_unwritable
from ding_dist.entry.cli.run_folders import IGNORED_FOR_GROUPING, PLOT_KEYS, Run, find_runs, load_curves, load_run
from ding_dist.utils.fileio import atomic_open

__all__ = [
    "PLOT_KEYS",
    "DEFAULT_KEYS",
    "Run",
    "Aggregate",
    "find_runs",
    "load_run",
    "load_curves",
    "group_runs",
    "aggregate",
    "smooth",
    "build_figure",
    "plot_curves",
    "plot_command",
]

#: Default panel of ``ding-dist plot``: the evaluation return, else the training episodes' return.
DEFAULT_KEYS = ("eval/mean_reward",)
FALLBACK_KEYS = ("rollout/ep_rew_mean",)
X_AXES = ("env_steps", "wall_time")
BANDS = ("mean", "iqm")  # a seed group's line and band: mean and Student t 95% CI, or IQM and bootstrap 95% CI
_BOOT_REPS = 2000  # bootstrap replicates per grid point of an IQM band (rliable's default is 2000 too)
#: The loops' seconds of training over a run's segments (``--x wall_time``'s clock).
TRAINING_TIME_KEY = "time/wall_time_s"
_MAX_GRID = 500  # points of a wall-time grid
_MAX_VALUE = 24  # characters of a config value in a legend label (more when cutting would merge two)
_FIRST_KEYS = ("create_config.policy.type", "env.id", "world_size")  # what a label names first
# Two-sided 95% Student t quantiles t(0.975, df); larger df take the next smaller entry (conservative).
_T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
        12: 2.179, 15: 2.131, 20: 2.086, 25: 2.060, 30: 2.042, 40: 2.021, 60: 2.000, 120: 1.980}  # fmt: skip


def smooth(values: Sequence[float], window: int) -> list[float]:
    """Trailing moving average over the last ``window`` points (fewer at the start).

    Example:
        >>> smooth([0.0, 2.0, 4.0, 6.0], 2)
        [0.0, 1.0, 3.0, 5.0]
    """
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


def _training_time(run: Run) -> tuple[list[int], list[float]] | None:
    """``(env steps, seconds of training)`` from ``time/wall_time_s`` (logged with every record of the loops), or
    None for a run logged without it."""
    by_step = {step: value for step, _, value in run.points.get(TRAINING_TIME_KEY, []) if math.isfinite(value)}
    if not by_step:
        return None
    steps = sorted(by_step)
    return steps, [by_step[s] for s in steps]


def _curve(run: Run, key: str, x: str) -> tuple[list[float], list[float]]:
    """``(xs, ys)`` of ``key`` in ``run``: finite values, one per env step (the last), as logged (unsmoothed:
    :func:`aggregate` smooths after a finished run's hold). ``x="wall_time"``: the run's seconds of training at
    each record's env step (``time/wall_time_s``, interpolated between its records: the idle time before a resume
    is not on this clock), or for runs logged without it seconds since the first record."""
    import numpy as np

    by_step: dict[int, tuple[float, float]] = {}
    for step, wall, value in run.points.get(key, []):
        if math.isfinite(value):
            by_step[step] = (wall, value)
    steps = sorted(by_step)
    clock = _training_time(run) if x == "wall_time" else None
    if clock is not None:
        pairs = [(float(t), by_step[s][1]) for s, t in zip(steps, np.interp(steps, *clock))]
    elif x == "wall_time":
        start = min((w for pts in run.points.values() for _, w, _ in pts if math.isfinite(w)), default=0.0)
        pairs = sorted((by_step[s][0] - start, by_step[s][1]) for s in steps if math.isfinite(by_step[s][0]))
    else:
        pairs = [(float(s), by_step[s][1]) for s in steps]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def group_runs(runs: Sequence[Run]) -> list[list[Run]]:
    """Runs that differ only in seed (same saved config and world size, each seed once), in first-seen order.

    A run without a world size (no ``result.json`` yet: still running, or crashed) joins the group of its
    config when exactly one world size has that config. Runs of one config that repeat a seed are not more
    seeds: a run whose seed its config's group already has starts a group of its own (so two seed-0 runs of
    one config are two lines, not "n=2").

    Example:
        >>> a = Run(Path("a"), {}, {"seed": 1, "lr": 0.1}, 1); b = Run(Path("b"), {}, {"seed": 2, "lr": 0.1})
        >>> again = Run(Path("a2"), {}, {"seed": 1, "lr": 0.1}, 1)
        >>> [[r.name for r in g] for g in group_runs([a, b, again, Run(Path("c"), {}, {})])]
        [['a', 'b'], ['a2'], ['c']]
    """
    keys = [("alone", i) if run.group_key() is None else run.group_key() for i, run in enumerate(runs)]
    sizes: dict[Any, set] = {}
    for key in keys:
        if key[0] != "alone" and key[1] is not None:
            sizes.setdefault(key[0], set()).add(key[1])
    groups: dict[Any, list[list[Run]]] = {}
    for run, key in zip(runs, keys):
        if key[0] != "alone" and key[1] is None and len(sizes.get(key[0], ())) == 1:
            key = (key[0], next(iter(sizes[key[0]])))
        layers = groups.setdefault(key, [])
        seed = repr(run.config.get("seed"))
        free = [layer for layer in layers if all(repr(r.config.get("seed")) != seed for r in layer)]
        if free:
            free[0].append(run)
        else:
            layers.append([run])
    return [layer for layers in groups.values() for layer in layers]


def _t95(df: int) -> float:
    return _T95[max(k for k in _T95 if k <= df)] if df <= 120 else 1.960


class Aggregate(NamedTuple):
    """:func:`aggregate`'s result: arrays over ``grid``; ``low``/``high`` are NaN where ``count`` < 2."""

    grid: Any
    mean: Any
    low: Any
    high: Any
    count: Any


def aggregate(
    curves: Sequence[tuple[Sequence[float], Sequence[float]]],
    grid_points: int = _MAX_GRID,
    hold: Sequence[bool] | None = None,
    band: str = "mean",
    smooth_window: int = 1,
) -> Aggregate:
    """Mean and 95% band of several ``(xs, ys)`` curves on a common grid, over the curves present at each x.

    A curve with ``hold[i]`` true (its run reached ``stop_value``) first gets its last value held at every x of
    the other curves beyond its own last x, up to the last x of all; then each curve is smoothed
    (:func:`smooth`, ``smooth_window`` points), so a solved run ends on the value it reached, not on an average
    that still counts its earlier evaluations. The grid is the union of the curves' x values (at most
    ``grid_points`` evenly spaced points when that union is larger). A curve is present from its first x to
    its last, interpolated linearly. Where ``count`` curves are present, the band is
    ``mean ± t(0.975, count-1) · s / sqrt(count)``, cut to the lowest and highest value the curves reach (a
    mean cannot leave the range its runs' values take: returns in [0, 500] give no band below 0); with one
    curve it is NaN (the mean alone), with none the mean is NaN too. ``band="iqm"``: the ``mean`` field is the
    interquartile mean of the curves present (:func:`ding_dist.utils.stats.iqm`; under 4 curves the plain mean)
    and the band the 95% percentile interval of that statistic over a stratified bootstrap of those curves
    (:func:`ding_dist.utils.stats.stratified_bootstrap_ci`, 2000 replicates, seed 0: one task, so the seeds are
    resampled with replacement), as rliable reports a score.

    Example:
        >>> a = aggregate([([0, 10, 20], [0.0, 2.0, 4.0]), ([0, 10], [2.0, 4.0])])
        >>> a.grid.tolist(), a.mean.tolist(), a.count.tolist(), a.low.tolist()[:2], a.high.tolist()[:2]
        ([0.0, 10.0, 20.0], [1.0, 3.0, 4.0], [2, 2, 1], [0.0, 0.0], [4.0, 4.0])
        >>> aggregate([([0, 10, 20], [0.0, 2.0, 4.0]), ([0, 10], [2.0, 4.0])], hold=[False, True]).mean.tolist()
        [1.0, 3.0, 4.0]
        >>> aggregate([([0, 10, 20, 30], [0.0, 0.0, 0.0, 0.0]), ([0, 10], [0.0, 4.0])], hold=[False, True],
        ...           smooth_window=2).mean.tolist()  # the held 4 is smoothed with itself: 2, then 4
        [0.0, 1.0, 2.0, 2.0]
    """
    import numpy as np

    holds = [False] * len(curves) if hold is None else list(hold)
    if len(holds) != len(curves):
        raise ValueError(f"hold has {len(holds)} entries for {len(curves)} curves")
    if isinstance(smooth_window, bool) or not isinstance(smooth_window, int) or smooth_window < 1:
        raise ValueError(f"smooth_window must be an int >= 1, got {smooth_window!r}")
    raw = [(np.asarray(x, float), np.asarray(y, float), h) for (x, y), h in zip(curves, holds) if len(x)]
    if not raw:
        raise ValueError("no points to aggregate")
    every_x = np.unique(np.concatenate([x for x, _, _ in raw]))
    kept = []
    for x, y, h in raw:
        if h:  # held first, smoothed after: the held points are points of the curve
            beyond = every_x[every_x > x[-1]]
            x, y = np.concatenate([x, beyond]), np.concatenate([y, np.full(len(beyond), y[-1])])
        kept.append((x, np.asarray(smooth(y.tolist(), smooth_window)) if smooth_window > 1 else y))
    floor, ceiling = min(float(y.min()) for _, y, _ in raw), max(float(y.max()) for _, y, _ in raw)
    lo, hi = every_x[0], every_x[-1]
    grid = every_x if len(every_x) <= grid_points else np.linspace(lo, hi, grid_points)
    ys = np.full((len(kept), len(grid)), np.nan)
    for row, (x, y) in zip(ys, kept):
        inside = (grid >= x[0]) & (grid <= x[-1])
        row[inside] = np.interp(grid[inside], x, y)
    present = ~np.isnan(ys)
    count = present.sum(axis=0)
    if band == "iqm":
        grid, center, low, high, count = _iqm_band(grid, ys, present, count)
        return Aggregate(grid, center, np.clip(low, floor, ceiling), np.clip(high, floor, ceiling), count)
    if band != "mean":
        raise ValueError(f"band must be one of {', '.join(BANDS)}, got {band!r}")
    total = np.where(present, ys, 0.0).sum(axis=0)
    mean = np.divide(total, count, out=np.full(len(grid), np.nan), where=count > 0)
    squares = (np.where(present, ys - mean, 0.0) ** 2).sum(axis=0)
    var = np.divide(squares, count - 1, out=np.full(len(grid), np.nan), where=count > 1)
    t = np.array([_t95(int(c) - 1) if c > 1 else np.nan for c in count])
    half = t * np.sqrt(var / np.maximum(count, 1))
    return Aggregate(grid, mean, np.clip(mean - half, floor, ceiling), np.clip(mean + half, floor, ceiling), count)


def _iqm_band(grid: Any, ys: Any, present: Any, count: Any) -> Aggregate:
    """:func:`aggregate`'s ``band="iqm"``: per grid point, the IQM of the curves present and its bootstrap CI."""
    import numpy as np

    from ding_dist.utils.stats import iqm, stratified_bootstrap_ci

    center, low, high = (np.full(len(grid), np.nan) for _ in range(3))
    for j in np.flatnonzero(count > 0):
        values = ys[present[:, j], j]
        center[j] = iqm(values)
        if len(values) > 1:
            low[j], high[j] = stratified_bootstrap_ci(values, iqm, reps=_BOOT_REPS, confidence=0.95, seed=0)
    return Aggregate(grid, center, low, high, count)


def _text(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _shortened(texts: Sequence[str]) -> list[str]:
    """``texts`` (one config key's values, a line each) cut to ``_MAX_VALUE`` characters at the right, else at the
    left, whichever keeps apart the values that differ; as they are when neither does."""
    if all(len(t) <= _MAX_VALUE for t in texts):
        return list(texts)
    distinct = len(set(texts))
    for cut in (lambda t: t[: _MAX_VALUE - 1] + "…", lambda t: "…" + t[1 - _MAX_VALUE :]):
        short = [t if len(t) <= _MAX_VALUE else cut(t) for t in texts]
        if len(set(short)) == distinct:
            return short
    return list(texts)


def _key_names(keys: Sequence[str], every_key: set[str]) -> dict[str, str]:
    """Each key's shortest dotted ending that no other key of ``every_key`` has (``policy.type`` when
    ``env.type`` exists too, ``learning_rate`` when it is the only one); endings under 4 characters take their
    parent (``env.id``, not ``id``)."""
    names = {}
    for key in keys:
        parts = key.split(".")
        for n in range(1, len(parts) + 1):
            name = ".".join(parts[-n:])
            if len(name) >= 4 and not any(o != key and (o == name or o.endswith("." + name)) for o in every_key):
                break
        names[key] = name
    return names


def _telling_keys(configs: Sequence[Mapping[str, Any]]) -> tuple[list[str], int]:
    """The config keys a legend names so that its lines can be told apart, and how many other keys differ.

    Greedy: the key that tells the most pairs of lines apart that no key chosen so far does (ties: the policy
    type, env id and world size first, then the shallowest key, then by name), until every pair that differs at
    all is told apart. Two configs that differ in many keys (a DQN and a PPO run) are named by their policy type,
    not by the first of their dozens of differing keys.
    """
    keys = sorted(set().union(*configs) - set(IGNORED_FOR_GROUPING))
    values = {k: [repr(c.get(k)) for c in configs] for k in keys}
    differing = [k for k in keys if len(set(values[k])) > 1]
    pairs = [(i, j) for i in range(len(configs)) for j in range(i + 1, len(configs))]
    apart = {(i, j) for i, j in pairs if any(values[k][i] != values[k][j] for k in differing)}

    def told(key: str, pairs: set[tuple[int, int]]) -> set[tuple[int, int]]:
        return {(i, j) for i, j in pairs if values[key][i] != values[key][j]}

    def rank(key: str, pairs: set[tuple[int, int]]) -> tuple:
        first = _FIRST_KEYS.index(key) if key in _FIRST_KEYS else len(_FIRST_KEYS)
        return (-len(told(key, pairs)), first, key.count("."), key)

    chosen: list[str] = []
    while apart:
        best = min((k for k in differing if k not in chosen), key=lambda k, pairs=apart: rank(k, pairs))
        chosen.append(best)
        apart -= told(best, apart)
    return chosen, len(differing) - len(chosen)


def _last_step(run: Run) -> int:
    return max((step for pts in run.points.values() for step, _, _ in pts), default=0)


def _shorter_runs(group: Sequence[Run]) -> tuple[int, int]:
    """``(held, ended)``: runs of a group that end before its longest, having reached ``stop_value`` or not."""
    end = max(_last_step(r) for r in group)
    short = [r for r in group if _last_step(r) < end]
    return sum(r.held for r in short), sum(not r.held for r in short)


def _folders(group: Sequence[Run]) -> str:
    """A group's folder names: the one, their common beginning when it says something (3 characters or more),
    else all of them (the first and the last when they are many)."""
    names = [r.name for r in group]
    common = os.path.commonprefix(names).rstrip("-_.") if len(names) > 1 else names[0]
    listed = ", ".join(names)
    return common if len(common) >= 3 else listed if len(listed) <= 40 else f"{names[0]} … {names[-1]}"


def _labels(groups: Sequence[Sequence[Run]]) -> tuple[list[str], int]:
    """A label per group, and how many config keys differ between the groups beyond those the labels name.

    A label names the config values that tell the groups apart (:func:`_telling_keys`; the world size among
    them), else the folder names; groups of one config (their runs repeat a seed) add their folders. A group of
    seeds says how many runs it has and how many of them end early (held at ``stop_value``, or not).
    """
    configs = [{**g[0].config, "world_size": g[0].world_size} for g in groups]
    telling, untold = ([], 0)
    if len(groups) > 1 and all(g[0].config for g in groups):
        telling, untold = _telling_keys(configs)
    names = _key_names(telling, set().union(*configs))
    shown = {k: _shortened([_text(c.get(k)) for c in configs]) for k in telling}
    texts = [", ".join(f"{names[k]}={shown[k][i]}" for k in telling) or _folders(g) for i, g in enumerate(groups)]
    labels = []
    for group, text in zip(groups, texts):
        if telling and texts.count(text) > 1:  # the same config: the runs repeat a seed of another line
            text = f"{text} in {_folders(group)}"
        if len(group) > 1:
            held, ended = _shorter_runs(group)
            notes = [f"{held} held"] * bool(held) + [f"{ended} ended early"] * bool(ended)
            text = f"{text} (n={', '.join([str(len(group)), *notes])})"
        labels.append(text)
    return labels, untold


def _legend_title(
    groups: Sequence[Sequence[Run]], band: str = "mean", untold: int = 0, iqm_counts: Sequence[Any] = ()
) -> str | None:
    """What the lines mean: how a seed group's line and band are computed (``iqm_counts``: the number of seeds
    present at each x of each group's panels, which says where an IQM was computed), a line for each kind of
    early end that occurs, and how many config keys differ beyond those the labels name."""
    lines = []
    if any(len(g) > 1 for g in groups):
        held, ended = (sum(n) for n in zip(*(_shorter_runs(g) for g in groups if len(g) > 1)))
        if band == "iqm":
            iqm = any((c >= 4).any() for c in iqm_counts)
            plain = any(((c >= 2) & (c < 4)).any() for c in iqm_counts)
            what = "IQM" if not plain else "IQM (the plain mean where under 4 seeds)" if iqm else (
                "mean (an IQM needs 4 seeds or more)")  # fmt: skip
            lines.append(f"{what} and stratified bootstrap 95% CI over the seeds present at each x")
        else:
            lines.append("mean and 95% CI (Student t, within the runs' lowest and highest values) over the seeds "
                         "present at each x")  # fmt: skip
        if held:
            lines.append("held: reached env.stop_value, its last value carried to the end")
        if ended:
            lines.append("ended early: stopped otherwise or still running, counted up to its last point")
    if untold:
        lines.append(f"{untold} other config value{'s' * (untold != 1)} also differ{'s' * (untold == 1)} "
                     "between the lines")  # fmt: skip
    return "\n".join(lines) or None


def _parse_keys(text: str | Sequence[str] | None) -> list[str] | None:
    if text is None:
        return None
    parts = [text] if isinstance(text, str) else list(text)
    keys = [k.strip() for part in parts for k in part.split(",") if k.strip()]
    if not keys:
        raise UsageError("--keys needs at least one metric name, e.g. --keys eval/mean_reward")
    return list(dict.fromkeys(keys))


def _choose_keys(runs: Sequence[Run], keys: Sequence[str] | None) -> list[str]:
    available = sorted(set().union(*(r.points for r in runs)))
    names = ", ".join(repr(str(r.path)) for r in runs)
    if keys is None:
        for default in (DEFAULT_KEYS, FALLBACK_KEYS):
            found = [k for k in default if k in available]
            if found:
                return found
        raise UsageError(
            f"no {' or '.join(PLOT_KEYS)} records in {names}; keys available: {', '.join(available) or 'none'}"
        )
    unknown = [k for k in keys if k not in available]
    if unknown:
        raise UsageError(
            f"unknown key {', '.join(map(repr, unknown))} in {names}; keys available: {', '.join(available) or 'none'}"
        )
    return list(keys)


def build_figure(
    exp_dirs: Sequence[str | os.PathLike],
    keys: Sequence[str] | str | None = None,
    *,
    smooth_window: int = 1,
    x: str = "env_steps",
    group: bool = True,
    band: str = "mean",
) -> Any:
    """The matplotlib ``Figure`` that :func:`plot_curves` saves (same arguments, no file written).

    Example:
        >>> fig = build_figure(["runs/dqn_s1", "runs/dqn_s2"], "eval/mean_reward")  # doctest: +SKIP
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if x not in X_AXES:
        raise UsageError(f"x axis must be one of {', '.join(X_AXES)}, got {x!r}")
    if band not in BANDS:
        raise UsageError(f"band must be one of {', '.join(BANDS)}, got {band!r}")
    if isinstance(smooth_window, bool) or not isinstance(smooth_window, int) or smooth_window < 1:
        raise UsageError(f"smoothing window must be an integer >= 1, got {smooth_window!r}")
    if not exp_dirs:
        raise UsageError("no experiment folder given")
    found = {d.resolve(): d for folder in exp_dirs for d in find_runs(folder)}  # a run given twice: once
    runs = [load_run(d) for d in found.values()]
    chosen = _choose_keys(runs, _parse_keys(keys))
    groups = group_runs(runs) if group else [[r] for r in runs]
    labels, untold = _labels(groups)

    cols = min(len(chosen), 3)
    rows = math.ceil(len(chosen) / cols)
    fig = Figure(figsize=(max(5.2 * cols, 6.0), 3.8 * rows), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    styles = ["-", "--", ":", "-."]
    handles: dict[str, Any] = {}
    counts = []  # seeds present at each x, per seed group and panel: where an IQM was computed
    for ax, key in zip(axes, chosen):
        for i, (members, label) in enumerate(zip(groups, labels)):
            drawn = [(c, r.held) for c, r in ((_curve(r, key, x), r) for r in members) if c[0]]
            if not drawn:
                continue
            curves = [c for c, _ in drawn]
            held = [h and len(members) > 1 for _, h in drawn]
            grid, mean, low, high, count = aggregate(curves, hold=held, band=band, smooth_window=smooth_window)
            if len(members) > 1:
                counts.append(count)
            color, style = f"C{i % 10}", styles[(i // 10) % len(styles)]
            (line,) = ax.plot(grid, mean, style, color=color, lw=1.6, marker="o" if len(grid) < 20 else None, ms=3,
                              label=label)  # fmt: skip
            if len(curves) > 1:
                ax.fill_between(grid, low, high, color=color, alpha=0.2, lw=0)
            handles.setdefault(label, line)
        ax.set_title(key, fontsize="medium")
        ax.set_xlabel(_x_label(x, [r for g in groups for r in g]))
        ax.set_ylabel("return" if key.endswith(("reward", "rew_mean")) else key.rsplit("/", 1)[-1])
        ax.grid(alpha=0.3)
    for ax in axes[len(chosen) :]:
        ax.set_visible(False)
    title = _legend_title(groups, band, untold, counts)
    if len(handles) > 1 or title:
        _fit_legend(fig, handles, title)
    if len(groups) == 1:
        fig.suptitle(labels[0], fontsize="medium")
    return fig


def _x_label(x: str, runs: Sequence[Run]) -> str:
    if x == "env_steps":
        return "env steps"
    clocks = {_training_time(r) is not None for r in runs}
    if clocks == {True}:
        return "training time (s; pauses before a resume left out)"
    return "wall time (s since the first record)" if clocks == {False} else "training time, or wall time (s)"


def _fit_legend(fig: Any, handles: Mapping[str, Any], title: str | None) -> None:
    """The legend below the panels in as many columns (up to 3) as the figure's width holds, measured: long labels
    take fewer columns, and one column wider than the figure widens it; the figure grows by the legend's rows."""
    renderer = fig.canvas.get_renderer()
    base_height = fig.get_figheight()
    for ncol in range(min(len(handles), 3), 0, -1):
        legend = fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncol=ncol,
                            fontsize="small", frameon=False, title=title, title_fontsize="small")  # fmt: skip
        box = legend.get_window_extent(renderer)
        if box.width <= 0.97 * fig.bbox.width or ncol == 1:
            break
        legend.remove()
    if box.width > 0.97 * fig.bbox.width:
        fig.set_figwidth(box.width / 0.97 / fig.dpi)
    fig.set_figheight(base_height + box.height / fig.dpi)


def plot_curves(
    exp_dirs: Sequence[str | os.PathLike],
    out: str | os.PathLike,
    keys: Sequence[str] | str | None = None,
    *,
    smooth_window: int = 1,
    x: str = "env_steps",
    group: bool = True,
    band: str = "mean",
) -> Path:
    """Write a PNG: one panel per key, one line per group of seeds (mean and 95% band) or per run.

    ``keys`` (a list or ``"a,b"``) defaults to ``eval/mean_reward`` (``rollout/ep_rew_mean`` for runs
    without evaluations); ``x`` is ``"env_steps"`` or ``"wall_time"`` (seconds of training, the idle time
    before a resume left out; for runs logged without ``time/wall_time_s``, seconds since the first record);
    ``smooth_window`` averages the last W points (after a finished run's hold); ``group=False`` draws every run
    alone; ``band="iqm"`` draws a group's interquartile mean and its stratified bootstrap 95% interval instead of
    the mean and Student t band (:func:`aggregate`). The folder of ``out`` must exist.

    Example:
        >>> plot_curves(["runs/dqn_s1", "runs/dqn_s2"], "curve.png", smooth_window=3)  # doctest: +SKIP
    """
    out = Path(out)  # its folder must exist: an output path's missing parent is never created
    if not out.parent.is_dir():
        raise ValueError(f"plot_curves: the folder of {str(out)!r} does not exist; create it or choose another path")
    fig = build_figure(exp_dirs, keys, smooth_window=smooth_window, x=x, group=group, band=band)
    with atomic_open(out, "wb") as f:
        fig.savefig(f, format="png", dpi=110)
    return out


def plot_command(args: argparse.Namespace) -> int:
    """``ding-dist plot``: parse-level checks, :func:`plot_curves`, then print the path written.

    Example:
        >>> from ding_dist.entry.cli import build_parser
        >>> plot_command(build_parser().parse_args(["plot", "runs/a", "--smooth", "5"]))  # doctest: +SKIP
        0
    """
    out = Path(args.out) if args.out else Path(args.exp_dirs[0]) / "learning_curve.png"
    if out.suffix.lower() != ".png":
        raise UsageError(f"--out must end in .png, got {str(out)!r}")
    if not args.out and not Path(args.exp_dirs[0]).is_dir():  # the default path's folder: a missing run, said so
        raise UsageError(f"experiment folder {str(args.exp_dirs[0])!r} does not exist")
    refuse_unwritable(out, "--out" if args.out else "the plot's default path")  # before any run is read
    if len(args.exp_dirs) == 1 and getattr(args, "x", "env_steps") == "env_steps":
        from ding_dist.entry.cli.plot_pbt import is_population, plot_population  # a population: its own figure

        if is_population(args.exp_dirs[0]):
            print(f"wrote {plot_population(args.exp_dirs[0], out, _parse_keys(args.keys), args.smooth)}")
            return 0
    exp_dirs: list[Path] = []
    for folder in args.exp_dirs:
        runs = find_runs(folder)
        if runs != [Path(folder)]:  # a folder of runs: say which were found
            names = [str(r.relative_to(folder)) for r in runs]
            shown = ", ".join(names[:10]) + (f", ... ({len(names) - 10} more)" if len(names) > 10 else "")
            print(f"{folder}: {len(runs)} run{'s' * (len(runs) != 1)} ({shown})")
        exp_dirs += runs
    path = plot_curves(
        exp_dirs,
        out,
        getattr(args, "keys", None),
        smooth_window=getattr(args, "smooth", 1),
        x=getattr(args, "x", "env_steps"),
        group=not getattr(args, "no_group", False),
        band=getattr(args, "band", "mean"),
    )
    print(f"wrote {path}")
    return 0
