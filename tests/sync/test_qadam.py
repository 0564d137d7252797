"""``QAdamOptimizer`` on one process against torch's Adam/AdamW and a float64 numpy reference.

During warm-up it must be torch's Adam (L2 weight decay, the default, as Bagua's) or AdamW
(``weight_decay_mode='decoupled'``) bit for bit; across the warm-up boundary it must follow the
documented rule: steps ``t <= N`` update both moments, later steps only the momentum, the frozen
variance corrected by ``1 - beta2**N``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ding_dist.sync import QAdamOptimizer

LR, BETAS, EPS, WD = 1e-2, (0.9, 0.99), 1e-8, 0.1


def _params(seed: int = 0) -> list[torch.nn.Parameter]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(4, 3, generator=gen)), torch.nn.Parameter(torch.randn(3, generator=gen))]


def _grads(steps: int) -> list[list[torch.Tensor]]:
    gen = torch.Generator().manual_seed(1)
    return [[torch.randn(4, 3, generator=gen), torch.randn(3, generator=gen)] for _ in range(steps)]


def _qadam(params, warmup: int, mode: str) -> QAdamOptimizer:
    return QAdamOptimizer(
        params, lr=LR, betas=BETAS, eps=EPS, weight_decay=WD, warmup_steps=warmup, weight_decay_mode=mode
    )


def _run(opt_factory, grads: list[list[torch.Tensor]]) -> tuple[list[torch.Tensor], torch.optim.Optimizer]:
    params = _params()
    opt = opt_factory(params)
    for step in grads:
        for p, g in zip(params, step):
            p.grad = g.clone()
        opt.step()
    return [p.detach().clone() for p in params], opt


@pytest.mark.parametrize(
    ("mode", "torch_optimizer"),
    [("l2", torch.optim.Adam), ("decoupled", torch.optim.AdamW)],
)
def test_warm_up_is_torch_adam_bit_for_bit(mode, torch_optimizer):
    grads = _grads(6)
    ours, opt = _run(lambda ps: _qadam(ps, warmup=10, mode=mode), grads)
    ref, ref_opt = _run(
        lambda ps: torch_optimizer(ps, lr=LR, betas=BETAS, eps=EPS, weight_decay=WD, foreach=False), grads
    )
    for a, b in zip(ours, ref):
        assert torch.equal(a, b)
    for s, r in zip(opt.state.values(), ref_opt.state.values()):
        assert torch.equal(s["exp_avg"], r["exp_avg"]) and torch.equal(s["exp_avg_sq"], r["exp_avg_sq"])


def test_l2_is_the_default_and_differs_from_decoupled():
    grads = _grads(3)
    default, _ = _run(lambda ps: QAdamOptimizer(ps, lr=LR, weight_decay=WD), grads)
    l2, _ = _run(lambda ps: QAdamOptimizer(ps, lr=LR, weight_decay=WD, weight_decay_mode="l2"), grads)
    decoupled, _ = _run(lambda ps: QAdamOptimizer(ps, lr=LR, weight_decay=WD, weight_decay_mode="decoupled"), grads)
    assert all(torch.equal(a, b) for a, b in zip(default, l2))
    assert not any(torch.equal(a, b) for a, b in zip(default, decoupled))


def _numpy_qadam(params, grads, warmup, mode):
    """Float64 reference of the documented update, warm-up boundary included."""
    b1, b2 = BETAS
    ps = [p.detach().double().numpy().copy() for p in params]
    m = [np.zeros_like(p) for p in ps]
    v = [np.zeros_like(p) for p in ps]
    for t, step in enumerate(grads, start=1):
        for i, g in enumerate(step):
            g = g.double().numpy()
            if mode == "decoupled":
                ps[i] *= 1 - LR * WD
            else:
                g = g + WD * ps[i]
            m[i] = b1 * m[i] + (1 - b1) * g
            if t <= warmup:
                v[i] = b2 * v[i] + (1 - b2) * g * g
            v_hat = v[i] / (1 - b2 ** min(t, warmup))
            ps[i] -= LR / (1 - b1**t) * m[i] / (np.sqrt(v_hat) + EPS)
    return ps


@pytest.mark.parametrize("mode", ["l2", "decoupled"])
def test_across_the_warm_up_boundary_matches_a_float64_reference(mode):
    warmup, grads = 3, _grads(9)
    ours, opt = _run(lambda ps: _qadam(ps, warmup=warmup, mode=mode), grads)
    assert opt.steps_done == 9 and opt.frozen
    assert all(s["variance_steps"] == warmup and s["step"] == 9 for s in opt.state.values())
    for a, b in zip(ours, _numpy_qadam(_params(), grads, warmup, mode)):
        np.testing.assert_allclose(a.double().numpy(), b, rtol=1e-5, atol=1e-6)
    # the variance really froze: a reference that keeps updating it lands elsewhere
    moving = _numpy_qadam(_params(), grads, warmup=len(grads), mode=mode)
    assert max(np.abs(a.double().numpy() - b).max() for a, b in zip(ours, moving)) > 1e-4


def test_state_dict_keeps_the_phase():
    _, opt = _run(lambda ps: QAdamOptimizer(ps, lr=LR, warmup_steps=2), _grads(3))
    fresh = QAdamOptimizer(_params(), lr=LR, warmup_steps=50)
    fresh.load_state_dict(opt.state_dict())
    assert (fresh.steps_done, fresh.warmup_steps, fresh.frozen) == (3, 2, True)


def test_weight_decay_options_are_validated():
    with pytest.raises(ValueError, match="weight_decay_mode must be one of \\('l2', 'decoupled'\\), got 'adamw'"):
        QAdamOptimizer(_params(), weight_decay_mode="adamw")
    with pytest.raises(ValueError, match="weight_decay must be >= 0, got -0.1"):
        QAdamOptimizer(_params(), weight_decay=-0.1)
