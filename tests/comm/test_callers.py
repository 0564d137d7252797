"""The caller's ``file:line`` past the collective layer, and whether an exception came through it."""

from __future__ import annotations

import os

import pytest
import torch

import ding_dist as dd
from ding_dist.comm.callers import COMM_DIR, call_site, raised_in_comm


def test_comm_dir_is_the_collective_layer():
    assert COMM_DIR == os.path.dirname(os.path.abspath(dd.comm.__file__))


def test_call_site_skips_the_frames_of_the_collective_layer():
    helpers: dict = {"call_site": call_site}  # a helper whose code lives in ding_dist/comm, as allreduce's does
    exec(compile("def helper():\n    return call_site()\n", os.path.join(COMM_DIR, "helper.py"), "exec"), helpers)
    site = helpers["helper"]()
    line = test_call_site_skips_the_frames_of_the_collective_layer.__code__.co_firstlineno + 3
    assert site == f"{os.path.relpath(__file__)}:{line} in test_call_site_skips_the_frames_of_the_collective_layer"


def test_an_error_of_a_collective_came_through_comm_and_a_local_one_did_not():
    with pytest.raises(TypeError) as info:
        dd.allreduce([1.0])  # refused inside ding_dist/comm/collectives.py
    assert raised_in_comm(info.value)
    with pytest.raises(RuntimeError) as info:
        torch.zeros(2).view(3)  # raised by torch, called from here
    assert not raised_in_comm(info.value)
    assert not raised_in_comm(RuntimeError("never raised"))
