"""ding-dist plot: seeds grouped into a mean and a 95% band, --smooth, --keys, --x, readable legends,
and bad input as one line with exit code 2."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from ding_dist.entry.cli import main
from ding_dist.entry.plot import aggregate, build_figure, group_runs, load_run, plot_curves, smooth
from ding_dist.utils import MetricWriter


def _run(
    folder: Path,
    seed: int,
    evals: dict[int, float],
    lr: float = 0.001,
    world: int = 1,
    wall: dict[int, float] | None = None,
) -> Path:
    """A run folder as ``ding-dist train`` leaves it: config.py, result.json and tb/metrics.jsonl."""
    folder.mkdir(parents=True)
    (folder / "config.py").write_text(
        f"main_config = dict(exp_name={folder.name!r}, seed={seed}, policy=dict(learn=dict(learning_rate={lr})))\n"
        "create_config = dict(policy=dict(type='dqn'))\n"
    )
    (folder / "result.json").write_text(json.dumps({"world_size": world}))
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
    # Run B is logged at other steps and for longer: the grid is the overlap [5, 20], both interpolated.
    grid, mean, low, high = aggregate([([0, 10, 20], [0.0, 10.0, 20.0]), ([5, 15, 25], [15.0, 25.0, 35.0])])
    assert grid.tolist() == [5.0, 10.0, 15.0, 20.0]
    np.testing.assert_allclose(mean, [10.0, 15.0, 20.0, 25.0])  # (5 + 15) / 2, (10 + 20) / 2, ...
    half = 12.706 * np.std([5.0, 15.0], ddof=1) / math.sqrt(2)  # t(0.975, df=1)
    np.testing.assert_allclose(high - mean, half)
    np.testing.assert_allclose(mean - low, half)
    _, mean3, low3, high3 = aggregate([([0, 1], [1.0, 1.0]), ([0, 1], [2.0, 2.0]), ([0, 1], [3.0, 3.0])])
    np.testing.assert_allclose(mean3, 2.0)
    np.testing.assert_allclose(high3 - mean3, 4.303 * 1.0 / math.sqrt(3))  # t(0.975, df=2), s = 1
    _, one, low1, high1 = aggregate([([0, 1], [4.0, 5.0])])
    assert one.tolist() == low1.tolist() == high1.tolist() == [4.0, 5.0]


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
    half = 4.303 * 1.0 / math.sqrt(3)  # seeds' values at step 100: 1, 2, 3
    assert band[:, 1].max() == pytest.approx(6.0 + 3 * half, rel=1e-3)

    smoothed = build_figure([alone], smooth_window=2)
    np.testing.assert_allclose(smoothed.axes[0].get_lines()[0].get_ydata(), [10.0, 15.0, 40.0])
    by_wall = build_figure([alone], x="wall_time")
    assert by_wall.axes[0].get_lines()[0].get_xdata().tolist() == [0.0, 4.0, 10.0]
    assert by_wall.axes[0].get_xlabel() == "wall time (s)"
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
    assert capsys.readouterr().out.strip() == f"wrote {out}"
    assert out.stat().st_size > 1000


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--keys", "eval/mean_rewrd"], "unknown key 'eval/mean_rewrd' in"),
        (["--keys", ","], "--keys needs at least one metric name"),
        (["--smooth", "0"], "argument --smooth: must be >= 1, got 0"),
        (["--x", "time"], "argument --x: invalid choice: 'time'"),
        (["{missing}"], "experiment folder '{missing}' does not exist"),
    ],
)
def test_bad_plot_input_is_one_line_and_exit_2(tmp_path, capsys, extra, needle):
    run = _run(tmp_path / "r", 0, {100: 1.0})
    missing = str(tmp_path / "nope")
    try:
        code = main(["plot", str(run), *[a.format(missing=missing) for a in extra]])
    except SystemExit as e:  # argparse errors
        code = e.code
    lines = _err(capsys)
    assert code == 2
    assert len(lines) == 1 and needle.format(missing=missing) in lines[0], lines
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
