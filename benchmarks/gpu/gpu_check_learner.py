"""Check (d): learner updates/s on the GPU vs the CPU, Nature-DQN conv (d1) and CartPole MLP (d2)."""

from __future__ import annotations

import copy
import math
import statistics
import time

import torch
from gpu_check_common import (
    Ctx,
    NatureQ,
    _sync,
    row,
)
from torch import nn


# ------------------------------------------------------------------------------- (d) learner updates/s
def _dqn_update(net: nn.Module, target: nn.Module, opt: torch.optim.Optimizer, batch: dict[str, torch.Tensor]):
    """One double-DQN update (the DQN policy's learn step, without the replay buffer)."""
    with torch.no_grad():
        next_action = net(batch["next_obs"]).argmax(dim=-1, keepdim=True)
        next_q = target(batch["next_obs"]).gather(1, next_action).squeeze(1)
        y = batch["reward"] + 0.99 * (1.0 - batch["done"]) * next_q
    q = net(batch["obs"]).gather(1, batch["action"].unsqueeze(1)).squeeze(1)
    loss = nn.functional.smooth_l1_loss(q, y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    nn.utils.clip_grad_norm_(net.parameters(), 10.0)
    opt.step()
    return loss


def _make_learner(kind: str, dev: torch.device):
    gen = torch.Generator().manual_seed(0)
    if kind == "conv":
        torch.manual_seed(0)
        net, batch_size, n_act, lr = NatureQ(6), 32, 6, 1e-4

        def obs() -> torch.Tensor:
            return torch.randint(0, 256, (batch_size, 4, 84, 84), generator=gen, dtype=torch.uint8)
    else:
        from ding_dist.policy.dqn import DQNPolicy, QNetwork

        m = DQNPolicy.default_config().model
        torch.manual_seed(0)
        net, batch_size, n_act, lr = QNetwork(4, 2, m.hidden_sizes, m.dueling, m.activation), 64, 2, 1e-3

        def obs() -> torch.Tensor:
            return torch.randn(batch_size, 4, generator=gen)

    batch = {
        "obs": obs(),
        "next_obs": obs(),
        "action": torch.randint(0, n_act, (batch_size,), generator=gen),
        "reward": torch.randn(batch_size, generator=gen),
        "done": (torch.rand(batch_size, generator=gen) < 0.1).float(),
    }
    net = net.to(dev)
    target = copy.deepcopy(net).requires_grad_(False)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    return net, target, opt, {k: v.to(dev) for k, v in batch.items()}


def check_learner_rate(ctx: Ctx, check_id: str, kind: str) -> list[dict[str, str]]:
    torch.set_num_threads(ctx.cpu_threads)
    devices = [torch.device("cpu")] + ([torch.device("cuda", 0)] if ctx.cuda else [])
    learners = {d.type: _make_learner(kind, d) for d in devices}
    n_updates = {
        "cpu": ctx.size(f"d_updates_{kind}_cpu"),
        "cuda": ctx.size(f"d_updates_{kind}_gpu"),
    }
    rates: dict[str, list[float]] = {d.type: [] for d in devices}
    for d in devices:
        net, target, opt, batch = learners[d.type]
        for _ in range(ctx.size("d_warmup")):
            _dqn_update(net, target, opt, batch)
        _sync(d)
    for _ in range(ctx.size("d_repeats")):  # interleaved: load drift hits both devices alike
        for d in devices:
            net, target, opt, batch = learners[d.type]
            _sync(d)
            t0 = time.perf_counter()
            for _ in range(n_updates[d.type]):
                loss = _dqn_update(net, target, opt, batch)
            _sync(d)
            rates[d.type].append(n_updates[d.type] / (time.perf_counter() - t0))
            assert math.isfinite(loss.item()), f"non-finite loss on {d}"
    med = {k: statistics.median(v) for k, v in rates.items()}
    what = "Nature-DQN conv 4x84x84 uint8, batch 32" if kind == "conv" else "CartPole DQN MLP 128-128, batch 64"
    cpu = f"cpu ({ctx.cpu_threads} thread{'s' if ctx.cpu_threads > 1 else ''}) {med['cpu']:.0f}/s"
    if "cuda" in med:
        figure = f"gpu {med['cuda']:.0f}/s, {cpu}, gpu/cpu {med['cuda'] / med['cpu']:.1f}x"
    else:
        figure = f"{cpu}; no GPU: ratio not measured"
    return [row(check_id, f"learner updates/s, {what}, Adam", figure)]
