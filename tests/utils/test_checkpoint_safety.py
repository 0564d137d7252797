"""Checkpoints that cannot run code: a file whose pickle would run code is refused in one line and its code never
runs (eval --ckpt, resume), the run's other checkpoints stay usable; new files hold only tensors and plain values;
version-1 files (numpy RNG and replay states) still load; ``ding-dist ckpt convert`` rewrites a trusted file."""

from __future__ import annotations

import logging
import os
import pickle
import random
from collections import namedtuple
from pathlib import Path

import numpy as np
import pytest
import torch
from easydict import EasyDict

from ding_dist.data import ReplayBuffer
from ding_dist.entry.cli import main
from ding_dist.utils import (
    CheckpointError,
    CheckpointManager,
    capture_rng_state,
    load_checkpoint,
    restore_rng_state,
    save_checkpoint,
)
from ding_dist.utils.checkpoint import UnsafeCheckpointError

REPO = Path(__file__).resolve().parents[2]
DQN_CONFIG = REPO / "configs" / "cartpole_dqn_config.py"
TINY = ["env.collector_env_num=4", "env.evaluator_env_num=1", "env.n_evaluator_episode=1",
        "policy.model.hidden_sizes=[16]", "policy.learn.learning_starts=64", "policy.learn.update_per_collect=1",
        "policy.collect.n_sample=64", "policy.eval.eval_freq=256", "policy.other.log_freq=256",
        "policy.other.checkpoint.freq=256", "policy.other.checkpoint.keep_last=3",
        "policy.other.replay_buffer.save_in_checkpoint=True"]  # fmt: skip


class _Touch:
    """Unpickling this runs ``os.system("touch MARKER")``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


class _Exec:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (exec, (f"open({str(self.marker)!r}, 'w').close()",))


def _malicious(path: Path, marker: Path, how: str = "torch") -> Path:
    """A file shaped like a ding_dist checkpoint whose state runs code when unpickled."""
    blob = {"format": "ding_dist.checkpoint", "version": 2, "state": {"policy": _Touch(marker), "x": _Exec(marker)}}
    if how == "torch":
        torch.save(blob, path)
    else:  # a bare pickle (torch's legacy format reads it too)
        with open(path, "wb") as f:
            pickle.dump(blob, f, protocol=2)
    return path


@pytest.mark.parametrize("how", ["torch", "pickle"])
def test_a_file_that_would_run_code_is_refused_and_runs_nothing(tmp_path, how):
    marker = tmp_path / "marker"
    bad = _malicious(tmp_path / "ckpt_000000003.pt", marker, how)
    with pytest.raises(UnsafeCheckpointError) as e:
        load_checkpoint(bad)
    assert not marker.exists()
    text = str(e.value)
    assert "\n" not in text and str(bad) in text and "posix.system" in text and "could run code" in text
    assert f"ding-dist ckpt convert {bad}" in text
    # The run's other checkpoints stay usable: the newest safe one wins, the refused one is moved aside.
    mgr = CheckpointManager(tmp_path)
    mgr.save({"step": 2}, 2)
    assert mgr.latest() == mgr.path_for(2) and bad.exists()  # a reader only skips it
    assert mgr.load_latest(move_aside=True)["step"] == 2
    assert not bad.exists() and (tmp_path / "unsafe_ckpt_000000003.pt").is_file()
    assert "could run code" in (tmp_path / "unsafe_ckpt_000000003.pt.txt").read_text()
    assert not marker.exists()


def test_new_files_hold_only_tensors_and_plain_values(tmp_path):
    buf = ReplayBuffer(16, obs_shape=(3,), num_envs=2, seed=0)
    for i in range(5):
        obs = np.full((2, 3), i, np.float32)
        buf.add(obs, np.array([0, 1]), np.ones(2), obs + 1, np.zeros(2, bool), np.array([False, i == 4]))
    state = {"rng": capture_rng_state(), "buffer": buf.state_dict(), "n": np.int64(7), "f": np.float32(0.5)}
    path = save_checkpoint(state, tmp_path / "a.pt")
    raw = torch.load(path, weights_only=True)  # no allow-list at all: nothing but tensors and plain values
    assert raw["version"] == 2 and type(raw["state"]["n"]) is int and raw["state"]["f"] == 0.5
    assert isinstance(raw["state"]["buffer"]["data"]["obs"], torch.Tensor)
    back = ReplayBuffer(16, obs_shape=(3,), num_envs=2, seed=1)
    back.load_state_dict(load_checkpoint(path)["buffer"])
    assert len(back) == len(buf) == 10
    drawn, again = buf.sample(8), back.sample(8)  # same rows and the same sampler state
    assert all(torch.equal(drawn[key], again[key]) for key in drawn)


def test_save_refuses_what_would_need_code_to_load(tmp_path):
    with pytest.raises(TypeError, match=r"state\['meta'\]\['cfg'\] is a easydict.EasyDict: a checkpoint holds only"):
        save_checkpoint({"meta": {"cfg": EasyDict(a=1)}}, tmp_path / "a.pt")
    with pytest.raises(TypeError, match=r"state\['obj'\]\[1\] is a numpy array of dtype object"):
        save_checkpoint({"obj": [1, np.array([None])]}, tmp_path / "a.pt")
    assert not list(tmp_path.iterdir())


def _draw() -> tuple:
    return random.random(), float(np.random.rand()), torch.rand(2).tolist()


def test_version_1_files_keep_loading(tmp_path):
    """As ding_dist wrote them before: numpy's RNG state tuple and replay arrays, read with numpy allowed."""
    random.seed(1)
    np.random.seed(2)
    torch.manual_seed(3)
    buf = ReplayBuffer(8, obs_shape=(2,), num_envs=1, seed=0)
    for i in range(6):
        buf.add(np.full((1, 2), i, np.float32), np.array([1]), np.ones(1), np.zeros((1, 2)), np.zeros(1, bool),
                np.zeros(1, bool))  # fmt: skip
    rng = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    old = {"format": "ding_dist.checkpoint", "version": 1, "state": {"rng": rng, "buffer": buf.state_dict()}}
    torch.save(old, tmp_path / "v1.pt")
    expected = [_draw() for _ in range(2)]
    state = load_checkpoint(tmp_path / "v1.pt")
    restore_rng_state(state["rng"])
    assert [_draw() for _ in range(2)] == expected
    back = ReplayBuffer(8, obs_shape=(2,), num_envs=1, seed=5)
    back.load_state_dict(state["buffer"])
    assert torch.equal(back.sample(4)["obs"], buf.sample(4)["obs"])
    # ckpt convert rewrites it as version 2 without running anything (it loads safely).
    assert main(["ckpt", "convert", str(tmp_path / "v1.pt"), "--out", str(tmp_path / "v2.pt")]) == 0
    assert torch.load(tmp_path / "v2.pt", weights_only=True)["version"] == 2


