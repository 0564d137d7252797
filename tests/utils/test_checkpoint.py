"""Checkpoints: round trip, loud failures on bad files, rotation, fallback, RNG, SIGKILL atomicity."""

from __future__ import annotations

import logging
import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import torch

from ding_dist.utils import (
    CheckpointError,
    CheckpointManager,
    capture_rng_state,
    load_checkpoint,
    restore_rng_state,
    save_checkpoint,
)


def _state(step: int) -> dict:
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    model(torch.ones(1, 3)).sum().backward()
    opt.step()
    return {"step": step, "model": model.state_dict(), "optim": opt.state_dict(), "meta": {"name": "x"}}


def test_round_trip(tmp_path):
    state = _state(5)
    path = save_checkpoint(state, tmp_path / "deep" / "a.pt")
    back = load_checkpoint(path)
    assert back["step"] == 5 and back["meta"] == {"name": "x"}
    for k, v in state["model"].items():
        assert torch.equal(v, back["model"][k])
    assert back["optim"]["state"][0]["step"] == state["optim"]["state"][0]["step"]
    assert [p.name for p in path.parent.iterdir()] == ["a.pt"]


def test_save_rejects_non_dict(tmp_path):
    with pytest.raises(TypeError, match="must be a dict"):
        save_checkpoint([1], tmp_path / "a.pt")
    assert not list(tmp_path.iterdir())


def test_truncated_file_names_the_file(tmp_path):
    path = save_checkpoint({"w": torch.arange(10_000.0)}, tmp_path / "ckpt.pt")
    data = path.read_bytes()
    for cut in (len(data) // 2, len(data) - 10, 0):
        path.write_bytes(data[:cut])
        with pytest.raises(CheckpointError, match=r"ckpt\.pt.*truncated or corrupt"):
            load_checkpoint(path)


def test_an_error_without_a_message_still_names_the_file(tmp_path, monkeypatch):
    """Random bytes can make torch.load raise an exception whose text is empty (seen once in CI)."""
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"x")

    def load(*args, **kwargs):
        raise MemoryError()

    monkeypatch.setattr(torch, "load", load)
    with pytest.raises(CheckpointError, match=r"bad\.pt' is truncated or corrupt \(MemoryError: \)"):
        load_checkpoint(bad)


def test_foreign_and_garbage_files(tmp_path):
    foreign = tmp_path / "foreign.pt"
    torch.save({"model": {}}, foreign)
    with pytest.raises(CheckpointError, match=r"foreign\.pt.*not a ding_dist checkpoint"):
        load_checkpoint(foreign)
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(random.Random(0).randbytes(4096))
    with pytest.raises(CheckpointError, match=r"garbage\.pt"):
        load_checkpoint(garbage)
    with pytest.raises(CheckpointError, match=r"missing\.pt.*does not exist"):
        load_checkpoint(tmp_path / "missing.pt")
    assert issubclass(CheckpointError, ValueError)


def test_rotation_keeps_last_k_in_numeric_order(tmp_path):
    mgr = CheckpointManager(tmp_path, keep_last=2)
    steps = [5, 50, 7, 1_000_000_000, 999]
    for s in steps:
        assert mgr.save({"step": s}, s).name == f"ckpt_{s:09d}.pt"
    kept = sorted(steps)[-2:]
    assert [load_checkpoint(p)["step"] for p in mgr.checkpoints()] == kept
    assert mgr.load_latest()["step"] == max(steps)
    assert mgr.latest() == mgr.path_for(max(steps))


def test_latest_skips_corrupt_newest(tmp_path, caplog):
    mgr = CheckpointManager(tmp_path, keep_last=3)
    for s in (1, 2, 3):
        mgr.save({"step": s}, s)
    newest = mgr.path_for(3)
    newest.write_bytes(newest.read_bytes()[:100])
    mgr.path_for(2).write_bytes(b"")
    with caplog.at_level(logging.WARNING, logger="ding_dist.utils.checkpoint"):
        assert mgr.latest() == mgr.path_for(1)
        assert mgr.load_latest()["step"] == 1
    assert "ckpt_000000003.pt" in caplog.text and "ckpt_000000002.pt" in caplog.text


def test_empty_or_missing_directory(tmp_path):
    assert CheckpointManager(tmp_path / "none").latest() is None
    assert CheckpointManager(tmp_path).load_latest() is None
    (tmp_path / "ckpt_000000001.pt").write_bytes(b"x")
    assert CheckpointManager(tmp_path).latest() is None


@pytest.mark.parametrize("bad", [0, -1, 2.0, True])
def test_bad_keep_last(tmp_path, bad):
    with pytest.raises(ValueError, match="keep_last must be an int >= 1"):
        CheckpointManager(tmp_path, keep_last=bad)


