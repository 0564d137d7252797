"""ding-dist plot: seeds grouped into a mean and a 95% band (runs of unequal length included), folders of
runs, --smooth, --keys, --x, readable legends, and bad input as one line with exit code 2."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from ding_dist.entry.cli import main
from ding_dist.entry.cli.plot import aggregate, build_figure, group_runs, load_run, plot_curves, smooth
from ding_dist.utils import MetricWriter


def _run(
    folder: Path,
    seed: int,
    evals: dict[int, float],
    lr: float = 0.001,
    world: int = 1,
    wall: dict[int, float] | None = None,
    stopped_by: str | None = "max_env_steps",
) -> Path:
    """A run folder as ``ding-dist train`` leaves it: config.py, result.json and tb/metrics.jsonl
    (``stopped_by=None``: no result.json, as while the run is still going)."""
    folder.mkdir(parents=True)
    (folder / "config.py").write_text(
        f"main_config = dict(exp_name={folder.name!r}, seed={seed}, policy=dict(learn=dict(learning_rate={lr})))\n"
        "create_config = dict(policy=dict(type='dqn'))\n"
    )
    if stopped_by is not None:
        (folder / "result.json").write_text(json.dumps({"world_size": world, "stopped_by": stopped_by}))
    with MetricWriter(folder / "tb", tensorboard=False) as w:
        for step, value in evals.items():
            w.scalars({"eval/mean_reward": value, "train/loss": 1.0 / step}, step)
    if wall is not None:  # rewrite the wall times with known values
        path = folder / "tb" / "metrics.jsonl"
        recs = [json.loads(line) for line in path.read_text().splitlines()]
        for rec in recs:
            rec["wall_time"] = wall[rec["step"]]
        path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return folder


def _err(capsys) -> list[str]:
    return capsys.readouterr().err.strip().splitlines()


def test_seeds_group_into_one_curve_other_configs_do_not(tmp_path):
    steps = {100: 1.0, 200: 2.0}
    a = [_run(tmp_path / f"s{s}", s, steps) for s in (1, 2, 3)]
    other_lr = _run(tmp_path / "lr", 1, steps, lr=0.01)
    other_world = _run(tmp_path / "w2", 4, steps, world=2)
    groups = group_runs([load_run(p) for p in [*a, other_lr, other_world]])
    assert [[r.name for r in g] for g in groups] == [["s1", "s2", "s3"], ["lr"], ["w2"]]


def test_aggregate_mean_and_student_t_band_on_a_common_grid():
    # Run B is logged at other steps and for longer: both are interpolated on the union of their steps, and
    # each counts where it has data: A alone at 0, both on [5, 20], B alone at 25.
    grid, mean, low, high, count = aggregate([([0, 10, 20], [0.0, 10.0, 20.0]), ([5, 15, 25], [15.0, 25.0, 35.0])])
    assert grid.tolist() == [0.0, 5.0, 10.0, 15.0, 20.0, 25.0]
    assert count.tolist() == [1, 2, 2, 2, 2, 1]
    np.testing.assert_allclose(mean, [0.0, 10.0, 15.0, 20.0, 25.0, 35.0])  # 0, (5 + 15) / 2, ..., 35
    # t(0.975, df=1) * s / sqrt(2) = 63.5 around each mean: cut to the values the runs reach, 0 to 35
    assert 12.706 * np.std([5.0, 15.0], ddof=1) / math.sqrt(2) > 35.0
    assert low[1:5].tolist() == [0.0] * 4 and high[1:5].tolist() == [35.0] * 4
    assert np.isnan(low[[0, 5]]).all() and np.isnan(high[[0, 5]]).all()  # one run there: no band
    _, mean3, low3, high3, _ = aggregate([([0, 1], [1.0, 1.0]), ([0, 1], [2.0, 2.0]), ([0, 1], [3.0, 3.0])])
    np.testing.assert_allclose(mean3, 2.0)
    assert low3.tolist() == [1.0, 1.0] and high3.tolist() == [3.0, 3.0]  # 2 +- 2.48 (t(0.975, df=2), s = 1), cut
    ten = aggregate([([0, 1], [float(v), float(v)]) for v in range(10)])  # 0..9: a band inside the values
    half = 2.262 * np.std(np.arange(10.0), ddof=1) / math.sqrt(10)  # t(0.975, df=9)
    np.testing.assert_allclose(ten.high - ten.mean, half)
    np.testing.assert_allclose(ten.mean - ten.low, half)
    _, one, low1, high1, count1 = aggregate([([0, 1], [4.0, 5.0])])
    assert one.tolist() == [4.0, 5.0] and count1.tolist() == [1, 1]
    assert np.isnan(low1).all() and np.isnan(high1).all()


def test_aggregate_holds_a_solved_run_and_leaves_gaps_empty():
    curves = [([0, 10, 20, 30], [0.0, 10.0, 20.0, 30.0]), ([0, 10], [50.0, 60.0])]
    held = aggregate(curves, hold=[False, True])  # run 2 reached stop_value at x=10: 60 carried to x=30
    assert held.count.tolist() == [2, 2, 2, 2]
    np.testing.assert_allclose(held.mean, [25.0, 35.0, 40.0, 45.0])
    assert 12.706 * np.std([20.0, 60.0], ddof=1) / math.sqrt(2) > 60.0  # the t half-width at x=20
    assert (held.low[2], held.high[2]) == (0.0, 60.0)  # cut to the lowest and highest value the runs reach
    ended = aggregate(curves, hold=[False, False])  # run 2 stopped otherwise: drawn to x=10 only
    assert ended.count.tolist() == [2, 2, 1, 1]
    np.testing.assert_allclose(ended.mean, [25.0, 35.0, 20.0, 30.0])
    # Two runs that never overlap: each alone where it has data, nothing between them.
    apart = aggregate([([0, 1], [1.0, 1.0]), ([3, 4], [5.0, 5.0])], grid_points=5)
    assert apart.grid.tolist() == [0.0, 1.0, 3.0, 4.0] and apart.count.tolist() == [1, 1, 1, 1]
    gap = aggregate([([0, 1], [1.0, 1.0]), ([3, 4], [5.0, 5.0])], grid_points=3)  # grid 0, 2, 4
    assert gap.count.tolist() == [1, 0, 1] and np.isnan(gap.mean[1])
    with pytest.raises(ValueError, match="hold has 1 entries for 2 curves"):
        aggregate(curves, hold=[True])


def _seed_line(fig):
    """The x and y of the first panel's line, and the band's upper edge at each of those x (NaN: no band)."""
    ax = fig.axes[0]
    (line,) = ax.get_lines()
    xs, ys = np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)
    upper = np.full(len(xs), np.nan)
    for band in ax.collections:
        for x, y in band.get_paths()[0].vertices:
            hit = np.isclose(xs, x)
            upper[hit] = np.fmax(upper[hit], y)
    return xs, ys, upper


def test_a_seed_that_reached_stop_value_holds_its_last_value(tmp_path):
    """Seed 3 solved the task at its first evaluation: the group keeps its 3 seeds over the whole range."""
    s1 = _run(tmp_path / "s1", 1, {100: 10.0, 200: 20.0, 300: 30.0})
    s2 = _run(tmp_path / "s2", 2, {100: 12.0, 200: 22.0, 300: 32.0})
    s3 = _run(tmp_path / "s3", 3, {100: 500.0}, stopped_by="stop_value")
    fig = build_figure([s1, s2, s3])
    xs, ys, upper = _seed_line(fig)
    assert xs.tolist() == [100.0, 200.0, 300.0]
    np.testing.assert_allclose(ys, [(10 + 12 + 500) / 3, (20 + 22 + 500) / 3, (30 + 32 + 500) / 3])
    half = [4.303 * np.std(v, ddof=1) / math.sqrt(3) for v in ([10, 12, 500], [20, 22, 500], [30, 32, 500])]
    assert (ys + half > 500).all() and upper.tolist() == [500.0] * 3  # a band over 3 seeds at every x, cut at 500
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == ["s1, s2, s3 (n=3, 1 held)"]
    assert "held: reached env.stop_value" in legend.get_title().get_text()


def test_a_seed_that_stopped_otherwise_is_drawn_to_where_it_ended(tmp_path):
    """Seed 3 crashed (no result.json) after one evaluation: 3 seeds at x=100, 2 after; seed 2 is still
    going too, but longest: with one run left at x=400, the mean is that run and there is no band."""
    s1 = _run(tmp_path / "s1", 1, {100: 10.0, 200: 20.0, 300: 30.0})
    s2 = _run(tmp_path / "s2", 2, {100: 12.0, 200: 22.0, 300: 32.0, 400: 42.0}, stopped_by=None)
    s3 = _run(tmp_path / "s3", 3, {100: 5.0}, stopped_by=None)
    fig = build_figure([s1, s2, s3])
    xs, ys, upper = _seed_line(fig)
    assert xs.tolist() == [100.0, 200.0, 300.0, 400.0]
    np.testing.assert_allclose(ys, [(10 + 12 + 5) / 3, 21.0, 31.0, 42.0])
    half3 = 4.303 * np.std([10, 12, 5], ddof=1) / math.sqrt(3)
    half2 = 12.706 * np.std([20, 22], ddof=1) / math.sqrt(2)
    np.testing.assert_allclose(upper[:3], [ys[0] + half3, 21.0 + half2, 42.0], rtol=1e-6)  # 43.7 cut at 42
    assert np.isnan(upper[3])
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["s1, s2, s3 (n=3, 2 ended early)"]
    assert "ended early: stopped otherwise" in fig.legends[0].get_title().get_text()


def test_plot_a_folder_of_runs(tmp_path, capsys):
    """``ding-dist plot runs``: the runs one and two levels down (not a run's own tb/), grouped as usual."""
    runs = tmp_path / "runs"
    for s in (1, 2):
        _run(runs / "sweep" / f"s{s}", s, {100: float(s), 200: 2.0 * s})
    _run(runs / "lr", 1, {100: 10.0, 200: 20.0}, lr=0.1)
    (runs / "notes").mkdir()  # neither a run nor holding any: skipped
    _run(runs / "deep" / "a" / "s9", 9, {100: 1.0})  # three levels down: not found
    assert main(["plot", str(runs)]) == 0
    out = runs / "learning_curve.png"
    assert capsys.readouterr().out.splitlines() == [f"{runs}: 3 runs (lr, sweep/s1, sweep/s2)", f"wrote {out}"]
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    fig = build_figure([runs])
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == ["learning_rate=0.1", "learning_rate=0.001 (n=2)"]
    np.testing.assert_allclose(fig.axes[0].get_lines()[1].get_ydata(), [1.5, 3.0])
    # A run given twice, as itself and inside its folder, is one run.
    assert len(build_figure([runs, runs / "lr"]).axes[0].get_lines()) == 2


def test_plot_a_folder_without_runs_is_one_line(tmp_path, capsys):
    empty = tmp_path / "empty"
    (empty / "a" / "b").mkdir(parents=True)
    assert main(["plot", str(empty)]) == 2
    (line,) = _err(capsys)
    assert line == (
        f"ding-dist: error: {str(empty)!r} is neither a run nor a folder of runs: no metrics.jsonl or TensorBoard "
        "events in it, its tb/, or the folders 2 levels below it"
    )
    assert not (empty / "learning_curve.png").exists()


def test_smooth_is_a_trailing_moving_average():
    assert smooth([1.0, 3.0, 5.0, 7.0], 1) == [1.0, 3.0, 5.0, 7.0]
    assert smooth([1.0, 3.0, 5.0, 7.0], 3) == [1.0, 2.0, 3.0, 5.0]
    with pytest.raises(ValueError):
        smooth([1.0], 0)


def test_figure_draws_mean_band_smoothing_and_wall_time(tmp_path):
    runs = [_run(tmp_path / f"s{s}", s, {100: s, 200: 2.0 * s, 300: 3.0 * s}) for s in (1, 2, 3)]
    alone = _run(tmp_path / "lr", 1, {100: 10.0, 200: 20.0, 300: 60.0}, lr=0.1,
                 wall={100: 1000.0, 200: 1004.0, 300: 1010.0})  # fmt: skip
    fig = build_figure([*runs, alone])
    ax = fig.axes[0]
    assert ax.get_title() == "eval/mean_reward"
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert set(lines) == {"learning_rate=0.001 (n=3)", "learning_rate=0.1"}
    np.testing.assert_allclose(lines["learning_rate=0.001 (n=3)"].get_ydata(), [2.0, 4.0, 6.0])
    assert len(ax.collections) == 1  # one band: the group of seeds; the lone run has none
    band = ax.collections[0].get_paths()[0].vertices
    assert (band[:, 1].min(), band[:, 1].max()) == (1.0, 9.0)  # 2 - 2.48 and 6 + 7.45, cut to the runs' values

    smoothed = build_figure([alone], smooth_window=2)
    np.testing.assert_allclose(smoothed.axes[0].get_lines()[0].get_ydata(), [10.0, 15.0, 40.0])
    by_wall = build_figure([alone], x="wall_time")
    assert by_wall.axes[0].get_lines()[0].get_xdata().tolist() == [0.0, 4.0, 10.0]
    assert by_wall.axes[0].get_xlabel() == "wall time (s since the first record)"  # logged without time/wall_time_s
    two = build_figure([alone], keys="eval/mean_reward,train/loss")
    assert [a.get_title() for a in two.axes] == ["eval/mean_reward", "train/loss"]


def _overlaps(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


@pytest.mark.parametrize("n_runs", [1, 10])
def test_png_is_readable_for_one_and_for_ten_runs(tmp_path, n_runs):
    dirs = [
        _run(tmp_path / f"run_{i}", 0, {s: float(i * s) for s in range(100, 1100, 100)}, lr=0.001 * (i + 1))
        for i in range(n_runs)
    ]
    fig = build_figure(dirs, keys=["eval/mean_reward", "train/loss"])
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    if n_runs == 1:
        assert not fig.legends  # the title names the run instead
        assert fig._suptitle.get_text() == "run_0"
    else:
        (legend,) = fig.legends  # one legend for all panels, outside every axes
        assert len(legend.get_texts()) == 10
        box = legend.get_window_extent(renderer)
        for ax in fig.axes:
            assert not _overlaps(box, ax.get_window_extent(renderer))
        assert box.y0 >= 0 and box.x0 >= 0 and box.x1 <= fig.bbox.x1  # inside the image
        labels = [t.get_text() for t in legend.get_texts()]
        assert labels[0] == "learning_rate=0.001" and len(set(labels)) == 10
    out = plot_curves(dirs, tmp_path / "c.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_runs_without_config_are_labelled_by_folder(tmp_path):
    for name in ("alpha", "beta"):
        with MetricWriter(tmp_path / name / "tb", tensorboard=False) as w:
            w.scalar("eval/mean_reward", 1.0, 10)
            w.scalar("eval/mean_reward", 2.0, 20)
    fig = build_figure([tmp_path / "alpha", tmp_path / "beta"])
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["alpha", "beta"]
    assert len(fig.axes[0].collections) == 0  # nothing says they are seeds of one config: no band


def test_cli_plot_options(tmp_path, capsys):
    dirs = [str(_run(tmp_path / f"s{s}", s, {100: s, 200: 2.0 * s})) for s in (1, 2)]
    out = tmp_path / "curves.png"
    argv = ["plot", *dirs, "--keys", "eval/mean_reward,train/loss", "--smooth", "2", "--x", "wall_time"]
    assert main([*argv, "--no-group", "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip() == f"wrote {out}"  # runs given one by one: no list of runs found
    assert out.stat().st_size > 1000


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--keys", "eval/mean_rewrd"], "unknown key 'eval/mean_rewrd' in"),
        (["--keys", ","], "--keys needs at least one metric name"),
        (["--smooth", "0"], "argument --smooth: must be >= 1, got 0"),
        (["--x", "time"], "argument --x: invalid choice: 'time'"),
        (["{missing}"], "experiment folder '{missing}' does not exist"),
        (["--out", "/sys/ding_dist_curve.png"], "--out '/sys/ding_dist_curve.png' cannot be written ("),
        (["--out", "{run}"], "--out must end in .png"),
        (["--out", "{run}.png/curve.png"], "cannot be written ('{run}.png' is a file); choose another path"),
    ],
)
def test_bad_plot_input_is_one_line_and_exit_2(tmp_path, capsys, extra, needle):
    run = _run(tmp_path / "r", 0, {100: 1.0})
    (tmp_path / "r.png").write_text("")
    missing = str(tmp_path / "nope")
    try:
        code = main(["plot", str(run), *[a.format(missing=missing, run=run) for a in extra]])
    except SystemExit as e:  # argparse errors
        code = e.code
    lines = _err(capsys)
    assert code == 2
    assert len(lines) == 1 and needle.format(missing=missing, run=run) in lines[0], lines
    assert capsys.readouterr().out == ""  # refused before any run was read
    if "unknown key" in needle:  # the keys that exist are listed
        assert "keys available: eval/mean_reward, train/loss" in lines[0]
    assert not (run / "learning_curve.png").exists()


def test_real_runs_group_by_seed(tmp_path):
    """Folders written by ``ding-dist train``: two seeds are one line with a band, another lr its own."""
    config = Path(__file__).resolve().parents[2] / "configs" / "cartpole_dqn_config.py"
    fast = ["policy.learn.learning_starts=0", "policy.learn.update_per_collect=2", "env.n_evaluator_episode=2",
            "policy.eval.eval_freq=256"]  # fmt: skip
    runs = {
        "s1": ["--seed", "1"],
        "s2": ["--seed", "2"],
        "lr": ["--seed", "1", "--set", "policy.learn.learning_rate=0.01"],
    }
    for name, extra in runs.items():
        argv = ["train", str(config), "--max-env-steps", "512", "--exp-dir", str(tmp_path / name), "--set", *fast]
        assert main([*argv, *extra]) == 0
    groups = group_runs([load_run(tmp_path / n) for n in runs])
    assert [[r.name for r in g] for g in groups] == [["s1", "s2"], ["lr"]]
    fig = build_figure([tmp_path / n for n in runs])
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == ["learning_rate=0.0023 (n=2)", "learning_rate=0.01"]
    assert len(fig.axes[0].collections) == 1


@pytest.mark.parametrize("groups", [3, 4, 7])
def test_long_labels_keep_the_legend_inside_the_image(tmp_path, groups):
    """Three or more lines whose labels name long config values (env ids alike at both ends: cut at either end,
    two would read the same, so they are shown whole): the legend fits the PNG, no label cut at an edge."""
    dirs = []
    for g in range(groups):
        for seed in (1, 2):  # a group of seeds: "(n=2)" or "(n=2, 1 ended early)" joins the label
            steps = {100: 1.0, 200: 2.0} if seed == 1 or g % 2 else {100: 1.0}
            folder = tmp_path / f"g{g}_s{seed}"
            _run(folder, seed, steps, lr=0.0001234567 * (g + 1))
            (folder / "config.py").write_text(
                f"main_config = dict(exp_name='x', seed={seed}, "
                f"env=dict(id='VeryLongEnvironmentName{g}OfATestWhoseNameIsLong-v0'), "
                f"policy=dict(learn=dict(learning_rate={0.0001234567 * (g + 1)}), model=dict(hidden_sizes="
                f"[{256 + g}, {256 + g}, {256 + g}])))\ncreate_config = dict(policy=dict(type='dqn'))\n"
            )
            dirs.append(folder)
    for keys in ("eval/mean_reward", "eval/mean_reward,train/loss"):
        fig = build_figure(dirs, keys=keys)
        fig.canvas.draw()
        (legend,) = fig.legends
        assert len(legend.get_texts()) == groups and max(len(t.get_text()) for t in legend.get_texts()) > 60
        renderer = fig.canvas.get_renderer()
        box = legend.get_window_extent(renderer)
        assert 0 <= box.x0 and box.x1 <= fig.bbox.x1 and 0 <= box.y0 and box.y1 <= fig.bbox.y1
        for text in legend.get_texts():
            extent = text.get_window_extent(renderer)
            assert 0 <= extent.x0 and extent.x1 <= fig.bbox.x1
        for ax in fig.axes:
            assert not _overlaps(box, ax.get_window_extent(renderer))


def test_wall_time_leaves_out_the_pause_before_a_resume(tmp_path):
    """--x wall_time is the training clock (time/wall_time_s): a run resumed 1000 s later goes on where it stopped;
    a record without that key (an evaluation of its own) is placed by its env step between the clock's records."""
    run = _run(tmp_path / "r", 0, {})
    with MetricWriter(run / "tb", tensorboard=False) as w:
        for step, train_s in ((100, 5.0), (200, 10.0), (300, 26.0), (400, 30.0)):  # 300, 400: after the resume
            w.scalars({"eval/mean_reward": step / 100, "time/wall_time_s": train_s}, step)
        w.scalars({"eval/mean_reward": 2.5}, 250)
    path = run / "tb" / "metrics.jsonl"
    recs = [json.loads(line) for line in path.read_text().splitlines()]
    for rec in recs:  # the record times: the resume came 1000 s after the last record before it
        rec["wall_time"] = {100: 0.0, 200: 5.0, 250: 1011.0, 300: 1016.0, 400: 1020.0}[rec["step"]]
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    line = build_figure([run], x="wall_time").axes[0].get_lines()[0]
    assert line.get_xdata().tolist() == [5.0, 10.0, 18.0, 26.0, 30.0]  # 250: halfway between 10 and 26
    assert line.get_ydata().tolist() == [1.0, 2.0, 2.5, 3.0, 4.0]
    assert build_figure([run], x="wall_time").axes[0].get_xlabel() == (
        "training time (s; pauses before a resume left out)"
    )


def test_band_iqm_draws_the_interquartile_mean_and_its_bootstrap_interval(tmp_path):
    # five seeds, one far off: the IQM (middle three) differs from the mean at every step
    values = {1: 1.0, 2: 2.0, 3: 3.0, 4: 4.0, 5: 100.0}
    runs = [_run(tmp_path / f"s{s}", s, {100: v, 200: 2.0 * v}) for s, v in values.items()]
    xs, ys, upper = _seed_line(build_figure(runs, band="iqm"))
    middle = sorted(values.values())[1:4]  # floor(5 / 4) = 1 cut from each end
    assert xs.tolist() == [100.0, 200.0]
    np.testing.assert_allclose(ys, [sum(middle) / 3, 2.0 * sum(middle) / 3])  # 3.0 and 6.0; the mean is 22, 44
    # the band: 2000 resamples of the five seeds with replacement (seed 0), the IQM of each, the 97.5th percentile
    rng = np.random.default_rng(0)
    seeds = np.array(list(values.values()))
    draws = seeds[rng.integers(0, 5, size=(2000, 5, 1))].reshape(2000, 5)
    iqms = [np.sort(d)[1:4].mean() for d in draws]
    np.testing.assert_allclose(upper, [np.percentile(iqms, 97.5), 2.0 * np.percentile(iqms, 97.5)])
    assert build_figure(runs).legends[0].get_title().get_text().startswith("mean and 95% CI")
    assert build_figure(runs, band="iqm").legends[0].get_title().get_text().startswith("IQM and stratified")


def test_smoothing_comes_after_a_solved_runs_hold(tmp_path):
    """Two seeds solved the task (500, stop_value) early, one ran on: with --smooth 3 the solved seeds end on 500
    (their held value, smoothed with itself), not on the average of their last three evaluations."""
    s1 = _run(tmp_path / "s1", 1, {100: 100.0, 200: 300.0, 300: 500.0}, stopped_by="stop_value")
    s2 = _run(tmp_path / "s2", 2, {100: 50.0, 200: 200.0, 300: 500.0}, stopped_by="stop_value")
    s3 = _run(tmp_path / "s3", 3, {100: 10.0, 200: 20.0, 300: 30.0, 400: 40.0, 500: 90.0, 600: 100.0})
    xs, ys, _ = _seed_line(build_figure([s1, s2, s3], smooth_window=3))
    assert xs.tolist() == [100.0, 200.0, 300.0, 400.0, 500.0, 600.0]
    s1_smoothed = [100.0, 200.0, 300.0, (300 + 500 + 500) / 3, 500.0, 500.0]
    s2_smoothed = [50.0, 125.0, 250.0, (200 + 500 + 500) / 3, 500.0, 500.0]
    s3_smoothed = [10.0, 15.0, 20.0, 30.0, (30 + 40 + 90) / 3, (40 + 90 + 100) / 3]
    np.testing.assert_allclose(ys, np.mean([s1_smoothed, s2_smoothed, s3_smoothed], axis=0))
    assert ys[-1] == pytest.approx((500 + 500 + 230 / 3) / 3)  # 358.9; smoothed before the hold it was 208.9
    unsmoothed = _seed_line(build_figure([s1, s2, s3]))[1]
    assert unsmoothed[-1] == pytest.approx((500 + 500 + 100) / 3)


def test_a_band_stays_within_the_values_the_runs_reach(tmp_path):
    """Three seeds with returns in [0, 500]: the Student t band (t = 4.3) would reach far below 0 and above 500."""
    runs = [_run(tmp_path / f"s{s}", s, {100: v, 200: v}) for s, v in ((1, 0.0), (2, 40.0), (3, 500.0))]
    ax = build_figure(runs).axes[0]
    band = ax.collections[0].get_paths()[0].vertices[:, 1]
    assert 180.0 - 4.303 * np.std([0, 40, 500], ddof=1) / math.sqrt(3) < 0.0
    assert (band.min(), band.max()) == (0.0, 500.0)
    iqm_band = build_figure(runs, band="iqm").axes[0].collections[0].get_paths()[0].vertices[:, 1]
    assert 0.0 <= iqm_band.min() and iqm_band.max() <= 500.0


def _config_run(folder: Path, seed: int, policy: str, world: int, lr: float) -> Path:
    """A run of ``policy`` on ``world`` processes whose config holds keys of its own (as DQN's and PPO's do)."""
    run = _run(folder, seed, {100: 1.0, 200: 2.0}, world=world)
    extra = "nstep=3" if policy == "dqn" else "gae_lambda=0.95"
    (run / "config.py").write_text(
        f"main_config = dict(exp_name='x', seed={seed}, env=dict(id='CartPole-v1'), policy=dict(learn=dict("
        f"learning_rate={lr}), {extra}))\ncreate_config = dict(env=dict(type='gym'), policy=dict(type={policy!r}), "
        "replay_buffer=dict(type='naive'))\n"
    )
    return run


def test_labels_name_the_keys_that_tell_the_lines_apart(tmp_path):
    """DQN on 1 and 2 processes and PPO: the labels name the policy type and the world size (keys shortened to
    their last parts), not the first of the keys DQN and PPO differ in, cut before the world size."""
    dirs = [
        _config_run(tmp_path / "dqn_w1", 0, "dqn", 1, 0.001),
        _config_run(tmp_path / "dqn_w2", 0, "dqn", 2, 0.001),
        _config_run(tmp_path / "ppo_w1", 0, "ppo", 1, 0.0003),
    ]
    fig = build_figure(dirs)
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == [
        "policy.type=dqn, world_size=1",
        "policy.type=dqn, world_size=2",
        "policy.type=ppo, world_size=1",
    ]
    # learning_rate, nstep and gae_lambda differ too: the legend says so rather than naming them all
    assert legend.get_title().get_text() == "3 other config values also differ between the lines"


def test_runs_that_repeat_a_seed_are_not_seeds(tmp_path):
    """Two seed-0 runs of one config are two lines (no band, no "n=2"); a third run repeating seed 1 of a group
    of seeds 1 and 2 is a line of its own beside that group."""
    a, b = _run(tmp_path / "a", 0, {100: 1.0, 200: 2.0}), _run(tmp_path / "b", 0, {100: 3.0, 200: 4.0})
    fig = build_figure([a, b])
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["a", "b"]
    assert len(fig.axes[0].collections) == 0 and fig.legends[0].get_title().get_text() == ""
    s1 = _run(tmp_path / "s1", 1, {100: 1.0, 200: 2.0}, lr=0.1)
    s2 = _run(tmp_path / "s2", 2, {100: 3.0, 200: 4.0}, lr=0.1)
    again = _run(tmp_path / "s1_again", 1, {100: 5.0, 200: 6.0}, lr=0.1)
    other = _run(tmp_path / "lr", 1, {100: 7.0, 200: 8.0}, lr=0.2)
    groups = group_runs([load_run(p) for p in (s1, s2, again, other)])
    assert [[r.name for r in g] for g in groups] == [["s1", "s2"], ["s1_again"], ["lr"]]
    labels = [t.get_text() for t in build_figure([s1, s2, again, other]).legends[0].get_texts()]
    assert labels == ["learning_rate=0.1 in s1, s2 (n=2)", "learning_rate=0.1 in s1_again", "learning_rate=0.2"]


def test_iqm_wording_only_where_an_iqm_is_computed(tmp_path):
    """--band iqm with 3 seeds draws their mean (an IQM cuts nothing under 4): the legend says mean; with 5 seeds
    it says IQM; with both kinds of group it says where the mean stands in."""
    three = [_run(tmp_path / f"a{s}", s, {100: float(s), 200: 2.0 * s}) for s in (1, 2, 3)]
    five = [_run(tmp_path / f"b{s}", s, {100: float(s), 200: 2.0 * s}, lr=0.1) for s in (1, 2, 3, 4, 5)]

    def title(dirs):
        return build_figure(dirs, band="iqm").legends[0].get_title().get_text().splitlines()[0]

    assert title(three) == "mean (an IQM needs 4 seeds or more) and stratified bootstrap 95% CI over the seeds " \
        "present at each x"  # fmt: skip
    np.testing.assert_allclose(_seed_line(build_figure(three, band="iqm"))[1], [2.0, 4.0])  # the plain mean
    assert title(five) == "IQM and stratified bootstrap 95% CI over the seeds present at each x"
    assert title([*three, *five]) == (
        "IQM (the plain mean where under 4 seeds) and stratified bootstrap 95% CI over the seeds present at each x"
    )


def test_python_plot_curves_refuses_a_missing_folder_and_creates_nothing(tmp_path):
    missing = tmp_path / "no_such_dir" / "x.png"
    with pytest.raises(ValueError, match="the folder of .*no_such_dir/x.png' does not exist"):
        plot_curves([str(tmp_path)], missing)
    assert not missing.parent.exists()
