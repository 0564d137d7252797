"""Checkpoint rotation after a fall-back: the file just written always survives."""

from __future__ import annotations

import logging

from ding_dist.utils import CheckpointManager, load_checkpoint


def test_rotation_never_deletes_the_checkpoint_just_written(tmp_path, caplog):
    mgr = CheckpointManager(tmp_path, keep_last=1)
    mgr.save({"step": 768}, 768)
    # A crash left an unusable file of a later step; the run fell back to 768 and goes on from there.
    mgr.path_for(1024).write_bytes(b"half a checkpoint")
    assert mgr.load_latest()["step"] == 768
    with caplog.at_level(logging.WARNING, logger="ding_dist.utils.checkpoint"):
        written = mgr.save({"step": 896}, 896)
    assert "later steps than 896: ckpt_000001024.pt" in caplog.text
    assert load_checkpoint(written)["step"] == 896  # kept although keep_last=1 and a "newer" name exists
    assert mgr.load_latest()["step"] == 896
    assert not mgr.path_for(768).exists()  # rotation still removes older ones
    # Reaching the later step replaces the broken file, and rotation is back to normal.
    mgr.save({"step": 1024}, 1024)
    assert [p.name for p in mgr.checkpoints()] == ["ckpt_000001024.pt"]
    assert mgr.load_latest()["step"] == 1024
