"""Checkpoint rotation after a fall-back: the file just written always survives."""

from __future__ import annotations

import logging

from ding_dist.utils import CheckpointManager, load_checkpoint


def test_rotation_never_deletes_the_checkpoint_just_written(tmp_path, caplog):
    mgr = CheckpointManager(tmp_path, keep_last=1)
    mgr.save({"step": 768}, 768)
    # A crash left a file of a later step that is complete in name only (a torn copy, a full disk).
    mgr.path_for(1024).write_bytes(b"half a checkpoint")
    assert mgr.load_latest(move_aside=True)["step"] == 768  # a resuming run falls back and moves it aside
    assert (tmp_path / "corrupt_ckpt_000001024.pt").read_bytes() == b"half a checkpoint"
    # A file of a later step that does load (an attempt that got further) is kept while an older step saves.
    mgr.path_for(2048).write_bytes((tmp_path / "ckpt_000000768.pt").read_bytes())
    with caplog.at_level(logging.WARNING, logger="ding_dist.utils.checkpoint"):
        written = mgr.save({"step": 896}, 896)
    assert "later steps than 896: ckpt_000002048.pt" in caplog.text
    assert load_checkpoint(written)["step"] == 896  # kept although keep_last=1 and a "newer" name exists
    assert not mgr.path_for(768).exists()  # rotation still removes older ones
    mgr.save({"step": 4096}, 4096)
    assert [p.name for p in mgr.checkpoints()] == ["ckpt_000004096.pt"]
    assert mgr.load_latest()["step"] == 4096
