"""Config mistakes end with one ``ding-dist: error:`` line and exit code 2, before any process starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ding_dist.entry import cli
from ding_dist.entry.cli import checks

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def _variant(tmp_path: Path, name: str, old: str, new: str) -> str:
    source = (CONFIGS / name).read_text()
    assert old in source
    path = tmp_path / f"variant_{name}"
    path.write_text(source.replace(old, new))
    return str(path)


def _error_line(capsys, argv: list[str]) -> str:
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("ding-dist: error: ")
    return err


def test_misspelled_create_config_section(tmp_path, capsys):
    config = _variant(tmp_path, "cartpole_ppo_config.py", "env_manager=dict(", "env_manger=dict(")
    err = _error_line(capsys, ["train", config, "--exp-dir", str(tmp_path / "run")])
    assert "did you mean 'create_config.env_manager'?" in err


def test_misspelled_env_manager_type(tmp_path, capsys):
    config = _variant(
        tmp_path, "cartpole_ppo_config.py", 'env_manager=dict(type="sync")', 'env_manager=dict(type="asnyc")'
    )
    err = _error_line(capsys, ["train", config, "--exp-dir", str(tmp_path / "run")])
    assert "did you mean 'async'?" in err


def test_every_override_mistake_in_one_line(capsys, tmp_path):
    argv = ["train", str(CONFIGS / "cartpole_ppo_config.py"), "--exp-dir", str(tmp_path / "run"), "--set"]
    err = _error_line(capsys, [*argv, "policy.learn.batch_size=0", "env.collector_env_num=0", "policy.learn.lr=1"])
    assert "3 config errors: " in err


def test_dqn_on_box_action_space(tmp_path, capsys):
    config = _variant(tmp_path, "cartpole_dqn_config.py", '"CartPole-v1"', '"Pendulum-v1"')
    err = _error_line(capsys, ["train", config, "--exp-dir", str(tmp_path / "run")])
    assert "DQN needs a Discrete action space" in err


def test_nproc_that_cannot_split_the_batch(tmp_path, capsys):
    argv = ["train", str(CONFIGS / "cartpole_ppo_config.py"), "--nproc", "3", "--exp-dir", str(tmp_path / "run")]
    err = _error_line(capsys, argv)
    assert "batch_size=256 cannot be split over 3 processes: --set policy.learn.batch_size=255 or 258" in err
    assert not (tmp_path / "run").exists()


def test_learners_that_cannot_split_the_batch(tmp_path, capsys):
    """An actor-learner batch is split over the learners only; refused before any process starts."""
    argv = ["train", str(CONFIGS / "cartpole_ppo_config.py"), "--actors", "3", "--learners", "3",
            "--exp-dir", str(tmp_path / "run")]  # fmt: skip
    err = _error_line(capsys, argv)
    assert "batch_size=256 cannot be split over 3 processes: --set policy.learn.batch_size=255 or 258" in err
    assert err.rstrip().endswith("; or --learners 1, 2, 4 or 8, which split every size")
    assert not (tmp_path / "run").exists()


def test_more_processes_than_cores_warns_once(monkeypatch, capsys):
    monkeypatch.setattr(checks.os, "sched_getaffinity", lambda pid: {0, 1})
    cfg = checks.checked_config(CONFIGS / "cartpole_ppo_config.py", cli.build_parser().parse_args(
        ["train", str(CONFIGS / "cartpole_ppo_config.py")]), try_parts=True)  # fmt: skip
    checks.check_local_world(cfg, 4)
    err = capsys.readouterr().err
    assert err.count("warning: 4 processes on 2 CPU core(s)") == 1
    checks.check_local_world(cfg, 2)
    assert capsys.readouterr().err == ""


def test_nproc_that_cannot_split_the_envs(tmp_path, capsys):
    argv = ["train", str(CONFIGS / "cartpole_ppo_config.py"), "--nproc", "3", "--exp-dir", str(tmp_path / "run")]
    err = _error_line(capsys, [*argv, "--set", "policy.learn.batch_size=258", "policy.collect.n_sample=258"])
    assert "env.collector_env_num=8 cannot be split over 3 processes: --set env.collector_env_num=6 or 9; " in err
    assert err.rstrip().endswith("; or --nproc 1 or 2, which split every size")  # 258 and 8: both even


def test_nproc_above_the_env_count_says_what_to_set(tmp_path, capsys):
    """README's ``--nproc 64``: the env count to set, and the process counts that work, never an env count alone."""
    argv = ["train", "cartpole_ppo", "--nproc", "64", "--exp-dir", str(tmp_path / "run")]
    err = _error_line(capsys, argv)
    assert err == ("ding-dist: error: env.collector_env_num=8 cannot be split over 64 processes: --set "
                   "env.collector_env_num=64; or --nproc 1, 2, 4 or 8, which split every size\n")  # fmt: skip


