"""``sg_allreduce``: full-precision scatter-reduce + all-gather (Bagua's ``sg-allreduce``).

Relative to ``gradient_allreduce``: the same average, but built from an all-to-all of gradient
chunks and an all-gather of the reduced chunks instead of one allreduce (the pattern ByteGrad
compresses); each rank reduces its chunk in full precision.

Register: ``model, opt = ding_dist.distribute(model, opt, algorithm='sg_allreduce')``
"""

from __future__ import annotations

from ding_dist.sync._primitives import MeteredLink
from ding_dist.sync.algorithms import Algorithm
from ding_dist.sync.algorithms._scatter_gather import RawCodec, ScatterGatherState, scatter_gather
from ding_dist.sync.bucket import Bucket, BucketStage


def make_state(link: MeteredLink, piece_mb: float = 1.0) -> ScatterGatherState:
    """State for ``sg_allreduce``; ``piece_mb``: size of the pieces a bucket is sent in."""
    return ScatterGatherState(link, RawCodec(), piece_mb=piece_mb)


def sg_allreduce_hook(state: ScatterGatherState, bucket: Bucket) -> BucketStage:
    """Full-precision scatter-reduce + all-gather of ``bucket.grads``."""
    return scatter_gather(state, bucket)


ALGORITHMS = (Algorithm("sg_allreduce", make_state=make_state, hook=sg_allreduce_hook, options=("piece_mb",)),)
