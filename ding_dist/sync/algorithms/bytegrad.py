"""``bytegrad``: 8-bit min-max quantized gradients (Bagua's ByteGrad), optional error feedback.

Relative to ``gradient_allreduce``: instead of one allreduce of 32-bit values, each rank
quantizes its gradient chunks to one byte per value (per-chunk min and scale), scatters them with
an all-to-all, averages its own chunk in full precision, re-quantizes it and all-gathers the
result: about a quarter of the bytes on the wire. Quantization is per row of ``piece_mb / W``
megabytes of gradient (default 1 MB pieces), so one large parameter does not flatten the
resolution of a whole bucket. With ``error_feedback=True`` the local
quantization error is added back into the next step's gradient.

Register: ``model, opt = ding_dist.distribute(model, opt, algorithm='bytegrad', error_feedback=True)``
"""

from __future__ import annotations

from ding_dist.sync._primitives import Link
from ding_dist.sync.algorithms import Algorithm
from ding_dist.sync.algorithms._scatter_gather import MinMaxUInt8Codec, ScatterGatherState, scatter_gather
from ding_dist.sync.bucket import Bucket, Pending


def make_state(link: Link, error_feedback: bool = False, piece_mb: float = 1.0) -> ScatterGatherState:
    """State for ``bytegrad``; ``error_feedback`` keeps the local quantization residual, ``piece_mb``
    is the float32 size of the pieces a bucket is sent in (each one quantized on its own)."""
    return ScatterGatherState(link, MinMaxUInt8Codec(), error_feedback=error_feedback, piece_mb=piece_mb)


def bytegrad_hook(state: ScatterGatherState, bucket: Bucket) -> Pending:
    """Quantized scatter-reduce + all-gather of ``bucket.grads``."""
    return scatter_gather(state, bucket)


def forget_residuals(state: ScatterGatherState) -> None:
    """A skipped (non-finite) step left NaN/inf residuals behind: start error feedback afresh."""
    state.residuals.clear()


ALGORITHMS = (
    Algorithm(
        "bytegrad",
        make_state=make_state,
        hook=bytegrad_hook,
        on_skip=forget_residuals,
        options=("error_feedback", "piece_mb"),
        aliases=("quantize_allreduce",),
    ),
)
