"""Experiment folders: a new run never mixes into an old one."""

import json
from pathlib import Path

import pytest

from ding_dist.entry import pipeline
from ding_dist.entry.cli import main as cli_main
from ding_dist.entry.exp_folder import release_claim

CONFIG = str(Path(__file__).resolve().parents[2] / "configs" / "cartpole_dqn_config.py")
FAST = ("policy.learn.learning_starts=0", "env.n_evaluator_episode=1")


def test_default_folder_gets_the_seed_and_a_timestamp_when_taken(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert pipeline.default_exp_dir("x", 3) == Path("runs/x")
    release_claim("runs/x")
    assert not (tmp_path / "runs" / "x").exists(), "a claimed folder no run took is removed again"
    (tmp_path / "runs" / "x").mkdir(parents=True)
    assert pipeline.default_exp_dir("x", 3) == Path("runs/x"), "an empty folder is not a run"
    release_claim("runs/x")
    assert sorted(p.name for p in (tmp_path / "runs" / "x").iterdir()) == [], "nor one it did not create"
    (tmp_path / "runs" / "x" / "result.json").write_text("{}")
    stamped = pipeline.default_exp_dir("x", 3)
    assert stamped.parent == Path("runs") and stamped.name.startswith("x_seed3_")
    assert len(stamped.name) == len("x_seed3_") + 13 and stamped.is_dir()


def test_second_run_goes_to_a_new_folder_and_explicit_reuse_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    first = pipeline.train(CONFIG, max_env_steps=256, overrides=FAST)
    second = pipeline.train(CONFIG, max_env_steps=256, overrides=FAST)
    assert first["exp_dir"] != second["exp_dir"]
    assert json.loads((Path(first["exp_dir"]) / "result.json").read_text())["env_steps"] == 256
    with pytest.raises(FileExistsError, match="already holds a run"):
        pipeline.train(CONFIG, max_env_steps=256, overrides=FAST, exp_dir=first["exp_dir"])
    assert cli_main(["train", CONFIG, "--exp-dir", first["exp_dir"], "--max-env-steps", "256"]) == 2


def test_the_cli_says_once_which_folder_it_chose_and_shows_folders_as_given(tmp_path, monkeypatch, capsys):
    """The default folder is chosen (and its log line printed) once, by the command, which every rank then gets; an
    absolute --exp-dir is shown absolute."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs" / "cartpole_dqn").mkdir(parents=True)
    (tmp_path / "runs" / "cartpole_dqn" / "result.json").write_text("{}")
    assert cli_main(["train", CONFIG, "--max-env-steps", "64", "--set", *FAST]) == 0
    out, err = capsys.readouterr()
    assert err.count("runs/cartpole_dqn already holds a run; this one goes to runs/cartpole_dqn_") == 1
    (chosen,) = [p for p in (tmp_path / "runs").iterdir() if p.name != "cartpole_dqn"]
    assert _trained_line(out).endswith(f"; result: runs/{chosen.name}/result.json")
    absolute = tmp_path / "abs"
    assert cli_main(["train", CONFIG, "--max-env-steps", "64", "--exp-dir", str(absolute), "--set", *FAST]) == 0
    out, err = capsys.readouterr()
    assert _trained_line(out).endswith(f"; result: {absolute}/result.json") and f"exp dir {absolute}\n" in err


def test_a_rank_leaves_the_interrupt_line_to_its_launcher(monkeypatch, capsys):
    """Ctrl-C with --nproc: the launcher says "stopped by SIGINT" once; the ranks say nothing more."""
    from ding_dist.entry.cli import commands

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(commands, "config_show", interrupted)
    monkeypatch.delenv("RANK", raising=False)
    assert cli_main(["config", "show", CONFIG]) == 130
    assert capsys.readouterr().err == "ding-dist: interrupted (SIGINT)\n"
    monkeypatch.setenv("RANK", "1")
    assert cli_main(["config", "show", CONFIG]) == 130
    assert capsys.readouterr().err == ""


def _trained_line(out: str) -> str:
    (line,) = [line for line in out.splitlines() if line.startswith("trained ")]
    return line
