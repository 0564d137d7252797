"""``ding-dist eval --json``: one JSON object with every episode's return and length; ``--video``: the file
named, one episode unless ``--episodes`` says otherwise, and nothing on stderr but our lines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ding_dist.entry import cli
from ding_dist.utils.install import install_hint

PPO = Path(__file__).resolve().parents[2] / "configs" / "cartpole_ppo_config.py"


def test_eval_json_per_episode(tmp_path, capsys):
    run = tmp_path / "run"
    sizes = ["policy.collect.n_sample=64", "policy.learn.batch_size=32"]
    assert cli.main(["train", str(PPO), "--max-env-steps", "64", "--exp-dir", str(run), "--set", *sizes]) == 0
    capsys.readouterr()
    assert cli.main(["eval", str(PPO), "--ckpt", str(run), "--episodes", "3", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert len(record["episodes"]) == 3
    assert all(set(e) == {"return", "length", "seed"} for e in record["episodes"])
    assert all(e["length"] >= 1 and e["return"] == e["length"] for e in record["episodes"])  # CartPole: +1 a step
    returns = [e["return"] for e in record["episodes"]]
    assert record["mean_return"] == pytest.approx(sum(returns) / 3)
    assert record["checkpoint"].startswith(str(run))


@pytest.fixture(scope="module")
def short_run(tmp_path_factory) -> Path:
    """A tiny PPO run whose episodes last exactly 5 steps (env.max_episode_steps=5: CartPole needs more
    than 5 steps to fail), so a recording's frame count is known: 6 per episode (the reset frame and 5)."""
    run = tmp_path_factory.mktemp("video") / "run"
    sizes = ["policy.collect.n_sample=64", "policy.learn.batch_size=32", "env.max_episode_steps=5"]
    assert cli.main(["train", str(PPO), "--max-env-steps", "64", "--exp-dir", str(run), "--set", *sizes]) == 0
    return run


def test_eval_video_writes_the_file_named_episodes_back_to_back(tmp_path, short_run, capsys):
    pytest.importorskip("pygame", reason="the render extra is not installed")
    pytest.importorskip("moviepy", reason="the render extra is not installed")
    imageio_ffmpeg = pytest.importorskip("imageio_ffmpeg")  # comes with moviepy
    capsys.readouterr()
    (tmp_path / "videos").mkdir()
    out = tmp_path / "videos" / "cartpole.mp4"
    assert cli.main(["eval", "--ckpt", str(short_run), "--episodes", "2", "--video", str(out), "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["videos"] == [str(out)]
    assert len(record["episodes"]) == 2
    assert sorted(p.name for p in out.parent.iterdir()) == ["cartpole.mp4"]  # no per-episode files, no temp
    frames, seconds = imageio_ffmpeg.count_frames_and_secs(str(out))
    assert frames == 2 * 6  # both episodes in the one file
    assert seconds == pytest.approx(12 / 50, abs=0.03)  # CartPole's render_fps of 50
    # Without --episodes: 10 evaluation episodes, 1 recorded.
    one = tmp_path / "one.mp4"
    assert cli.main(["eval", "--ckpt", str(short_run), "--video", str(one)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"evaluating {short_run / 'ckpt'}")
    assert lines[1] == f"wrote {one} (evaluated episode 1 of 10: 5 steps)"
    assert lines[2].endswith("over 10 episodes (seed 0)")
    assert imageio_ffmpeg.count_frames_and_secs(str(one))[0] == 6


def test_eval_video_prints_our_lines_only(tmp_path, short_run):
    """No gymnasium warning, no SDL complaint about the missing display/sound server (the subprocess has no
    XDG_RUNTIME_DIR and no SDL driver chosen): the INFO line of the fake link, and our lines on stdout."""
    pytest.importorskip("pygame", reason="the render extra is not installed")
    pytest.importorskip("moviepy", reason="the render extra is not installed")
    drop = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "XDG_RUNTIME_DIR", "SDL_VIDEODRIVER", "SDL_AUDIODRIVER")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["OMP_NUM_THREADS"] = "1"
    (tmp_path / "out.mp4").write_bytes(b"an older video")  # overwritten without a word
    cmd = [sys.executable, "-m", "ding_dist.entry.cli", "eval", "--ckpt", str(short_run), "--video", "out.mp4"]
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    for needle in ("Overwriting existing videos", "XDG_RUNTIME_DIR", "WARN", "ALSA", "Warning"):
        assert needle not in done.stderr, done.stderr
    assert [line for line in done.stderr.splitlines() if " INFO ding_dist." not in line] == []
    assert done.stdout.splitlines()[1] == "wrote out.mp4 (evaluated episode 1 of 10: 5 steps)"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.mp4"]
    assert (tmp_path / "out.mp4").stat().st_size > 1000


def test_eval_video_needs_mp4(tmp_path, short_run, capsys):
    capsys.readouterr()
    assert cli.main(["eval", "--ckpt", str(short_run), "--episodes", "1", "--video", str(tmp_path / "x.avi")]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == f"ding-dist: error: --video must end in .mp4, got {str(tmp_path / 'x.avi')!r}"


def test_missing_moviepy_is_one_line_with_the_one_install_command(tmp_path, short_run, capsys, monkeypatch):
    for name in [n for n in sys.modules if n == "moviepy" or n.startswith("moviepy.")] + ["moviepy"]:
        monkeypatch.setitem(sys.modules, name, None)  # import moviepy fails, as when it is not installed
    capsys.readouterr()
    out = tmp_path / "x.mp4"
    assert cli.main(["eval", "--ckpt", str(short_run), "--episodes", "1", "--video", str(out)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert [line for line in err if " INFO ding_dist." not in line] == [
        f"ding-dist: error: writing MP4 videos needs moviepy, part of the render extra: {install_hint('render')}"
    ]
    assert list(tmp_path.iterdir()) == []
