"""The device rules: one function decides a rank's device, every collective checks where its tensors live.

Without a GPU, a process group created for CUDA tensors only (``backend="cuda:gloo"``) stands in for
nccl: the layer must refuse a host tensor with a clear error naming the call site, and the pipeline's own
collectives must ask for the backend's device (on a CPU-only machine that request fails at the CUDA
allocation, which proves no host tensor would reach the backend).
"""

from __future__ import annotations

import pytest
import torch

import ding_dist as dd
from ding_dist.comm.devices import _parse_backend_config
from ding_dist.comm.settings import resolve_launch_settings

CUDA = torch.cuda.is_available()


@pytest.mark.parametrize(
    "text, types",
    [
        ("gloo", {"cpu", "cuda"}),
        ("nccl", {"cuda"}),
        ("cuda:gloo", {"cuda"}),
        ("cpu:gloo", {"cpu"}),
        ("cpu:gloo,cuda:nccl", {"cpu", "cuda"}),
    ],
)
def test_backend_config_names_its_device_types(text, types):
    assert _parse_backend_config(text) == frozenset(types)


def test_resolve_device_on_this_machine():
    assert dd.comm.resolve_device("cpu") == torch.device("cpu")
    assert dd.comm.resolve_device("auto") == (torch.device("cuda", 0) if CUDA else torch.device("cpu"))
    with pytest.raises(ValueError, match="device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got 'tpu'"):
        dd.comm.resolve_device("tpu")


@pytest.mark.skipif(CUDA, reason="checks the CPU-only error")
def test_cuda_device_without_cuda_is_one_clear_error():
    with pytest.raises(ValueError, match="device 'cuda' needs CUDA and this machine has no CUDA device"):
        dd.comm.resolve_device("cuda")


@pytest.mark.parametrize(
    "env, local",
    [
        ({"LOCAL_WORLD_SIZE": "4"}, (1, 4)),  # rank 5 of 8, four per node: local rank 1 on node 1
        ({"SLURM_NTASKS_PER_NODE": "4", "SLURM_LOCALID": "1"}, (1, 4)),
        ({"LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4"}, (1, 4)),
    ],
)
def test_explicit_rank_on_a_later_node_is_not_the_local_rank(env, local):
    s = resolve_launch_settings(rank=5, world_size=8, addr="10.0.0.1", port=29500, env=env)
    assert (s.local_rank, s.local_size) == local


def _host_tensor_on_a_cuda_only_group():
    dd.allreduce(torch.ones(2))


def test_host_tensor_on_a_device_only_backend_names_the_call_site(run_ranks):
    with pytest.raises(dd.comm.LaunchError) as caught:
        dd.launch(_host_tensor_on_a_cuda_only_group, 2, backend="cuda:gloo", timeout=120, comm_timeout=30)
    text = str(caught.value)
    assert "DeviceMismatchError" in text
    assert "allreduce at tests/comm/test_devices.py:" in text
    assert "in _host_tensor_on_a_cuda_only_group" in text
    assert "moves only ['cuda'] tensors" in text


def _pipeline_collectives(which: str):
    """One of the pipeline's collectives on a CUDA-only group; returns what it produced."""
    from ding_dist.worker import reduce_log
    from ding_dist.worker.evaluator import Evaluator

    assert dd.comm.comm_device().type == "cuda"
    try:
        if which == "reduce_log":
            return reduce_log({"episodes": 1}, {"train/loss": 0.5})
        if which == "evaluate_and_share":

            class _Stub(Evaluator):
                def evaluate(self):
                    return {"mean_return": 7.0}

            return _Stub(None, None, n_episode=1, stop_value=5.0).evaluate_and_share()
        if which == "allreduce_data":
            return dd.allreduce_data(2.0)
        return dd.broadcast_object({"a": 1})
    except dd.comm.DeviceMismatchError:
        raise
    except (AssertionError, RuntimeError) as e:  # a CPU-only torch refuses the CUDA allocation itself
        return f"cuda allocation refused: {e}"


PIPELINE_COLLECTIVES = ["reduce_log", "evaluate_and_share", "allreduce_data", "broadcast_object"]


@pytest.mark.skipif(CUDA, reason="the CPU-only form of the check; gpu_check.sh runs the CUDA form")
@pytest.mark.parametrize("which", PIPELINE_COLLECTIVES)
def test_pipeline_collectives_ask_for_the_backends_device(which):
    results = dd.launch(_pipeline_collectives, 2, which, backend="cuda:gloo", timeout=120, comm_timeout=30)
    for result in results:
        assert isinstance(result, str) and result.startswith("cuda allocation refused"), result
        assert "No backend type associated with device type cpu" not in result


