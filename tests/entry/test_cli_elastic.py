"""``ding-dist train --nnodes MIN:MAX``: the torchrun arguments of one node, and bad input as one line before start
(the real join-and-leave run is tests/entry/test_elastic.py, quality-marked)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ding_dist.entry.cli import main
from ding_dist.entry.cli.elastic_launch import elastic_launcher_argv
from ding_dist.entry.cli.parser import build_parser
from ding_dist.entry.torchrun_job import JOB_FILE


def test_launcher_argv_of_a_node(monkeypatch):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    args = build_parser().parse_args(["train", "cfg.py", "--nnodes", "1:4", "--nproc", "2", "--rdzv-endpoint",
                                      "node0:29400", "--rdzv-host", "no", "--node-addr", "10.0.0.2",
                                      "--max-restarts", "3", "--exp-dir", "/shared/dqn"])  # fmt: skip
    argv = elastic_launcher_argv(args, 2, Path("/shared/dqn"), ["train", "cfg.py"])
    assert argv == ["--nnodes", "1:4", "--nproc-per-node", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint",
                    "node0:29400", "--rdzv-id", "dqn", "--rdzv-conf", "last_call_timeout=2,join_timeout=600,is_host=0",
                    "--max-restarts", "3", "--monitor-interval", "1", "--local-addr", "10.0.0.2",
                    "--module", "ding_dist.entry.cli", "train", "cfg.py"]  # fmt: skip
    monkeypatch.setenv("SLURM_JOB_ID", "4242")  # the job id every node of a SLURM job shares
    assert build_parser().parse_args(["train", "c.py", "--nnodes", "3"]).nnodes == (3, 3)
    args.rdzv_host = "auto"
    argv = elastic_launcher_argv(args, 2, Path("/shared/dqn"), [])
    assert argv[argv.index("--rdzv-id") + 1] == "4242" and "last_call_timeout=2,join_timeout=600" in argv


@pytest.mark.parametrize("bad", ["0:2", "3:2", "a:b", "1:2:3", ""])
def test_bad_nnodes_is_one_line(bad, capsys):
    with pytest.raises(SystemExit) as stop:
        build_parser().parse_args(["train", "cfg.py", "--nnodes", bad])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert f"{bad!r}: expected N or MIN:MAX with 1 <= MIN <= MAX" in err[-1]


def test_mistakes_are_one_line_before_any_process_starts(tmp_path, capsys):
    base = ["train", "cartpole_dqn", "--nnodes", "1:3", "--nproc", "2"]
    cases = {
        ("--rdzv-endpoint", "h:29400"): "--nnodes needs --exp-dir",
        ("--exp-dir", str(tmp_path / "a")): "--nnodes needs --rdzv-endpoint HOST:PORT",
        ("--exp-dir", str(tmp_path / "b"), "--rdzv-endpoint", "h:port"): "--rdzv-endpoint 'h:port': expected HOST:PORT",
        # 8 envs split over 2 and 4 processes, not over 6 (3 nodes x 2)
        ("--exp-dir", str(tmp_path / "c"), "--rdzv-endpoint", "h:29400"): "--nnodes 1:3 with 3 node(s): ",
    }
    for extra, message in cases.items():
        assert main([*base, *extra]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0], (extra, err)
    assert "env.collector_env_num=8 cannot be split over 6 processes" in err[0]


def test_a_folder_of_this_job_is_continued_not_refused(tmp_path, capsys):
    folder = tmp_path / "run"
    (folder / "ckpt").mkdir(parents=True)
    (folder / "result.json").write_text("{}")
    argv = ["train", "cartpole_dqn", "--nnodes", "1:3", "--nproc", "2", "--exp-dir", str(folder), "--rdzv-endpoint",
            "h:29400", "--rdzv-id", "job7"]  # fmt: skip
    assert main(argv) == 2
    assert "already holds a run" in capsys.readouterr().err  # another job's run: refused
    (folder / JOB_FILE).write_text("job7\n")
    assert main(argv) == 2  # this job's: past that check, refused only for the world of 6 it cannot split
    err = capsys.readouterr().err
    assert "already holds a run" not in err and "cannot be split over 6" in err


def test_a_reformed_job_continues_its_folder_and_another_job_is_refused(tmp_path, monkeypatch):
    from ding_dist.config import load_config
    from ding_dist.entry.experiment import Experiment
    from tests.entry.test_pipeline import tiny_dqn

    cfg, folder = load_config(tiny_dqn()), tmp_path / "run"
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "job7")
    with Experiment.open(cfg, exp_dir=folder, max_env_steps=64) as exp:
        assert (exp.rejoined, exp.continues) == (False, False)  # an empty folder: a fresh start
    assert (folder / JOB_FILE).read_text() == "job7\n"
    (folder / "result.json").write_text("{}")
    with Experiment.open(cfg, exp_dir=folder, max_env_steps=64) as exp:  # the job re-formed (restart count 0)
        assert (exp.rejoined, exp.continues, exp.restarts) == (True, True, 0)
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "job8")
    with pytest.raises(FileExistsError, match="already holds a run"):
        Experiment.open(cfg, exp_dir=folder, max_env_steps=64)
