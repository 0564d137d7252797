"""``ding-dist train --track``: W&B through a fake ``wandb`` module (init once, sync_tensorboard, offline by
default, on the logging rank only), and one line with exit code 2 when wandb is not installed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

from ding_dist.entry.cli import main
from ding_dist.utils import MetricWriter
from ding_dist.utils.install import install_hint

REPO = Path(__file__).resolve().parents[2]
DQN_CONFIG = REPO / "configs" / "cartpole_dqn_config.py"
FAST = ["policy.learn.learning_starts=0", "policy.learn.update_per_collect=4", "env.n_evaluator_episode=2"]

FAKE_WANDB = '''
"""A stand-in for wandb: records each init's keyword arguments (and what TensorBoard had written by then)."""
import glob, json, os

def _log(record):
    with open(os.environ["FAKE_WANDB_LOG"], "a") as f:
        f.write(json.dumps(record, default=str) + "\\n")

class _Run:
    def finish(self):
        _log({"call": "finish"})

def init(**kwargs):
    events = glob.glob(os.path.join(kwargs.get("dir", "."), "tb", "events.out.tfevents.*"))
    _log({"call": "init", "kwargs": kwargs, "tb_events_before": len(events)})
    return _Run()
'''


def _calls(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_track_without_wandb_is_one_line_and_exit_2(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # not importable, whether installed or not
    code = main(["train", str(DQN_CONFIG), "--track", "--exp-dir", str(tmp_path / "run"), "--max-env-steps", "64"])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert lines == [f"ding-dist: error: --track needs the wandb package: {install_hint('wandb')}"]
    assert install_hint("wandb").endswith('"')  # quoted (an editable checkout's [wandb] or the requirements): no glob
    assert not (tmp_path / "run").exists()  # refused before anything started


def test_track_calls_wandb_init_once_offline_with_sync_tensorboard(tmp_path):
    fake = tmp_path / "fake"
    (fake / "wandb").mkdir(parents=True)
    (fake / "wandb" / "__init__.py").write_text(textwrap.dedent(FAKE_WANDB))
    log, exp = tmp_path / "wandb_calls.jsonl", tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if k not in ("WANDB_MODE", "WANDB_API_KEY", "DING_DIST_TRACK")}
    env.update(PYTHONPATH=os.pathsep.join([str(fake), str(REPO)]), FAKE_WANDB_LOG=str(log), OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "ding_dist.entry.cli", "train", str(DQN_CONFIG), "--track", "--seed", "5",
           "--exp-dir", str(exp), "--max-env-steps", "256", "--set", *FAST]  # fmt: skip
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    calls = _calls(log)
    assert [c["call"] for c in calls] == ["init", "finish"]
    kwargs = calls[0]["kwargs"]
    assert kwargs["sync_tensorboard"] is True and kwargs["mode"] == "offline"
    assert Path(kwargs["dir"]).resolve() == exp.resolve()
    assert kwargs["config"]["seed"] == 5 and kwargs["config"]["policy"]["learn"]["learning_rate"] > 0
    assert kwargs["config"]["create_config"]["policy"]["type"] == "dqn"  # the resolved config, not the file
    assert calls[0]["tb_events_before"] == 0  # before the SummaryWriter: sync_tensorboard patches it


@pytest.fixture
def fake_wandb(monkeypatch):
    calls: list[dict] = []
    module = types.ModuleType("wandb")
    module.init = lambda **kw: calls.append(kw) or types.SimpleNamespace(finish=lambda: calls.append({"finish": 1}))
    monkeypatch.setitem(sys.modules, "wandb", module)
    for name in ("WANDB_MODE", "WANDB_API_KEY", "DING_DIST_TRACK"):
        monkeypatch.delenv(name, raising=False)
    return calls


def test_mode_is_left_to_wandb_when_configured(tmp_path, fake_wandb, monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
    MetricWriter(tmp_path / "tb", tensorboard=False, config={"seed": 1}, track=True).close()
    assert "mode" not in fake_wandb[0] and fake_wandb[1] == {"finish": 1}
    monkeypatch.delenv("WANDB_API_KEY")
    monkeypatch.setenv("WANDB_MODE", "disabled")
    MetricWriter(tmp_path / "tb", tensorboard=False, track=True).close()
    assert "mode" not in fake_wandb[2]


def test_track_only_on_the_logging_rank_and_only_when_asked(tmp_path, fake_wandb, monkeypatch):
    MetricWriter(tmp_path / "a", tensorboard=False).close()  # DING_DIST_TRACK unset: no W&B
    assert fake_wandb == []
    monkeypatch.setenv("DING_DIST_TRACK", "1")
    monkeypatch.setattr("ding_dist.utils.logging._rank_and_world", lambda: (1, 2))
    MetricWriter(tmp_path / "b", tensorboard=False).close()  # rank 1 writes nothing
    assert fake_wandb == []
    monkeypatch.setattr("ding_dist.utils.logging._rank_and_world", lambda: (0, 2))
    MetricWriter(tmp_path / "c", tensorboard=False).close()
    assert len(fake_wandb) == 2 and fake_wandb[0]["mode"] == "offline"
