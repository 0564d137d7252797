"""Point-to-point of CUDA tensors over gloo goes through a host copy (gloo's send/recv read host memory only).

CI has no GPU: the staged path is driven here with CPU tensors (the copies are then host to host), and the
choice of path is checked on backend strings; benchmarks/gpu/gpu_check.sh runs it with CUDA tensors (rows h1-h2).
"""

from __future__ import annotations

import pytest
import torch

import ding_dist as dd
from ding_dist.comm.link import _host_staged_p2p, cuda_backend_of, lacks_host_backend


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ("cuda:gloo", "gloo"),
        ("cpu:gloo,cuda:gloo", "gloo"),
        ("gloo", "gloo"),
        ("cpu:gloo,cuda:nccl", "nccl"),
        ("cuda:nccl, cpu:gloo", "nccl"),
        ("nccl", "nccl"),
        ("cpu:gloo", None),
    ],
)
def test_the_backend_that_moves_cuda_tensors(config, expected):
    assert cuda_backend_of(config) == expected


def _staged_exchange() -> dict:
    rank = dd.get_rank()
    peer = 1 - rank
    out = {}
    mine = torch.arange(4.0) + 10 * rank
    if rank == 0:
        _host_staged_p2p("send", mine, peer, None)
        got = torch.zeros(4)
        _host_staged_p2p("recv", got, peer, None)
    else:
        got = torch.zeros(4)
        _host_staged_p2p("recv", got, peer, None)
        _host_staged_p2p("send", mine, peer, None)
    out["blocking"] = got.tolist()
    into = torch.full((2, 3), -1.0)
    send = torch.full((2, 3), float(rank + 1))
    handles = [_host_staged_p2p("isend", send, peer, None), _host_staged_p2p("irecv", into, peer, None)]
    send.fill_(99.0)  # after the call: the message holds the data as of the call
    out["before_wait"] = into.tolist()  # the received bytes land in the caller's tensor in wait()
    out["returned"] = [h.wait() is t for h, t in zip(handles, (send, into))]
    out["async"] = into.tolist()
    return out


def test_staged_send_recv_and_isend_irecv_deliver_into_the_callers_tensor(run_ranks):
    r0, r1 = run_ranks(_staged_exchange, 2)
    assert r0["blocking"] == [10.0, 11.0, 12.0, 13.0]
    assert r1["blocking"] == [0.0, 1.0, 2.0, 3.0]
    for r, peer_value in ((r0, 2.0), (r1, 1.0)):
        assert r["before_wait"] == [[-1.0] * 3] * 2
        assert r["returned"] == [True, True]
        assert r["async"] == [[peer_value] * 3] * 2


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ("cuda:gloo", True),
        ("gloo", False),
        ("cpu:gloo,cuda:gloo", False),
        ("cpu:gloo,cuda:nccl", False),
        ("nccl", False),
    ],
)
def test_which_configs_lack_a_host_backend(config, expected):
    assert lacks_host_backend(config) is expected


def _staged_over_cuda_gloo() -> dict:
    """Under ``cuda:gloo`` torch refuses host tensors on the world (the H200 run's h0-h2 failed so): the staged copy
    travels on the world's gloo twin, and on that of a subgroup ``comm.new_group`` made; torch's own group has none."""
    import torch.distributed as dist

    out = {"world": _staged_exchange()}
    sub = dd.comm.new_group([0, 1])
    rank, got = dd.get_rank(), torch.zeros(2)
    if rank == 0:
        _host_staged_p2p("send", torch.tensor([5.0, 6.0]), 1, sub)
    else:
        _host_staged_p2p("recv", got, 0, sub)
    out["subgroup"] = got.tolist()
    bare = dist.new_group([0, 1])
    try:
        _host_staged_p2p("send" if rank == 0 else "recv", torch.zeros(1), 1 - rank, bare)
        out["bare"] = "sent"
    except RuntimeError as exc:
        out["bare"] = str(exc)
    return out


def test_staged_point_to_point_over_cuda_gloo_uses_a_gloo_twin(run_ranks):
    r0, r1 = run_ranks(_staged_over_cuda_gloo, 2, backend="cuda:gloo")
    assert r0["world"]["blocking"] == [10.0, 11.0, 12.0, 13.0] and r1["world"]["blocking"] == [0.0, 1.0, 2.0, 3.0]
    assert r0["world"]["async"] == [[2.0] * 3] * 2 and r1["world"]["async"] == [[1.0] * 3] * 2
    assert r1["subgroup"] == [5.0, 6.0]
    for r in (r0, r1):
        assert "has no gloo twin for it: make the group with ding_dist.comm.new_group" in r["bare"]
