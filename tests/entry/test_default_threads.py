"""Torch threads per process: one for vector observations, the cores shared by local processes for images."""

from __future__ import annotations

import os

import gymnasium as gym
import numpy as np
import pytest
import torch

from ding_dist.entry.experiment import default_threads

IMAGE = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
VECTOR = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)


@pytest.fixture(autouse=True)
def _restore_threads(monkeypatch):
    before = torch.get_num_threads()
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize(("local_world", "space", "threads"), [(1, IMAGE, 4), (2, IMAGE, 2), (3, IMAGE, 1),
                                                                (1, VECTOR, 1), (1, None, 1)])  # fmt: skip
def test_threads_follow_observations_and_local_processes(monkeypatch, local_world, space, threads):
    monkeypatch.setenv("LOCAL_WORLD_SIZE", str(local_world))
    default_threads(space)
    assert torch.get_num_threads() == threads


def test_omp_num_threads_wins(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    default_threads(VECTOR)
    assert torch.get_num_threads() == 3
    default_threads(IMAGE)
    assert torch.get_num_threads() == 3
