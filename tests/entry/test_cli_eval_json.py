"""``ding-dist eval --json``: one JSON object with every episode's return and length."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ding_dist.entry import cli

PPO = Path(__file__).resolve().parents[2] / "configs" / "cartpole_ppo_config.py"


def test_eval_json_per_episode(tmp_path, capsys):
    run = tmp_path / "run"
    sizes = ["policy.collect.n_sample=64", "policy.learn.batch_size=32"]
    assert cli.main(["train", str(PPO), "--max-env-steps", "64", "--exp-dir", str(run), "--set", *sizes]) == 0
    capsys.readouterr()
    assert cli.main(["eval", str(PPO), "--ckpt", str(run), "--episodes", "3", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert len(record["episodes"]) == 3
    assert all(set(e) == {"return", "length"} for e in record["episodes"])
    assert all(e["length"] >= 1 and e["return"] == e["length"] for e in record["episodes"])  # CartPole: +1 a step
    returns = [e["return"] for e in record["episodes"]]
    assert record["mean_return"] == pytest.approx(sum(returns) / 3)
    assert record["checkpoint"].startswith(str(run))


def test_eval_video_records_each_episode(tmp_path, capsys):
    pytest.importorskip("pygame", reason="the render extra is not installed")
    pytest.importorskip("moviepy", reason="the render extra is not installed")
    run = tmp_path / "run"
    sizes = ["policy.collect.n_sample=64", "policy.learn.batch_size=32", "env.max_episode_steps=20"]
    assert cli.main(["train", str(PPO), "--max-env-steps", "64", "--exp-dir", str(run), "--set", *sizes]) == 0
    capsys.readouterr()
    out = tmp_path / "videos" / "cartpole.mp4"
    assert cli.main(["eval", str(PPO), "--ckpt", str(run), "--episodes", "2", "--video", str(out), "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    expected = [tmp_path / "videos" / f"cartpole-episode-{k}.mp4" for k in range(2)]
    assert record["videos"] == [str(p) for p in expected]
    assert all(p.stat().st_size > 1000 for p in expected)


def test_eval_video_needs_mp4(tmp_path, capsys):
    run = tmp_path / "run"
    sizes = ["policy.collect.n_sample=64", "policy.learn.batch_size=32"]
    assert cli.main(["train", str(PPO), "--max-env-steps", "64", "--exp-dir", str(run), "--set", *sizes]) == 0
    capsys.readouterr()
    assert cli.main(["eval", str(PPO), "--ckpt", str(run), "--episodes", "1", "--video", str(tmp_path / "x.avi")]) == 2
    assert "--video must end in .mp4" in capsys.readouterr().err
