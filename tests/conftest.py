"""Shared test fixtures: ``run_ranks`` starts real processes over gloo with bounded timeouts."""

from __future__ import annotations

import functools

import pytest
import torch

from ding_dist.comm import dist_finalize, launch

torch.set_num_threads(1)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that uses ``run_ranks`` with ``processes`` (mutation testing leaves them out)."""
    for item in items:
        if "run_ranks" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.processes)


@pytest.fixture
def run_ranks():
    """``run_ranks(fn, nproc, *args)``: run a module-level ``fn`` on ``nproc`` gloo ranks, return results."""
    return functools.partial(launch, timeout=120, comm_timeout=30)


@pytest.fixture(autouse=True)
def _no_leftover_group():
    yield
    dist_finalize()