@pytest.mark.skipif(not CUDA, reason="needs a GPU (run by benchmarks/gpu/gpu_check.sh)")
@pytest.mark.parametrize("which", PIPELINE_COLLECTIVES)
def test_pipeline_collectives_run_on_a_cuda_only_group(which):
    expected = {
        "reduce_log": {"episodes": 2.0, "train/loss": 0.5},
        "evaluate_and_share": (7.0, True),
        "allreduce_data": 4.0,
        "broadcast_object": {"a": 1},
    }[which]
    assert dd.launch(_pipeline_collectives, 2, which, backend="cuda:gloo", timeout=120, comm_timeout=30) == [
        expected,
        expected,
    ]


def _outside_a_subgroup():
    import torch.distributed as dist

    group = dist.new_group([0])
    t = torch.tensor([float(dd.get_rank() + 1)])
    handle = dd.allreduce(t, group=group, async_op=True)
    handle.wait()
    dd.broadcast(t, src=0, group=group)
    return dd.get_rank(group), dd.get_world_size(group), t.item(), dd.comm.reduce_data(3.0, group=group)


def test_collective_on_a_group_this_rank_is_not_in_is_a_no_op(run_ranks):
    assert run_ranks(_outside_a_subgroup, 2) == [(0, 1, 1.0, 3.0), (-1, -1, 2.0, None)]


def test_ding_dist_backend_chooses_the_backend_when_none_is_given(monkeypatch):
    monkeypatch.setenv("DING_DIST_BACKEND", "cpu:gloo")
    dd.dist_init(rank=0, world_size=1, port=dd.comm.free_port())
    try:
        assert dd.comm.backend_device_types() == frozenset({"cpu"})
        with pytest.raises(dd.comm.DeviceMismatchError, match="moves only \\['cpu'\\] tensors"):
            dd.allreduce(torch.ones(1, device="meta"))
    finally:
        dd.dist_finalize()


# ---- which GPU a rank uses, with CUDA mocked as present (2 GPUs; nothing is allocated on them) ----
@pytest.fixture
def two_gpus(monkeypatch):
    """CUDA mocked as available with 2 devices; returns the list of ``set_device`` calls."""
    calls: list[int] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "set_device", lambda d: calls.append(torch.device("cuda", d).index))
    return calls


@pytest.mark.parametrize(
    "backend, auto",
    [
        ("cpu:gloo,cuda:nccl", "cuda:1"),  # the actor-learner GPU recipe: learners on their GPU
        ("nccl", "cuda:1"),
        ("cuda:gloo", "cuda:1"),
        ("gloo", "cpu"),
        ("cpu:gloo", "cpu"),
    ],
)
def test_auto_device_follows_what_the_backend_carries(two_gpus, monkeypatch, backend, auto):
    import torch.distributed as dist

    from ding_dist.comm.devices import computes_on_cuda

    monkeypatch.setenv("LOCAL_RANK", "1")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    monkeypatch.setattr(dist, "get_backend", lambda group=None: backend)
    assert computes_on_cuda(backend) == (auto != "cpu")
    assert dd.comm.resolve_device("auto") == torch.device(auto)
    assert two_gpus == []  # resolving a device sets nothing


def test_collectives_of_a_cuda_only_group_use_the_ranks_gpu_not_gpu_0(two_gpus, monkeypatch):
    import torch.distributed as dist

    monkeypatch.setenv("LOCAL_RANK", "1")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    monkeypatch.setattr(dist, "get_backend_config", lambda group=None: "cuda:gloo")
    assert dd.comm.comm_device() == torch.device("cuda", 1) == dd.comm.resolve_device("cuda")


@pytest.mark.parametrize("backend, sets", [("cuda:gloo", [0]), ("gloo", []), ("cpu:gloo", [])])
def test_dist_init_sets_the_gpu_only_for_a_world_that_computes_on_cuda(two_gpus, backend, sets):
    dd.dist_init(backend=backend, rank=0, world_size=1, port=dd.comm.free_port())
    try:
        assert two_gpus == sets
    finally:
        dd.dist_finalize()


def test_a_mixed_backend_leaves_cuda_alone_at_init():
    from ding_dist.comm.devices import cuda_only

    # cpu:gloo,cuda:nccl cannot start without NCCL here: the rule dist_init applies is checked instead.
    # Under it CPU actors must never touch CUDA (their async envs fork after dist_init).
    assert [cuda_only(b) for b in ("cpu:gloo,cuda:nccl", "nccl", "cuda:nccl", "cuda:gloo", "gloo")] == [
        False,
        True,
        True,
        True,
        False,
    ]
