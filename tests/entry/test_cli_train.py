"""ding-dist train / eval / plot end to end, and the @dist_mode entry scripts, on tiny runs."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ding_dist.config import read_config
from ding_dist.entry.cli import main
from ding_dist.utils import load_checkpoint

REPO = Path(__file__).resolve().parents[2]
DQN_CONFIG = REPO / "configs" / "cartpole_dqn_config.py"
ENTRY = REPO / "entry" / "cartpole_dqn_main.py"
# Small and fast: learning starts at once, few updates per collect.
UPDATES = 4
FAST = ["policy.learn.learning_starts=0", f"policy.learn.update_per_collect={UPDATES}", "env.n_evaluator_episode=2"]


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


def _cli(*args: str, cwd: Path, timeout: int = 240, env: dict | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "ding_dist.entry.cli", *args]
    return subprocess.run(cmd, cwd=cwd, env=_env() | (env or {}), capture_output=True, text=True, timeout=timeout)


def _result(exp: Path) -> dict:
    return json.loads((exp / "result.json").read_text())


def _expected(max_env_steps: int, nproc: int = 1) -> tuple[int, int]:
    """(global env steps, train iterations) of a DQN_CONFIG run with FAST stopped by ``max_env_steps``.

    Each rank steps collector_env_num / nproc envs for ceil(n_sample / collector_env_num) vector steps (the
    horizon of one process); the loop runs whole iterations until the global count reaches ``max_env_steps``;
    with learning from the start, the updates are exactly update_per_collect per n_sample env steps, rounded
    down over the run (ding_dist/entry/data_parallel.py).
    """
    cfg, _ = read_config(DQN_CONFIG)
    envs, n_sample = cfg.env.collector_env_num, cfg.policy.collect.n_sample
    assert envs % nproc == 0 and n_sample % nproc == 0
    per_iter = math.ceil(n_sample / envs) * envs
    env_steps = math.ceil(max_env_steps / per_iter) * per_iter
    return env_steps, UPDATES * env_steps // n_sample


def _leaves(obj, path: str = ""):
    """(path, value) of every tensor and number in a nested state dict, in a stable order."""
    if isinstance(obj, dict):
        for key in sorted(obj, key=str):
            yield from _leaves(obj[key], f"{path}.{key}")
    elif isinstance(obj, (list, tuple)):
        for i, item in enumerate(obj):
            yield from _leaves(item, f"{path}[{i}]")
    else:
        yield path, obj


def _assert_same_state(a: dict, b: dict) -> None:
    left, right = list(_leaves(a)), list(_leaves(b))
    assert [p for p, _ in left] == [p for p, _ in right]
    for (path, x), (_, y) in zip(left, right):
        if isinstance(x, torch.Tensor):
            assert torch.equal(x, y), path
        else:
            assert x == y, path


# A config that trains DQN_CONFIG and has every rank save its policy's final state (model, target
# network, optimizer, train_iter) as state_rank<r>.pt: the CLI executes the config file in each rank.
STATE_PROBE = """
import os
import torch
from ding_dist.config import read_config
from ding_dist.entry.loops import data_parallel as pipeline

main_config, create_config = read_config({config!r})
if not hasattr(pipeline.DataParallelLoop.run, "saves_state_to"):  # the file is read more than once per process
    _run = pipeline.DataParallelLoop.run

    def _run_then_save_state(self):
        result = _run(self)
        torch.save(self.policy.state_dict(), os.path.join({out!r}, f"state_rank{{self.rank}}.pt"))
        return result

    _run_then_save_state.saves_state_to = {out!r}
    pipeline.DataParallelLoop.run = _run_then_save_state
