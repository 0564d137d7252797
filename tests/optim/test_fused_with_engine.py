"""FusedOptimizer under the sync engine on real gloo ranks: the same parameters as the plain optimizer."""

import pytest
import torch

import ding_dist as dd


def _train(fused: bool, flatten: bool, steps: int = 6):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    if fused:
        optimizer = dd.FusedOptimizer(optimizer, do_flatten=flatten)
    model, optimizer = dd.distribute(model, optimizer, bucket_size_mb=0.0005)
    data = torch.Generator().manual_seed(100 + dd.get_rank())
    for _ in range(steps):
        x = torch.randn(8, 6, generator=data)
        loss = model(x).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def _compare():
    plain = _train(fused=False, flatten=False)
    return plain, _train(fused=True, flatten=True), _train(fused=True, flatten=False)


@pytest.mark.parametrize("nproc", [2])
def test_fused_optimizer_matches_plain_optimizer_under_the_engine(run_ranks, nproc):
    results = run_ranks(_compare, nproc)
    for plain, flat, fused in results:
        torch.testing.assert_close(flat, plain, rtol=1e-6, atol=1e-7)
        torch.testing.assert_close(fused, plain, rtol=1e-6, atol=1e-7)
    assert torch.equal(results[0][1], results[1][1]), "ranks stay bitwise identical"
