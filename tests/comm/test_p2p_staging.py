"""Point-to-point of CUDA tensors over gloo goes through a host copy (gloo's send/recv read host memory only).

CI has no GPU: the staged path is driven here with CPU tensors (the copies are then host to host), and the
choice of path is checked on backend strings; benchmarks/gpu_check.sh runs it with CUDA tensors (rows h1-h2).
"""

from __future__ import annotations

import pytest
import torch

import ding_dist as dd
from ding_dist.comm.link import _host_staged_p2p, cuda_backend_of


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