"""


def test_train_one_process_then_resume_eval_plot(tmp_path, capsys):
    exp = tmp_path / "one"
    code = main(["train", str(DQN_CONFIG), "--max-env-steps", "256", "--exp-dir", str(exp), "--seed", "3",
                 "--set", *FAST])  # fmt: skip
    assert code == 0
    res = _result(exp)
    steps, train_iters = _expected(256)
    assert res["world_size"] == 1 and res["env_steps"] == steps and res["train_iters"] == train_iters
    assert (exp / "config.py").is_file() and (exp / "tb" / "metrics.jsonl").is_file()
    assert list((exp / "ckpt").glob("ckpt_*.pt"))
    assert f"result: {exp / 'result.json'}" in capsys.readouterr().out

    assert main(["train", str(DQN_CONFIG), "--resume", str(exp), "--max-env-steps", "512", "--set", *FAST]) == 0
    resumed = _result(exp)
    assert (resumed["env_steps"], resumed["train_iters"]) == _expected(512)

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


@pytest.mark.parametrize("start", ["fork", pytest.param("subprocess", marks=pytest.mark.quality)])
def test_train_two_processes_with_nproc(tmp_path, start):
    """Ranks forked from the launcher (the default with a CPU-only torch) or started as fresh interpreters
    (with CUDA) train the same."""
    exp, states = tmp_path / "two", tmp_path / "states"
    states.mkdir()
    config = tmp_path / "state_probe_config.py"
    config.write_text(STATE_PROBE.format(config=str(DQN_CONFIG), out=str(states)))
    # 200 is not a multiple of the 256 global steps per iteration: the run ends at the next whole iteration.
    out = _cli("train", str(config), "--nproc", "2", "--max-env-steps", "200", "--exp-dir", str(exp),
               "--set", *FAST, cwd=tmp_path, env={"DING_DIST_START_METHOD": start})  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    # the start method, and why when it is not the default (here: the environment variable)
    why = f"{start}: DING_DIST_START_METHOD={start}"
    assert f"starting 2 local process(es) with torch.distributed.run ({why}, OMP_NUM_THREADS=1)" in out.stderr
    res = _result(exp)
    steps, train_iters = _expected(200, nproc=2)
    assert res["world_size"] == 2 and res["env_steps"] == steps and res["train_iters"] == train_iters
    assert "world size 2" in out.stdout
    assert out.stdout.count("trained ") == 1  # only rank 0 prints
    # paths in log lines as given (here absolute), as with one process
    summary = out.stdout.splitlines()[-5:]  # what it trained; its time; why it stopped; its checkpoints; what next
    assert f"exp dir {exp}\n" in out.stderr and summary[0].endswith(f"; result: {exp}/result.json")
    assert summary[1].startswith("time: start-up ") and "; loop: collect " in summary[1]  # 2 processes: no hint
    assert summary[2:] == [
        "stopped by max_env_steps: the run's budget of env steps was reached",
        f"checkpoints: {exp}/ckpt/ckpt_000000256.pt (last), "
        f"{exp}/ckpt/best.pt (best eval return {res['best_eval_return']:.2f})",
        f"next: ding-dist eval --ckpt {exp}  |  ding-dist resume {exp} --max-env-steps 512",
    ]

    # The ranks end in sync: both hold the same final policy state, bit for bit, and rank 0 saved it.
    assert sorted(p.name for p in states.iterdir()) == ["state_rank0.pt", "state_rank1.pt"]
    rank0, rank1 = (torch.load(states / f"state_rank{r}.pt", weights_only=True) for r in (0, 1))
    assert rank0["train_iter"] == train_iters
    _assert_same_state(rank0, rank1)
    _assert_same_state(rank0, load_checkpoint(exp / "ckpt" / f"ckpt_{steps:09d}.pt")["policy"])
    if start == "fork":  # a resume without --nproc runs on the run's own 2 processes
        out = _cli("train", "--resume", str(exp), "--max-env-steps", "400", cwd=tmp_path)
        assert out.returncode == 0, out.stderr[-3000:]
        assert "resuming on 2 processes, as the run was trained (--nproc changes it)" in out.stderr
        assert "starting 2 local process(es)" in out.stderr
        assert _result(exp)["world_size"] == 2 and _result(exp)["env_steps"] == _expected(400, nproc=2)[0]


def test_bad_key_with_nproc_fails_before_launching(tmp_path, capsys):
    code = main(["train", str(DQN_CONFIG), "--nproc", "2", "--exp-dir", str(tmp_path), "--set", "env.bogus=1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err == [err[0]] and err[0].startswith("ding-dist: error: unknown config key 'env.bogus'")
    assert not list(tmp_path.iterdir())  # no process was started, nothing written


def test_bad_start_method_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DING_DIST_START_METHOD", "spawn")
    assert main(["train", str(DQN_CONFIG), "--nproc", "2", "--exp-dir", str(tmp_path / "exp")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["ding-dist: error: DING_DIST_START_METHOD='spawn': expected 'fork' or 'subprocess'"]


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
    config = REPO / "configs" / f"{name}_config.py"
    monkeypatch.chdir(tmp_path)  # any working folder
    script_main, script_create = read_config(REPO / "entry" / f"{name}_main.py")
    assert (script_main, script_create) == read_config(config)
    help_out = subprocess.run([sys.executable, str(REPO / "entry" / f"{name}_main.py"), "--help"],
                              cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=120)  # fmt: skip
    assert help_out.returncode == 0 and "--max-env-steps" in help_out.stdout
