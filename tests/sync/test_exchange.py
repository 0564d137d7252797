"""Messages in pieces, on real gloo ranks: ``MeteredLink.exchange`` delivers them bitwise, and the pipelined
``low_precision_decentralized`` (quantize, send, decode piece by piece) trains bitwise as with one message.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from ding_dist import comm
from ding_dist.comm import launch
from ding_dist.sync import _primitives, distribute
from ding_dist.sync._primitives import MeteredLink

SHAPES = [(1000,), (1 << 20,), ((1 << 20) + 3,), (1, 3_000_001)]


def _message(shape: tuple[int, ...], rank: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(10 * rank + len(shape) + shape[-1] % 7)
    if len(shape) == 2:  # a uint8 message row, as low_precision_decentralized sends
        return torch.randint(0, 256, shape, generator=gen, dtype=torch.uint8)
    return torch.randn(shape, generator=gen)


def exchange_ranks() -> dict:
    """Each rank swaps every shape with the other; also with 1-byte minimum pieces (8 on every size)."""
    rank = comm.get_rank()
    link = MeteredLink()
    out: dict = {"ok": [], "pieces": []}
    for min_bytes in (_primitives.EXCHANGE_MIN_PIECE_BYTES, 1):
        _primitives.EXCHANGE_MIN_PIECE_BYTES = min_bytes
        for shape in SHAPES:
            send = _message(shape, rank)
            recv = torch.empty_like(send)
            handles = link.exchange(send, recv, 1 - rank)
            handles.wait()
            out["ok"].append(torch.equal(recv, _message(shape, 1 - rank)))
            out["pieces"].append(len(handles.works) // 2)
    out["collectives"] = link.collectives
    return out


def test_exchange_in_pieces_is_bitwise():
    results = launch(exchange_ranks, 2, timeout=120, comm_timeout=60)
    for r in results:
        assert all(r["ok"]), r["ok"]
        # 4 KB goes whole; 4 MB and more in 8 pieces of at least 256 KB; with 1-byte pieces always 8
        assert r["pieces"] == [1, 8, 8, 8, 8, 8, 8, 8]
        assert r["collectives"] == 2 * len(SHAPES)  # one collective per exchange, however many pieces


def _low_precision_run(steps: int = 6) -> dict:
    """A 2,145-parameter linear model, 6 SGD steps of ``low_precision_decentralized``; weights and replicas."""
    rank = comm.get_rank()
    torch.manual_seed(0)
    net = nn.Linear(64, 33)
    model, opt = distribute(net, torch.optim.SGD(net.parameters(), lr=0.05), "low_precision_decentralized")
    gen = torch.Generator().manual_seed(rank)
    for _ in range(steps):
        x, y = torch.randn(16, 64, generator=gen), torch.randn(16, 33, generator=gen)
        opt.zero_grad()
        ((model(x) - y) ** 2).mean().backward()
        opt.step()
    state = model.engine.state
    out = {
        "params": torch.cat([p.detach().flatten() for p in model.parameters()]),
        "replicas": [t.clone() for t in state.replicas[0]],
    }
    model.close()
    return out


def low_precision_ranks() -> dict:
    """The same training as one message (the default piece floor) and in 8 pieces (a 1-byte floor)."""
    whole = _low_precision_run()
    _primitives.EXCHANGE_MIN_PIECE_BYTES = 1
    return {"whole": whole, "pieces": _low_precision_run(), "n_pieces": len(_primitives.pieces(torch.zeros(2160)))}


@pytest.mark.parametrize("world", [2, 4])
def test_pipelined_low_precision_is_bitwise_one_message(world):
    results = launch(low_precision_ranks, world, timeout=180, comm_timeout=60)
    for r in results:
        assert r["n_pieces"] == 8
        torch.testing.assert_close(r["pieces"]["params"], r["whole"]["params"], rtol=0, atol=0)
        for got, want in zip(r["pieces"]["replicas"], r["whole"]["replicas"]):
            torch.testing.assert_close(got, want, rtol=0, atol=0)
    assert not torch.equal(results[0]["whole"]["params"], results[1]["whole"]["params"])  # the ranks differ
