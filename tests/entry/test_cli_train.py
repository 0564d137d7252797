"""ding-dist train / eval / plot end to end, and the @dist_mode entry scripts, on tiny runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ding_dist.entry.cli import main

REPO = Path(__file__).resolve().parents[2]
DQN_CONFIG = REPO / "configs" / "cartpole_dqn_config.py"
ENTRY = REPO / "entry" / "cartpole_dqn_main.py"
# Small and fast: learning starts at once, few updates per collect.
FAST = ["policy.learn.learning_starts=0", "policy.learn.update_per_collect=4", "env.n_evaluator_episode=2"]

pytestmark = pytest.mark.skipif(not DQN_CONFIG.is_file(), reason="configs/cartpole_dqn_config.py not there yet")


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR")}
    env["OMP_NUM_THREADS"] = "1"
    return env


def _cli(*args: str, cwd: Path, timeout: int = 240) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "ding_dist.entry.cli", *args]
    return subprocess.run(cmd, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout)


def _result(exp: Path) -> dict:
    return json.loads((exp / "result.json").read_text())


def test_train_one_process_then_resume_eval_plot(tmp_path, capsys):
    exp = tmp_path / "one"
    code = main(["train", str(DQN_CONFIG), "--max-env-steps", "256", "--exp-dir", str(exp), "--seed", "3",
                 "--set", *FAST])  # fmt: skip
    assert code == 0
    res = _result(exp)
    assert res["world_size"] == 1 and res["env_steps"] >= 256
    assert (exp / "config.py").is_file() and (exp / "tb" / "metrics.jsonl").is_file()
    assert list((exp / "ckpt").glob("ckpt_*.pt"))
    assert f"result: {exp / 'result.json'}" in capsys.readouterr().out

    assert main(["train", str(DQN_CONFIG), "--resume", str(exp), "--max-env-steps", "512", "--set", *FAST]) == 0
    resumed = _result(exp)
    assert resumed["env_steps"] >= 512 and resumed["train_iters"] > res["train_iters"]

    assert main(["eval", str(DQN_CONFIG), "--ckpt", str(exp), "--episodes", "2", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert "mean_return" in out and "over 2 episodes" in out

    assert main(["plot", str(exp)]) == 0
    assert (exp / "learning_curve.png").read_bytes()[:4] == b"\x89PNG"


def test_unknown_config_key_from_set_is_a_clean_error(tmp_path, capsys):
    code = main(["train", str(DQN_CONFIG), "--exp-dir", str(tmp_path), "--set", "policy.learn.batch_sise=8"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1].startswith("ding-dist: error: unknown config key 'policy.learn.batch_sise'")
    assert "'policy.learn.batch_size'" in err[-1]


def test_train_two_processes_with_nproc(tmp_path):
    exp = tmp_path / "two"
    out = _cli("train", str(DQN_CONFIG), "--nproc", "2", "--max-env-steps", "256", "--exp-dir", str(exp),
               "--set", *FAST, cwd=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    res = _result(exp)
    assert res["world_size"] == 2 and res["env_steps"] >= 256
    assert "world size 2" in out.stdout
    assert out.stdout.count("trained ") == 1  # only rank 0 prints


def test_bad_key_with_nproc_fails_before_launching(tmp_path, capsys):
    code = main(["train", str(DQN_CONFIG), "--nproc", "2", "--exp-dir", str(tmp_path), "--set", "env.bogus=1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err == [err[0]] and err[0].startswith("ding-dist: error: unknown config key 'env.bogus'")
    assert not list(tmp_path.iterdir())  # no process was started, nothing written


def test_rank_failure_under_nproc_reports_rank_and_exit_code(tmp_path):
    cfg = tmp_path / "rank1_fails_config.py"
    cfg.write_text(
        "import os\n"
        "from ding_dist.config import read_config\n"
        f"main_config, create_config = read_config({str(DQN_CONFIG)!r})\n"
        "if os.environ.get('RANK') == '1':\n"
        "    raise RuntimeError('rank 1 refuses')\n"
    )
    out = _cli("train", str(cfg), "--nproc", "2", "--exp-dir", str(tmp_path / "exp"), cwd=tmp_path)
    assert out.returncode == 2  # the rank's own exit code (a config error) is passed on
    assert "[rank 1] ding-dist: error: error while executing config file" in out.stderr
    assert out.stderr.strip().splitlines()[-1].startswith("ding-dist: error: rank 1 of 2 failed with exit code 2")


def test_entry_script_plain_python_and_via_cli(tmp_path, capsys):
    exp = tmp_path / "plain"
    out = subprocess.run([sys.executable, str(ENTRY), "--max-env-steps", "256", "--exp-dir", str(exp)],
                         cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=240)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert _result(exp)["world_size"] == 1
    # `ding-dist train` reads main_config/create_config from the script like from a config file.
    cli_exp = tmp_path / "cli"
    assert main(["train", str(ENTRY), "--max-env-steps", "256", "--exp-dir", str(cli_exp), "--set", *FAST]) == 0
    assert _result(cli_exp)["world_size"] == 1


def test_entry_script_under_torchrun_two_processes(tmp_path):
    exp = tmp_path / "torchrun"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", str(ENTRY),
           "--max-env-steps", "256", "--exp-dir", str(exp)]  # fmt: skip
    out = subprocess.run(cmd, cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    assert _result(exp)["world_size"] == 2


@pytest.mark.parametrize("name", ["cartpole_dqn", "cartpole_ppo", "pendulum_sac", "acrobot_dqn"])
def test_each_entry_script_loads_its_shipped_config(name, tmp_path, monkeypatch):
    from ding_dist.config import read_config

    config = REPO / "configs" / f"{name}_config.py"
    if not config.is_file():
        pytest.skip(f"{config.name} not shipped yet")
    monkeypatch.chdir(tmp_path)  # any working folder
    script_main, script_create = read_config(REPO / "entry" / f"{name}_main.py")
    assert (script_main, script_create) == read_config(config)
    help_out = subprocess.run([sys.executable, str(REPO / "entry" / f"{name}_main.py"), "--help"],
                              cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=120)  # fmt: skip
    assert help_out.returncode == 0 and "--max-env-steps" in help_out.stdout
