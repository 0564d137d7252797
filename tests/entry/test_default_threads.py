"""Torch threads per process: one for vector observations, the cores shared by local processes for images."""

from __future__ import annotations

import os

import gymnasium as gym
import numpy as np
import pytest
import torch

from ding_dist.entry.threads import default_threads

IMAGE = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
VECTOR = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
GRID = gym.spaces.Box(0, 1, (6, 10, 10), np.uint8)  # MinAtar's: too small for threads to pay


@pytest.fixture(autouse=True)
def _restore_threads(monkeypatch):
    before = torch.get_num_threads()
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize(("local_world", "space", "threads"), [(1, IMAGE, 4), (2, IMAGE, 2), (3, IMAGE, 1),
                                                                (1, VECTOR, 1), (1, None, 1),
                                                                (1, GRID, 1)])  # fmt: skip
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


def test_actor_learner_roles_share_the_cores_and_take_their_config(monkeypatch):
    from ding_dist.config import ConfigError
    from ding_dist.config.actor_learner import check_actor_learner_config
    from ding_dist.entry.roles import Roles, role_threads
    from ding_dist.entry.threads import OMP_DEFAULTED_ENV

    one_one, two_one = Roles(learners=1, actors=1), Roles(learners=1, actors=2)
    # One host of 8 cores: a learner's CNN takes the cores the actors leave, an actor takes 1.
    assert role_threads({}, one_one, 0, cores=8, local_world=2) == {"threads": None, "image_threads": 7}
    assert role_threads({"actor_threads": 2}, two_one, 0, cores=8, local_world=3)["image_threads"] == 4
    assert role_threads({}, two_one, 2, cores=8, local_world=3) == {"threads": None, "image_threads": 1}
    assert role_threads({}, two_one, 0, cores=8, local_world=1)["image_threads"] is None  # another host's roles
    assert role_threads({"learner_threads": 5}, one_one, 0, cores=8, local_world=2)["threads"] == 5
    # On 2 cores a lone learner left one takes a second, shared with its actor; two learners keep one each
    assert role_threads({}, one_one, 0, cores=2, local_world=2)["image_threads"] == 2
    assert role_threads({}, Roles(learners=2, actors=2), 0, cores=2, local_world=4)["image_threads"] == 1
    # On 4 cores (the fixture) under the launcher's default OMP_NUM_THREADS=1: the learner takes 3 ...
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv(OMP_DEFAULTED_ENV, "1")
    default_threads(IMAGE, **role_threads({}, one_one, 0, cores=4, local_world=2))
    assert torch.get_num_threads() == 3
    default_threads(VECTOR, **role_threads({}, one_one, 0, cores=4, local_world=2))  # vectors: one
    assert torch.get_num_threads() == 1
    monkeypatch.delenv(OMP_DEFAULTED_ENV)  # ... an OMP_NUM_THREADS you set wins over "auto" ...
    default_threads(IMAGE, **role_threads({}, one_one, 0, cores=4, local_world=2))
    assert torch.get_num_threads() == 1
    default_threads(VECTOR, **role_threads({"learner_threads": 2}, one_one, 0, cores=4, local_world=2))
    assert torch.get_num_threads() == 2  # ... and a number in the config over both
    with pytest.raises(ConfigError, match="'actor_learner.learner_threads' must be \"auto\" or an int >= 1"):
        check_actor_learner_config({"learner_threads": 0})
    check_actor_learner_config({"learner_threads": "2"})  # as --set actor_learner.learner_threads=2 leaves it
    with pytest.raises(ConfigError, match="must be \"auto\" or an int >= 1, got 'two'"):
        check_actor_learner_config({"actor_threads": "two"})
