"""``ding-dist eval --gif OUT.gif``: the evaluated episodes, back to back, as one animated GIF (rgb_array frames
written with Pillow); the message when the render extra is missing."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from easydict import EasyDict

from ding_dist.entry import cli
from ding_dist.entry.cli.video import record_gif, write_gif
from ding_dist.utils.install import install_hint

Image = pytest.importorskip("PIL.Image")
PPO = Path(__file__).resolve().parents[2] / "configs" / "cartpole_ppo_config.py"


@pytest.fixture(scope="module")
def ppo_run(tmp_path_factory) -> Path:
    """A tiny PPO run whose episodes last exactly 5 steps (CartPole needs more to fail): 6 frames each."""
    run = tmp_path_factory.mktemp("gif") / "run"
    sizes = ["policy.collect.n_sample=64", "policy.learn.batch_size=32", "env.max_episode_steps=5"]
    assert cli.main(["train", str(PPO), "--max-env-steps", "64", "--exp-dir", str(run), "--set", *sizes]) == 0
    return run


def test_write_gif_frames_timing_and_size(tmp_path):
    frames = [np.full((300, 600, 3), (40 * k, 0, 255 - 40 * k), np.uint8) for k in range(5)]
    out = write_gif(frames, tmp_path / "a.gif", fps=50, max_width=300)
    with Image.open(out) as gif:
        assert gif.format == "GIF" and gif.n_frames == 5
        assert gif.size == (300, 150)  # scaled to max_width, aspect kept
        assert gif.info["duration"] == 20 and gif.info["loop"] == 0
        gif.seek(4)
        r, g, b = gif.convert("RGB").getpixel((10, 10))
        assert abs(r - 160) <= 8 and g <= 8 and abs(b - 95) <= 8  # the last frame's colour
    assert not list(out.parent.glob(".*tmp"))  # written through a temporary file
    with pytest.raises(ValueError, match="no frames"):
        write_gif([], tmp_path / "b.gif")
    with pytest.raises(FileNotFoundError):  # an output's missing folder is not created
        write_gif(frames, tmp_path / "missing" / "c.gif")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.gif"]


class _Left:
    """A policy that always pushes left."""

    def eval_action(self, obs: np.ndarray) -> np.ndarray:
        return np.zeros(len(obs), dtype=np.int64)


def test_record_gif_one_frame_per_step_episodes_back_to_back(tmp_path):
    pytest.importorskip("pygame", reason="the render extra is not installed")
    cfg = EasyDict(env={"id": "CartPole-v1", "env_kwargs": {}, "entry_point": None, "max_episode_steps": None})
    lengths = []
    for k in range(2):  # the same episodes, played without rendering
        env = gym.make("CartPole-v1")
        env.reset(seed=7 + k)
        steps, done = 0, False
        while not done:
            _, _, terminated, truncated, _ = env.step(0)
            steps, done = steps + 1, terminated or truncated
        lengths.append(steps)
        env.close()
    recorded = record_gif(cfg, _Left(), tmp_path / "cart.gif", seeds=[7, 8])
    assert recorded == (tmp_path / "cart.gif", lengths, [float(n) for n in lengths])  # CartPole: +1 a step
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cart.gif"]
    with Image.open(tmp_path / "cart.gif") as gif:
        assert gif.size[0] <= 480
        # Each episode's reset frame and one per step, at CartPole's render_fps of 50.
        assert _duration_ms(gif) == 20 * (lengths[0] + 1 + lengths[1] + 1)
    assert record_gif(cfg, _Left(), tmp_path / "one.gif", seeds=[7]).path == tmp_path / "one.gif"
    with Image.open(tmp_path / "one.gif") as gif:
        assert _duration_ms(gif) == 20 * (lengths[0] + 1)


def _duration_ms(gif) -> int:
    """A GIF's play time (Pillow merges identical frames into one longer frame: count durations, not frames)."""
    total = 0
    for i in range(gif.n_frames):
        gif.seek(i)
        total += gif.info["duration"]
    return total


def test_eval_gif_from_the_cli(tmp_path, ppo_run, capsys):
    """One episode recorded unless --episodes says otherwise (the evaluation itself plays 10 by default)."""
    pytest.importorskip("pygame", reason="the render extra is not installed")
    capsys.readouterr()
    (tmp_path / "gifs").mkdir()
    out = tmp_path / "gifs" / "cartpole.gif"
    assert cli.main(["eval", "--ckpt", str(ppo_run), "--gif", str(out), "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["gifs"] == [str(out)] and len(record["episodes"]) == 10
    with Image.open(out) as gif:
        assert _duration_ms(gif) == 20 * 6  # one 5-step episode
    assert cli.main(["eval", "--ckpt", str(ppo_run), "--episodes", "2", "--gif", str(out)]) == 0
    assert capsys.readouterr().out.splitlines()[1] == f"wrote {out} (the 2 evaluated episodes: 5, 5 steps)"
    with Image.open(out) as gif:
        assert _duration_ms(gif) == 20 * 12
    assert sorted(p.name for p in out.parent.iterdir()) == ["cartpole.gif"]


def _without(monkeypatch, module: str) -> None:
    """Make ``import module`` (and its sub-modules) fail, as when the package is not installed."""
    for name in [n for n in sys.modules if n == module or n.startswith(module + ".")] + [module]:
        monkeypatch.setitem(sys.modules, name, None)


def test_missing_pygame_is_one_line_with_the_one_install_command(tmp_path, ppo_run, capsys, monkeypatch):
    _without(monkeypatch, "pygame")
    capsys.readouterr()
    out = tmp_path / "x.gif"
    assert cli.main(["eval", "--ckpt", str(ppo_run), "--episodes", "1", "--gif", str(out)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert [line for line in err if " INFO ding_dist." not in line] == [
        f"ding-dist: error: rendering 'CartPole-v1' needs pygame, part of the render extra: {install_hint('render')}"
    ]
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_eval_gif_needs_gif_suffix(tmp_path, ppo_run, capsys):
    capsys.readouterr()
    code = cli.main(["eval", "--ckpt", str(ppo_run), "--episodes", "1", "--gif", str(tmp_path / "x.png")])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "--gif must end in .gif" in lines[0]
    assert not (tmp_path / "x.png").exists()


@pytest.mark.parametrize(("flag", "name"), [("--gif", "x.gif"), ("--video", "x.mp4")])
def test_an_output_that_cannot_be_written_is_one_line_before_any_episode(tmp_path, ppo_run, capsys, flag, name):
    capsys.readouterr()
    (tmp_path / "a_file").write_text("")
    blocked = tmp_path / "a_file" / name
    missing = tmp_path / "missing" / name  # its folder is never created
    for out, needle in (
        (f"/sys/{name}", f"{flag} '/sys/{name}' cannot be written ("),
        (blocked, f"{flag} '{blocked}' cannot be written ('{tmp_path / 'a_file'}' is a file); choose another path"),
        (missing, f"{flag} '{missing}'"),
    ):
        code = cli.main(["eval", "--ckpt", str(ppo_run), "--episodes", "1", flag, str(out)])
        captured = capsys.readouterr()
        lines = [line for line in captured.err.splitlines() if " INFO ding_dist." not in line]
        assert code == 2 and len(lines) == 1 and lines[0].startswith(f"ding-dist: error: {needle}")
        assert captured.out == ""  # no evaluation ran, nothing was rendered
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file"]
