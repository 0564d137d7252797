"""ding-dist CLI: bad input gives one clear line on stderr and exit code 2; parsing and plotting helpers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ding_dist.entry.cli import build_parser, load_curves, main, plot_curves, resolve_checkpoint
from ding_dist.utils import CheckpointManager, MetricWriter


def _run(argv: list[str], capsys) -> tuple[int, str]:
    try:
        code = main(argv)
    except SystemExit as e:  # argparse errors
        code = e.code
    err = capsys.readouterr().err
    return code, err


@pytest.fixture
def cfg_file(tmp_path: Path) -> Path:
    p = tmp_path / "tiny_config.py"
    p.write_text("main_config = dict(exp_name='tiny')\ncreate_config = dict(policy=dict(type='dqn'))\n")
    return p


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["train", "{missing}"], "config file '{missing}' does not exist"),
        (["train", "{cfg}", "--nproc", "0"], "argument --nproc: must be an integer >= 1 or auto, got '0'"),
        (["train", "{cfg}", "--nproc", "two"], "argument --nproc: must be an integer >= 1 or auto, got 'two'"),
        (["train", "{cfg}", "--set", "policy.learn.batch_size"], "bad override 'policy.learn.batch_size'"),
        (["train", "{cfg}", "--set", "a..b=1"], "bad override 'a..b=1'"),
        (["train", "{cfg}", "--seed", "-1"], "argument --seed: must be >= 0, got -1"),
        (["train", "{cfg}", "--max-env-steps", "0"], "argument --max-env-steps: must be >= 1, got 0"),
        (["train", "{cfg}", "--resume", "{missing}"], "--resume '{missing}' is not an experiment folder"),
        (["train", "{cfg}", "--nproc=2", "--bogus"], "unrecognized arguments: --bogus"),
        (["train", "{cfg}", "--npro", "2"], "unrecognized arguments: --npro"),  # no silent abbreviations
        (["train", "{broken}"], "SyntaxError"),
        (["eval", "{cfg}"], "the following arguments are required: --ckpt"),
        (["eval", "{cfg}", "--ckpt", "{missing}"], "checkpoint '{missing}' does not exist"),
        (["eval", "{cfg}", "--ckpt", "{tmp}"], "no complete checkpoint in"),
        (["eval", "{cfg}", "--ckpt", "{garbage}", "--episodes", "0"], "argument --episodes: must be >= 1"),
        (["plot", "{missing}"], "experiment folder '{missing}' does not exist"),
        (["plot", "{tmp}"], "no metrics.jsonl or TensorBoard events"),
        (["plot", "{tmp}", "--out", "{tmp}/x.jpg"], "--out must end in .png"),
        (["fly"], "invalid choice: 'fly'"),
        ([], "the following arguments are required"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, needle, tmp_path, cfg_file, capsys):
    broken = tmp_path / "broken_config.py"
    broken.write_text("main_config = dict(\n")
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"xx")
    names = {
        "missing": str(tmp_path / "missing_config.py"),
        "cfg": str(cfg_file),
        "broken": str(broken),
        "tmp": str(tmp_path),
        "garbage": str(garbage),
    }
    code, err = _run([a.format(**names) for a in argv], capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("ding-dist: error: ") and needle.format(**names) in lines[0]
    assert "Traceback" not in err


def test_console_script_exit_code(tmp_path):
    exe = Path(sys.executable).with_name("ding-dist")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "ding_dist.entry.cli"]
    out = subprocess.run([*cmd, "train", str(tmp_path / "nope.py")], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert out.stderr.strip() == f"ding-dist: error: config file '{tmp_path / 'nope.py'}' does not exist"


def test_parser_collects_overrides_and_defaults():
    args = build_parser().parse_args(
        ["train", "c.py", "--set", "a.b=1", "c=x", "--set", "d=[1, 2]", "--exp-dir", "out", "--max-env-steps", "64"]
    )
    assert args.overrides == ["a.b=1", "c=x", "d=[1, 2]"]
    # --nproc unset: 1 process, or a resumed run's own world size
    assert (args.nproc, args.seed, args.exp_dir, args.max_env_steps, args.resume) == (None, None, "out", 64, None)
    ev = build_parser().parse_args(["eval", "c.py", "--ckpt", "k.pt"])
    assert (ev.episodes, ev.seed) == (10, 0)


def test_resolve_checkpoint_picks_newest_complete(tmp_path):
    mgr = CheckpointManager(tmp_path / "ckpt")
    mgr.save({"step": 1}, 1)
    mgr.save({"step": 2}, 2)
    mgr.path_for(2).write_bytes(b"truncated")
    assert resolve_checkpoint(tmp_path) == mgr.path_for(1)
    assert resolve_checkpoint(tmp_path / "ckpt") == mgr.path_for(1)
    assert resolve_checkpoint(mgr.path_for(2)) == mgr.path_for(2)  # an explicit file is taken as given


def _write_run(exp: Path, scale: float, tensorboard: bool) -> None:
    with MetricWriter(exp / "tb", tensorboard=tensorboard) as w:
        for step in range(100, 600, 100):
            w.scalars({"rollout/ep_rew_mean": scale * step, "train/loss": 1.0}, step)
            if step % 200 == 0:
                w.scalar("eval/mean_reward", scale * step + 1, step)


def test_plot_from_jsonl_and_from_tensorboard_events(tmp_path, capsys):
    _write_run(tmp_path / "a", 0.1, tensorboard=True)
    curves = load_curves(tmp_path / "a")
    assert curves["eval/mean_reward"] == [(200, 21.0), (400, 41.0)]
    assert [s for s, _ in curves["rollout/ep_rew_mean"]] == [100, 200, 300, 400, 500]
    (tmp_path / "a" / "tb" / "metrics.jsonl").unlink()  # now only the TensorBoard events are left
    assert load_curves(tmp_path / "a") == curves
    _write_run(tmp_path / "b", 0.2, tensorboard=False)
    out = tmp_path / "cmp.png"
    assert main(["plot", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"wrote {out}" in capsys.readouterr().out
    assert main(["plot", str(tmp_path / "b")]) == 0
    assert (tmp_path / "b" / "learning_curve.png").stat().st_size > 1000


def test_plot_curves_without_wanted_keys(tmp_path):
    with MetricWriter(tmp_path / "tb", tensorboard=False) as w:
        w.scalar("train/loss", 1.0, 1)
    with pytest.raises(Exception, match="no rollout/ep_rew_mean or eval/mean_reward records"):
        plot_curves([tmp_path], tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()


def test_help_lists_every_command_and_each_shows_examples(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--help"])
    assert "{train,resume,eval,plot,config,ckpt}" in capsys.readouterr().out
    for command in ("train", "resume", "eval", "plot", "config", "ckpt"):
        with pytest.raises(SystemExit):
            build_parser().parse_args([command, "--help"])
        text = capsys.readouterr().out
        assert "\nexamples:\n  ding-dist " in text, command


def test_resume_is_train_resume_without_the_options_that_start_a_run():
    args = build_parser().parse_args(["resume", "runs/x", "--max-env-steps", "64", "--nproc", "2"])
    assert (args.command, args.resume, args.max_env_steps, args.nproc, args.config) == ("resume", "runs/x", 64, 2, None)
    for option in ("--algo", "--env", "--exp-dir"):
        with pytest.raises(SystemExit):
            build_parser().parse_args(["resume", "runs/x", option, "v"])