def test_unknown_env_by_name_names_the_env_not_a_temporary_file(tmp_path, capsys):
    err = _error_line(capsys, ["train", "--algo", "ppo", "--env", "CartPole-v9", "--exp-dir", str(tmp_path / "r")])
    assert err.startswith("ding-dist: error: --env 'CartPole-v9': unknown environment id 'CartPole-v9'; close ")
    assert "'CartPole-v1'" in err and "preset" not in err and "config" not in err


def test_an_experiment_folder_that_cannot_be_written_is_one_line(tmp_path, capsys):
    (tmp_path / "a_file").write_text("")
    for exp_dir, why in ((tmp_path / "a_file" / "run", "is a file"), ("/proc/ding_dist_run", "at '/proc'")):
        for nproc in ("1", "2"):
            argv = ["train", str(CONFIGS / "cartpole_ppo_config.py"), "--nproc", nproc, "--exp-dir", str(exp_dir)]
            err = _error_line(capsys, argv)
            assert err.startswith(f"ding-dist: error: --exp-dir '{exp_dir}' cannot be written ("), err
            assert why in err and err.rstrip().endswith("; choose another folder")


def test_sample_groups_that_do_not_divide_each_ranks_envs(tmp_path, capsys):
    argv = ["train", str(CONFIGS / "cartpole_ppo_config.py"), "--exp-dir", str(tmp_path / "run"), "--set"]
    err = _error_line(capsys, [*argv, "env.sample_groups=3"])
    assert "env.sample_groups=3 must divide the collector envs of each rank (8)" in err
    err = _error_line(capsys, ["train", str(CONFIGS / "cartpole_ppo_config.py"), "--nproc", "2", "--exp-dir",
                               str(tmp_path / "run"), "--set", "env.sample_groups=8"])  # fmt: skip
    assert "env.sample_groups=8 must divide the collector envs of each rank (4)" in err
    assert not (tmp_path / "run").exists()


# ---- the environment and the paths: checked before any work -----------------------------------------------------
FAST = ["policy.learn.learning_starts=0", "policy.learn.update_per_collect=2", "env.n_evaluator_episode=2"]


@pytest.mark.parametrize(
    ("name", "value", "argv", "line"),
    [
        ("DING_DIST_TIMEOUT", "abc", ["train", "cartpole_dqn"], "DING_DIST_TIMEOUT='abc': expected a number of "
         "seconds > 0"),
        ("DING_DIST_TIMEOUT", "-5", ["train", "cartpole_dqn"], "DING_DIST_TIMEOUT='-5': expected a number of "
         "seconds > 0"),
        ("DING_DIST_BACKEND", "glooo", ["train", "cartpole_dqn", "--nproc", "2"], "DING_DIST_BACKEND='glooo': "
         "expected gloo, nccl (with CUDA GPUs), mpi, or a per-device list such as cpu:gloo,cuda:nccl"),
        ("DING_DIST_DEBUG", "maybe", ["eval", "cartpole_dqn", "--ckpt", "{run}"], "DING_DIST_DEBUG='maybe': "
         "expected 1 or 0 (or true/false, yes/no, on/off)"),
        ("DING_DIST_INIT_RETRIES", "-1", ["resume", "{run}"], "DING_DIST_INIT_RETRIES='-1': expected an integer >= 0"),
        ("DING_DIST_HEARTBEAT_S", "1e9999", ["train", "cartpole_dqn", "--nproc", "2"], "DING_DIST_HEARTBEAT_S="
         "'1e9999': expected a number of seconds >= 0 (0 turns the heartbeat off)"),
    ],
)  # fmt: skip
def test_a_bad_environment_variable_is_one_line_before_any_work(tmp_path, capsys, monkeypatch, name, value, argv,
                                                                 line):  # fmt: skip
    monkeypatch.setenv(name, value)
    run = tmp_path / "run"
    argv = [a.format(run=run) for a in argv] + (["--exp-dir", str(run)] if argv[0] == "train" else [])
    assert _error_line(capsys, argv) == f"ding-dist: error: {line}\n"
    assert list(tmp_path.iterdir()) == []  # nothing started, nothing written


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DING_DIST_", "RANK", "WORLD_SIZE", "LOCAL_"))}
    return {**env, "OMP_NUM_THREADS": "1", **extra}