Pair = namedtuple("Pair", "a b")


def test_ckpt_convert_rewrites_a_trusted_file(tmp_path, capsys):
    path = tmp_path / "old.pt"
    old = {"format": "ding_dist.checkpoint", "version": 1, "state": {"cfg": EasyDict(lr=0.1), "pair": Pair(1, 2)}}
    torch.save(old, path)
    with pytest.raises(UnsafeCheckpointError, match="easydict.EasyDict"):
        load_checkpoint(path)
    assert main(["ckpt", "convert", str(path)]) == 0
    assert "it loads without running code" in capsys.readouterr().out
    assert load_checkpoint(path) == {"cfg": {"lr": 0.1}, "pair": (1, 2)}
    assert (tmp_path / "old.pt.orig").is_file()
    with pytest.raises(CheckpointError, match="does not exist"):
        load_checkpoint(tmp_path / "missing.pt")
    assert main(["ckpt", "convert", str(tmp_path / "missing.pt")]) == 2
    # Converted, it is safe already: said, and nothing is written (no second .orig, the file untouched).
    (tmp_path / "old.pt.orig").unlink()
    before = path.read_bytes()
    capsys.readouterr()
    for extra in ([], ["--out", str(tmp_path / "copy.pt")]):
        assert main(["ckpt", "convert", str(path), *extra]) == 0
        assert capsys.readouterr().out == (
            f"ding-dist: {path} already loads without running code (the current format): nothing to convert, "
            "nothing written\n"
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.pt"] and path.read_bytes() == before


def test_eval_and_resume_refuse_a_malicious_checkpoint(tmp_path, capsys, caplog):
    """A tiny run (256 and 512 env steps checkpointed); its newest checkpoint and replay file replaced by files that
    would run code: eval --ckpt refuses the file (exit 2, one line), resume continues from 256."""
    run, marker = tmp_path / "run", tmp_path / "marker"
    args = ["--exp-dir", str(run), "--max-env-steps", "512", "--seed", "0", "--set", *TINY]
    assert main(["train", str(DQN_CONFIG), *args]) == 0
    ckpt = run / "ckpt"
    assert sorted(p.name for p in ckpt.glob("ckpt_*.pt")) == ["ckpt_000000256.pt", "ckpt_000000512.pt"]
    _malicious(ckpt / "ckpt_000000512.pt", marker)
    _malicious(ckpt / "replay_rank0.prev.pt", marker)  # the replay file of step 256
    capsys.readouterr()

    assert main(["eval", str(DQN_CONFIG), "--ckpt", str(ckpt / "ckpt_000000512.pt"), "--episodes", "1"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert [line for line in err.splitlines() if "error" in line] == [
        f"ding-dist: error: checkpoint {str(ckpt / 'ckpt_000000512.pt')!r} holds more than tensors and plain values "
        "(posix.system), refused: loading it could run code; only if you trust its source, convert it with: "
        f"ding-dist ckpt convert {ckpt / 'ckpt_000000512.pt'}"
    ]
    assert not marker.exists()

    with caplog.at_level(logging.WARNING):
        assert main(["train", "--resume", str(run), "--max-env-steps", "768"]) == 0
    assert not marker.exists()
    assert (ckpt / "unsafe_ckpt_000000512.pt").is_file()
    assert load_checkpoint(ckpt / "ckpt_000000768.pt")["counters"]["env_steps"] == 768
    assert "skipping unusable replay buffer file" in caplog.text and "replay_rank0.prev.pt" in caplog.text
