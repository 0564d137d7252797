"""The top level of ``ding_dist``: the few names a training script needs, and where the others live."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import ding_dist

TOP_LEVEL = [
    "DistContext",
    "FusedOptimizer",
    "allgather",
    "allreduce",
    "allreduce_data",
    "available_algorithms",
    "barrier",
    "broadcast",
    "broadcast_object",
    "broadcast_parameters",
    "dist_finalize",
    "dist_init",
    "dist_mode",
    "distribute",
    "error_wrapper",
    "get_group",
    "get_local_rank",
    "get_rank",
    "get_world_size",
    "is_fake",
    "launch",
    "sync_gradients",
]

#: names once served by the top level -> the subpackage that serves them now
MOVED = {
    "free_port": "ding_dist.comm",
    "allreduce_async": "ding_dist.comm",
    "send": "ding_dist.comm",
    "LaunchError": "ding_dist.comm",
    "DDPContext": "ding_dist.comm",
    "set_debug": "ding_dist.comm",
    "DistributedModel": "ding_dist.sync",
    "NonFiniteGradientError": "ding_dist.sync",
    "QAdamOptimizer": "ding_dist.sync",
    "allreduce_parameters": "ding_dist.sync",
    "register_algorithm": "ding_dist.sync",
    "weight_drift": "ding_dist.sync",
    "LoadBalancingDistributedBatchSampler": "ding_dist.data",
    "LoadBalancingDistributedSampler": "ding_dist.data",
}


def test_the_top_level_is_the_short_list():
    assert sorted(ding_dist.__all__) == ding_dist.__all__ == TOP_LEVEL
    assert len(TOP_LEVEL) <= 25


@pytest.mark.parametrize("name", TOP_LEVEL)
def test_every_top_level_name_resolves_to_its_subpackage_object(name):
    value = getattr(ding_dist, name)
    homes = [importlib.import_module(f"ding_dist.{p}") for p in ("comm", "sync", "optim")]
    assert [getattr(home, name, None) is value for home in homes].count(True) == 1


@pytest.mark.parametrize("name", sorted(MOVED))
def test_a_moved_name_says_where_it_lives_now(name):
    home = MOVED[name]
    with pytest.raises(AttributeError) as info:
        getattr(ding_dist, name)
    assert str(info.value) == f"ding_dist.{name} moved: import it from {home}"
    assert getattr(importlib.import_module(home), name) is not None


def test_every_comm_name_off_the_top_level_points_to_comm():
    for name in sorted(set(ding_dist.comm.__all__) - set(TOP_LEVEL)):
        with pytest.raises(AttributeError, match=rf"^ding_dist\.{name} moved: import it from ding_dist\.comm$"):
            getattr(ding_dist, name)


def test_an_unknown_name_is_a_plain_attribute_error():
    with pytest.raises(AttributeError, match=r"^module 'ding_dist' has no attribute 'no_such_name'$"):
        ding_dist.no_such_name  # noqa: B018
    assert not hasattr(ding_dist, "no_such_name")


def test_subpackages_stay_attributes():
    for name in ("comm", "compat", "config", "data", "entry", "envs", "optim", "policy", "sync", "utils", "worker"):
        assert getattr(ding_dist, name) is importlib.import_module(f"ding_dist.{name}")
    assert set(TOP_LEVEL) | {"comm", "sync"} <= set(dir(ding_dist))


def test_the_surface_does_not_import_torch():
    """``import ding_dist``, ``__all__``, a subpackage's name list and a moved name's error stay torch-free."""
    code = (
        "import sys, ding_dist\n"
        "names = ding_dist.__all__\n"
        "try:\n"
        "    ding_dist.free_port\n"
        "except AttributeError as e:\n"
        "    print(e)\n"
        "print(len(names), 'torch' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["ding_dist.free_port moved: import it from ding_dist.comm", "22 False"]


def test_star_import_gives_exactly_the_top_level():
    namespace: dict = {}
    exec("from ding_dist import *", namespace)
    assert sorted(k for k in namespace if k != "__builtins__") == TOP_LEVEL