TYPO_WARNINGS = [
    "ding-dist: warning: unknown variable DING_DIST_DEBG (ignored); did you mean DING_DIST_DEBUG?",
    "ding-dist: warning: unknown variable DING_DIST_TIMOUT (ignored); did you mean DING_DIST_TIMEOUT?",
]


def test_a_misspelt_variable_is_one_warning_per_job_not_per_rank(tmp_path):
    """``--nproc 2``: the launcher says it once; its two ranks (torchrun's RANK set, DING_DIST_ENV_CHECKED inherited)
    say nothing, and the run trains."""
    argv = ["train", "cartpole_dqn", "--nproc", "2", "--max-env-steps", "256", "--exp-dir", str(tmp_path / "run"),
            "--set", *FAST]  # fmt: skip
    done = subprocess.run([sys.executable, "-m", "ding_dist.entry.cli", *argv], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, env=_clean_env(DING_DIST_TIMOUT="5", DING_DIST_DEBG="1"))  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert [line for line in done.stderr.splitlines() if "warning: unknown variable" in line] == TYPO_WARNINGS
    assert json.loads((tmp_path / "run" / "result.json").read_text())["world_size"] == 2


def test_a_misspelt_variable_is_said_once_by_a_run_in_one_process(tmp_path, capsys, monkeypatch):
    """One process: the command says it, ``dist_init`` in the same process does not say it again."""
    monkeypatch.setenv("DING_DIST_TIMOUT", "5")
    monkeypatch.setenv("DING_DIST_DEBG", "1")
    monkeypatch.delenv("DING_DIST_ENV_CHECKED", raising=False)
    argv = ["train", "cartpole_dqn", "--max-env-steps", "256", "--exp-dir", str(tmp_path / "run"), "--set", *FAST]
    assert cli.main(argv) == 0
    err = capsys.readouterr().err.splitlines()
    assert [line for line in err if "warning: unknown variable" in line] == TYPO_WARNINGS
    assert "DING_DIST_ENV_CHECKED" not in os.environ  # set for the command's processes only


def test_an_output_file_in_a_missing_folder_is_refused_and_no_folder_is_made(tmp_path, capsys):
    missing = tmp_path / "missing_xyz"
    assert _error_line(capsys, ["plot", str(tmp_path), "--out", str(missing / "x.png")]) == (
        f"ding-dist: error: --out '{missing / 'x.png'}': folder '{missing}' does not exist\n"
    )
    ckpt = tmp_path / "any.pt"  # refused before the checkpoint is read
    ckpt.write_bytes(b"x")
    for flag, name in (("--gif", "x.gif"), ("--video", "x.mp4")):
        line = _error_line(capsys, ["eval", "cartpole_dqn", "--ckpt", str(ckpt), flag, str(missing / "sub" / name)])
        sub = missing / "sub"
        assert line == f"ding-dist: error: {flag} '{sub / name}': folder '{sub}' does not exist\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["any.pt"]


def test_a_config_name_with_a_typo_gets_the_closest_names_first(capsys):
    err = _error_line(capsys, ["train", "cartpole_ppx"])
    assert err.startswith("ding-dist: error: config file 'cartpole_ppx' does not exist and is not a shipped config; "
                          "did you mean 'cartpole_ppo' or 'cartpole_ppg' or 'cartpole_pg'? the shipped configs: "
                          "acrobot_dqn, breakout_ppo, ")  # fmt: skip


@pytest.mark.skipif(torch.cuda.device_count() > 0, reason="this machine has CUDA GPUs")
def test_cuda_asked_on_a_machine_without_cuda_says_there_is_none(tmp_path, capsys):
    for key in ("policy.device", "actor_learner.actor_device"):
        err = _error_line(capsys, ["train", "cartpole_dqn", "--exp-dir", str(tmp_path / "r"), "--set", f"{key}=cuda"])
        assert err == (f"ding-dist: error: --set {key}=cuda: this machine has no CUDA (torch sees no CUDA device); use "
                       f"{key}=cpu, or {key}=auto (the rank's GPU where there is one, else the CPU)\n")  # fmt: skip
    assert list(tmp_path.iterdir()) == []