def test_bad_step(tmp_path):
    with pytest.raises(ValueError, match="step must be an int >= 0, got -1"):
        CheckpointManager(tmp_path).save({}, -1)


def _draw() -> tuple:
    return random.random(), float(np.random.rand()), torch.rand(3).tolist()


def test_rng_capture_restore_through_a_checkpoint(tmp_path):
    random.seed(1)
    np.random.seed(2)
    torch.manual_seed(3)
    save_checkpoint({"rng": capture_rng_state()}, tmp_path / "rng.pt")
    expected = [_draw() for _ in range(3)]
    random.seed(99)
    np.random.seed(99)
    torch.manual_seed(99)
    assert [_draw() for _ in range(3)] != expected
    restore_rng_state(load_checkpoint(tmp_path / "rng.pt")["rng"])
    assert [_draw() for _ in range(3)] == expected


def test_restore_rng_rejects_bad_input():
    with pytest.raises(TypeError, match="must be a dict"):
        restore_rng_state([1])
    with pytest.raises(ValueError, match="unknown rng state keys"):
        restore_rng_state({"jax": 1})


_WRITER = textwrap.dedent(
    """
    import sys, torch
    torch.set_num_threads(1)
    from ding_dist.utils import CheckpointManager
    mgr = CheckpointManager(sys.argv[1], keep_last=2)
    step = int(sys.argv[2])
    while True:
        step += 1
        mgr.save({"step": step, "w": torch.full((4_000_000,), float(step))}, step)  # 16 MB
        print(step, flush=True)
    """
)


def test_sigkill_during_saves_leaves_complete_checkpoints(tmp_path):
    """Kill a process that saves 16 MB checkpoints in a loop; every final-named file must load intact."""
    rng = random.Random(0)
    step, rounds, partial_rounds = 0, 0, 0
    while rounds < 3 or (partial_rounds == 0 and rounds < 10):
        rounds += 1
        proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(tmp_path), str(step)], stdout=subprocess.PIPE)
        for _ in range(2):  # let it finish two saves, then kill it at a random moment of the next one
            line = proc.stdout.readline()
            assert line, "writer exited early"
        time.sleep(rng.uniform(0.0, 0.05))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        partial_rounds += any(p.name.endswith(".tmp") for p in tmp_path.iterdir())
        mgr = CheckpointManager(tmp_path, keep_last=2)
        finals = mgr.checkpoints()
        assert finals, "no checkpoint survived"
        for path in finals:  # never a partial file at a final path
            state = load_checkpoint(path)
            assert f"{state['step']:09d}" in path.name
            assert torch.equal(state["w"], torch.full((4_000_000,), float(state["step"])))
        step = mgr.load_latest()["step"]
        assert mgr.latest() == finals[-1]
    # The kill must have hit a save in progress at least once, or the test proved nothing.
    assert partial_rounds > 0, f"no kill landed mid-write in {rounds} rounds"
    # A later save by a live process removes temp files of dead writers.
    CheckpointManager(tmp_path, keep_last=2).save({"step": step + 1}, step + 1)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_atomic_files_respect_the_umask(tmp_path):
    import os
    import stat

    from ding_dist.utils.fileio import atomic_write_text

    old = os.umask(0o027)
    try:
        group_readable = atomic_write_text(tmp_path / "a.txt", "x")
        os.umask(0o022)
        world_readable = atomic_write_text(tmp_path / "b.txt", "x")
    finally:
        os.umask(old)
    assert stat.S_IMODE(group_readable.stat().st_mode) == 0o640
    assert stat.S_IMODE(world_readable.stat().st_mode) == 0o644


def test_rotation_after_a_corrupt_newest_checkpoint_keeps_the_complete_ones(tmp_path):
    from ding_dist.utils import CheckpointManager

    mgr = CheckpointManager(tmp_path, keep_last=2)
    for step in (10, 20, 30):
        mgr.save({"step": step}, step)
    (tmp_path / "ckpt_000000030.pt").write_bytes(b"torn")  # the newest is damaged after the fact
    assert mgr.load_latest(move_aside=True)["step"] == 20  # a resuming run falls back and moves it aside
    assert (tmp_path / "corrupt_ckpt_000000030.pt").read_bytes() == b"torn"
    assert "not loadable" in (tmp_path / "corrupt_ckpt_000000030.pt.txt").read_text()
    mgr.save({"step": 40}, 40)  # the resumed run goes on: rotation keeps the newest complete two
    assert [p.name for p in mgr.checkpoints()] == ["ckpt_000000020.pt", "ckpt_000000040.pt"]
