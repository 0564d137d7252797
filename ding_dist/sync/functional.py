"""``sync_gradients``: an explicit, bucketed gradient average for code that calls it itself."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import nn

from ding_dist.sync._primitives import MeteredLink
from ding_dist.sync.bucket import average_by_counts, build_buckets, check_bucket_size, counts_of

__all__ = ["sync_gradients"]


def sync_gradients(
    model_or_params: nn.Module | Iterable[torch.Tensor],
    group: Any = None,
    op: str = "avg",
    bucket_size_mb: float = 25.0,
) -> int:
    """Average (or sum) the ``.grad`` of every parameter across ranks, a few collectives in all.

    Gradients are packed into flat buckets (with one indicator slot per parameter), one SUM
    allreduce per bucket is started for all buckets, then each is unpacked. ``op='avg'`` averages
    each gradient over the ranks that have one (DI-engine's indicator semantics); ``op='sum'``
    adds them (a missing gradient counts as zeros). A parameter that no rank has a gradient for
    keeps ``.grad = None``. Every rank must pass the same parameters in the same order.
    Returns the number of collectives issued (0 on a world of one).

    Example:
        >>> net = nn.Linear(3, 1)
        >>> net(torch.ones(2, 3)).sum().backward()
        >>> sync_gradients(net)   # a no-op on the fake link
        0
    """
    if op not in ("avg", "sum"):
        raise ValueError(f"op must be 'avg' or 'sum', got {op!r}")
    check_bucket_size(bucket_size_mb)  # on a world of one too, so a bad value fails before a real run
    if isinstance(model_or_params, nn.Module):
        params = list(model_or_params.parameters())
    else:
        params = list(dict.fromkeys(model_or_params))
        for p in params:
            if not isinstance(p, torch.Tensor):
                raise TypeError(f"sync_gradients expects a module or tensors, got an item of type {type(p).__name__}")
    link = MeteredLink(group)
    if link.world_size == 1 or not params:
        return 0
    world = link.world_size
    buckets = build_buckets(params, bucket_size_mb, grad_views=False)
    works = []
    for b in buckets:
        for p, view in zip(b.params, b.views):
            if p.grad is not None:
                view.copy_(p.grad)
        b.indicators.copy_(torch.tensor([p.grad is not None for p in b.params], dtype=b.buffer.dtype))
        if op == "avg":
            b.grads.mul_(1.0 / world)
        works.append(link.allreduce(b.buffer))
    for b, work in zip(buckets, works):
        work.wait()
        counts = counts_of(b.indicators)
        if op == "avg":
            average_by_counts(b, counts, world)
        for i, (p, c) in enumerate(zip(b.params, counts)):
            if c == 0:
                continue
            if p.grad is None:
                p.grad = b.views[i].clone()
            else:
                p.grad.copy_(b.views[i])
    return len(works)
