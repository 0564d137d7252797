"""Experiment folders: a new run never mixes into an old one."""

import json
from pathlib import Path

import pytest

from ding_dist.entry import pipeline
from ding_dist.entry.cli import main as cli_main

CONFIG = str(Path(__file__).resolve().parents[2] / "configs" / "cartpole_dqn_config.py")
FAST = ("policy.learn.learning_starts=0", "env.n_evaluator_episode=1")


def test_default_folder_gets_a_timestamp_when_taken(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert pipeline.default_exp_dir("x") == Path("runs/x")
    (tmp_path / "runs" / "x").mkdir(parents=True)
    assert pipeline.default_exp_dir("x") == Path("runs/x"), "an empty folder is not a run"
    (tmp_path / "runs" / "x" / "result.json").write_text("{}")
    stamped = pipeline.default_exp_dir("x")
    assert stamped.parent == Path("runs") and stamped.name.startswith("x_") and len(stamped.name) == len("x_") + 13


def test_second_run_goes_to_a_new_folder_and_explicit_reuse_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    first = pipeline.train(CONFIG, max_env_steps=256, overrides=FAST)
    second = pipeline.train(CONFIG, max_env_steps=256, overrides=FAST)
    assert first["exp_dir"] != second["exp_dir"]
    assert json.loads((Path(first["exp_dir"]) / "result.json").read_text())["env_steps"] == 256
    with pytest.raises(FileExistsError, match="already holds a run"):
        pipeline.train(CONFIG, max_env_steps=256, overrides=FAST, exp_dir=first["exp_dir"])
    assert cli_main(["train", CONFIG, "--exp-dir", first["exp_dir"], "--max-env-steps", "256"]) == 2
