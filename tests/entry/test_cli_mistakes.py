"""Config mistakes end with one ``ding-dist: error:`` line and exit code 2, before any process starts."""

from __future__ import annotations

from pathlib import Path

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
    cfg = checks.check_compiles(CONFIGS / "cartpole_ppo_config.py", cli.build_parser().parse_args(
        ["train", str(CONFIGS / "cartpole_ppo_config.py")]))  # fmt: skip
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
