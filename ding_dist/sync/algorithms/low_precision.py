"""``fp16`` and ``bf16``: gradients travel as 16-bit floats (half the bytes of ``gradient_allreduce``).

Relative to ``gradient_allreduce``: the pre-scaled bucket (gradients and indicator slots) is cast
to float16 or bfloat16 and summed across ranks by one 16-bit allreduce (``method='allreduce'``,
the default: one collective, the best use of a slow link under gloo), then cast back. With
``method='scatter_gather'`` the 16-bit chunks are scattered with an all-to-all, averaged in
float32 on their owner rank and all-gathered (more accurate for many ranks, and it avoids gloo's
slow CPU float16 summation on a fast link). Float16 values are clamped to its finite range first
(an inf is sent as NaN, so a non-finite gradient stays non-finite). Producer counts stay exact for
any world size, though 16-bit floats hold integers exactly only up to 256 (bfloat16) or 2048
(float16): each block of that many ranks sums its indicators into a slot of its own
(:func:`encode_indicators`), one slot per parameter up to 256/2048 ranks; the scatter-gather
method sends one indicator byte per rank and sums them in float32.

Register: ``model, opt = ding_dist.distribute(model, opt, algorithm='bf16')``
"""

from __future__ import annotations

import torch

from ding_dist.sync._primitives import MeteredLink
from ding_dist.sync.algorithms import Algorithm
from ding_dist.sync.algorithms._scatter_gather import HalfCodec, ScatterGatherState, scatter_gather
from ding_dist.sync.bucket import Bucket, BucketStage, average_by_counts, exact_integer_limit

_METHODS = ("allreduce", "scatter_gather")


class LowPrecisionState:
    """State of ``fp16``/``bf16``: link, wire dtype, method and per-bucket 16-bit buffers."""

    __slots__ = ("link", "dtype", "method", "wire", "sg")

    def __init__(self, link: MeteredLink, dtype: torch.dtype, method: str = "allreduce", piece_mb: float = 1.0) -> None:
        if method not in _METHODS:
            raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
        self.link = link
        self.dtype = dtype
        self.method = method
        self.wire: dict[int, torch.Tensor] = {}
        self.sg = ScatterGatherState(link, HalfCodec(dtype), piece_mb=piece_mb) if method == "scatter_gather" else None


def make_fp16_state(link: MeteredLink, method: str = "allreduce", piece_mb: float = 1.0) -> LowPrecisionState:
    """State for ``fp16``."""
    return LowPrecisionState(link, torch.float16, method, piece_mb)


def make_bf16_state(link: MeteredLink, method: str = "allreduce", piece_mb: float = 1.0) -> LowPrecisionState:
    """State for ``bf16``."""
    return LowPrecisionState(link, torch.bfloat16, method, piece_mb)


def count_slots(world: int, dtype: torch.dtype) -> int:
    """Indicator slots per parameter on a 16-bit wire: one per block of ranks whose sum stays exact.

    Example:
        >>> count_slots(256, torch.bfloat16), count_slots(257, torch.bfloat16), count_slots(257, torch.float16)
        (1, 2, 1)
    """
    return -(-world // exact_integer_limit(dtype))


def encode_indicators(indicators: torch.Tensor, rank: int, world: int, out: torch.Tensor) -> None:
    """Write this rank's 0/1 ``indicators`` (``P`` values) into ``out`` (``count_slots * P`` wire values).

    Rank ``r`` writes into block ``r // exact_integer_limit(dtype)`` and zeros elsewhere, so each
    block sums at most that many ones: every partial sum of the allreduce, hence the count, is exact
    in the wire's dtype for any world size.
    """
    per_block = exact_integer_limit(out.dtype)
    blocks = out.view(count_slots(world, out.dtype), indicators.numel())
    blocks.zero_()
    blocks[rank // per_block].copy_(indicators)


def decode_counts(summed: torch.Tensor, n_params: int) -> torch.Tensor:
    """Producer counts (float32, on the wire's device) from the summed slots of :func:`encode_indicators`."""
    return summed.view(-1, n_params).float().sum(dim=0)


def low_precision_hook(state: LowPrecisionState, bucket: Bucket) -> BucketStage:
    """Average ``bucket.grads`` with 16-bit values on the wire."""
    if state.sg is not None:
        return scatter_gather(state.sg, bucket)
    link = state.link
    world, n, p = link.world_size, bucket.numel, len(bucket.params)
    wire = state.wire.get(bucket.index)
    if wire is None:
        slots = count_slots(world, state.dtype) * p
        wire = state.wire[bucket.index] = torch.empty(n + slots, dtype=state.dtype, device=bucket.buffer.device)
    bucket.grads.mul_(1.0 / world)
    if state.dtype == torch.float16:
        limit = torch.finfo(torch.float16).max / world  # a sum of W such values cannot overflow
        nan = float("nan")  # an inf must stay non-finite (the engine skips such steps), not be clamped
        bucket.grads.nan_to_num_(nan=nan, posinf=nan, neginf=nan).clamp_(-limit, limit)
    wire[:n].copy_(bucket.grads)
    encode_indicators(bucket.indicators, link.rank, world, wire[n:])
    work = link.allreduce(wire)

    def then() -> torch.Tensor:
        bucket.grads.copy_(wire[:n])
        counts = decode_counts(wire[n:], p)
        average_by_counts(bucket, counts, world)
        return counts

    return BucketStage([work], then)


_OPTIONS = ("method", "piece_mb")
ALGORITHMS = (
    Algorithm("fp16", make_state=make_fp16_state, hook=low_precision_hook, options=_OPTIONS, aliases=("float16",)),
    Algorithm("bf16", make_state=make_bf16_state, hook=low_precision_hook, options=_OPTIONS, aliases=("bfloat16",)),
)
