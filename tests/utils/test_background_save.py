"""Checkpoint files written in the background: from a snapshot, in order, and a failed write raised in the loop."""

from __future__ import annotations

import errno
import threading
from collections import OrderedDict

import numpy as np
import pytest
import torch

from ding_dist.utils import load_checkpoint, save_checkpoint
from ding_dist.utils.background_save import BackgroundWriter, snapshot


def test_a_snapshot_keeps_the_values_of_its_moment_and_the_kinds_a_checkpoint_checks():
    weights = torch.arange(3.0)
    state = {"model": OrderedDict(w=weights), "rng": (np.arange(2), [1, {"n": 2}]), "seen": {1, 2}, "name": "dqn"}
    copy = snapshot(state)
    weights.add_(10)
    state["rng"][0][0] = 99
    state["rng"][1][1]["n"] = 5
    assert copy["model"]["w"].tolist() == [0.0, 1.0, 2.0]
    assert type(copy["model"]) is OrderedDict and type(copy["rng"]) is tuple and copy["seen"] == {1, 2}
    assert copy["rng"][0].tolist() == [0, 1] and copy["rng"][1] == [1, {"n": 2}]


def test_writes_land_in_the_order_asked_each_with_its_own_snapshot(tmp_path):
    writer, order = BackgroundWriter(), []
    w = torch.zeros(2)
    for i in range(3):
        path = tmp_path / f"ckpt_{i}.pt"
        writer.submit(lambda s, path=path, i=i: (save_checkpoint(s, path), order.append(i)), {"w": w})
        w.add_(1)  # after submit returns: not in the file just asked for
    writer.wait()
    assert order == [0, 1, 2]
    assert [load_checkpoint(tmp_path / f"ckpt_{i}.pt")["w"].tolist() for i in range(3)] == [[0, 0], [1, 1], [2, 2]]


def test_a_failed_write_is_raised_in_the_training_thread_once(tmp_path):
    writer = BackgroundWriter()
    started = threading.Event()

    def full_disk(state):
        started.set()
        raise OSError(errno.ENOSPC, "No space left on device")

    writer.submit(full_disk, {"w": torch.zeros(1)})
    started.wait(10)
    with pytest.raises(OSError, match="No space left on device"):
        writer.submit(lambda s: save_checkpoint(s, tmp_path / "next.pt"), {"w": torch.zeros(1)})
    writer.wait()  # raised once: the next write goes on
    assert not (tmp_path / "next.pt").exists()  # the failed submit started nothing
