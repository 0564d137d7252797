"""``fp16`` and ``bf16``: gradients travel as 16-bit floats (half the bytes of ``gradient_allreduce``).

Relative to ``gradient_allreduce``: the pre-scaled bucket (gradients and indicator slots) is cast
to float16 or bfloat16 and summed across ranks by one 16-bit allreduce (``method='allreduce'``,
the default: one collective, the best use of a slow link under gloo), then cast back. With
``method='scatter_gather'`` the 16-bit chunks are scattered with an all-to-all, averaged in
float32 on their owner rank and all-gathered (more accurate for many ranks, and it avoids gloo's
slow CPU float16 summation on a fast link). Float16 values are clamped to its finite range first
(an inf is sent as NaN, so a non-finite gradient stays non-finite); indicator counts stay exact
(small integers are exact in both formats).

Register: ``model, opt = ding_dist.distribute(model, opt, algorithm='bf16')``
"""

from __future__ import annotations

import torch

from ding_dist.sync._primitives import Link
from ding_dist.sync.algorithms import Algorithm
from ding_dist.sync.algorithms._scatter_gather import HalfCodec, ScatterGatherState, scatter_gather
from ding_dist.sync.bucket import Bucket, Pending, average_by_counts, counts_of

_METHODS = ("allreduce", "scatter_gather")


class LowPrecisionState:
    """State of ``fp16``/``bf16``: link, wire dtype, method and per-bucket 16-bit buffers."""

    __slots__ = ("link", "dtype", "method", "wire", "sg")

    def __init__(self, link: Link, dtype: torch.dtype, method: str = "allreduce", piece_mb: float = 1.0) -> None:
        if method not in _METHODS:
            raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
        self.link = link
        self.dtype = dtype
        self.method = method
        self.wire: dict[int, torch.Tensor] = {}
        self.sg = ScatterGatherState(link, HalfCodec(dtype), piece_mb=piece_mb) if method == "scatter_gather" else None


def make_fp16_state(link: Link, method: str = "allreduce", piece_mb: float = 1.0) -> LowPrecisionState:
    """State for ``fp16``."""
    return LowPrecisionState(link, torch.float16, method, piece_mb)


def make_bf16_state(link: Link, method: str = "allreduce", piece_mb: float = 1.0) -> LowPrecisionState:
    """State for ``bf16``."""
    return LowPrecisionState(link, torch.bfloat16, method, piece_mb)


def low_precision_hook(state: LowPrecisionState, bucket: Bucket) -> Pending:
    """Average ``bucket.grads`` with 16-bit values on the wire."""
    if state.sg is not None:
        return scatter_gather(state.sg, bucket)
    world = state.link.world_size
    wire = state.wire.get(bucket.index)
    if wire is None:
        wire = state.wire[bucket.index] = torch.empty_like(bucket.buffer, dtype=state.dtype)
    bucket.grads.mul_(1.0 / world)
    if state.dtype == torch.float16:
        limit = torch.finfo(torch.float16).max / world  # a sum of W such values cannot overflow
        nan = float("nan")  # an inf must stay non-finite (the engine skips such steps), not be clamped
        bucket.grads.nan_to_num_(nan=nan, posinf=nan, neginf=nan).clamp_(-limit, limit)
    wire.copy_(bucket.buffer)
    work = state.link.allreduce(wire)

    def then() -> list[float]:
        bucket.buffer.copy_(wire)
        counts = counts_of(bucket.indicators)
        average_by_counts(bucket, counts, world)
        return counts

    return Pending([work], then)


_OPTIONS = ("method", "piece_mb")
ALGORITHMS = (
    Algorithm("fp16", make_state=make_fp16_state, hook=low_precision_hook, options=_OPTIONS, aliases=("float16",)),
    Algorithm("bf16", make_state=make_bf16_state, hook=low_precision_hook, options=_OPTIONS, aliases=("bfloat16",)),
)
