"""``bytegrad``: 8-bit min-max quantized gradients (Bagua's ByteGrad), optional error feedback.

Relative to ``gradient_allreduce``: instead of one allreduce of 32-bit values, each rank
quantizes its gradient chunks to one byte per value (per-chunk min and scale), scatters them with
an all-to-all, averages its own chunk in full precision, re-quantizes it and all-gathers the
result: about a quarter of the bytes on the wire. Quantization is per row of ``piece_mb / W``
megabytes of gradient (default 1 MB pieces), so one large parameter does not flatten the
resolution of a whole bucket. With ``error_feedback=True`` the local
quantization error is added back into the next step's gradient.

``hierarchical=True`` (Bagua's option): ranks are grouped in nodes of
:func:`ding_dist.comm.get_local_size` consecutive ranks. Each bucket is first SUM-reduced in full
precision onto the node's local rank 0 (gradients and producer counts); each node leader divides its
node sum by the node's producer counts and runs the 8-bit scatter-gather above among the leaders only,
with those counts as its indicator bytes, so the leaders' weighted average is the average over all
producing ranks; the leader then broadcasts the result (and the global counts) within its node. Only
8-bit data crosses nodes; error feedback (if on) keeps the leader's residual of its node average. On
one node, or with one rank per node, it is the flat algorithm.

Register: ``model, opt = ding_dist.distribute(model, opt, algorithm='bytegrad', error_feedback=True)``
"""

from __future__ import annotations

import torch

from ding_dist.sync._primitives import MeteredLink, NodeHierarchy, node_hierarchy
from ding_dist.sync.algorithms import Algorithm
from ding_dist.sync.algorithms._scatter_gather import MinMaxUInt8Codec, ScatterGatherState, scatter_gather
from ding_dist.sync.algorithms.gradient_allreduce import check_hierarchical
from ding_dist.sync.bucket import Bucket, BucketStage

_MAX_INDICATOR = 255  # the scatter-gather sends each producer count in one byte


class HierarchicalByteGradState:
    """State of ``bytegrad(hierarchical=True)``: the node layout and, on node leaders, the scatter-gather
    state over the leaders' link (``None`` on the other ranks)."""

    __slots__ = ("link", "hierarchy", "leaders")

    def __init__(self, link: MeteredLink, hierarchy: NodeHierarchy, leaders: ScatterGatherState | None) -> None:
        self.link = link
        self.hierarchy = hierarchy
        self.leaders = leaders

    @property
    def residuals(self) -> dict:
        """The leader's error-feedback residuals (empty elsewhere)."""
        return self.leaders.residuals if self.leaders is not None else {}


ByteGradState = ScatterGatherState | HierarchicalByteGradState


def make_state(
    link: MeteredLink, error_feedback: bool = False, piece_mb: float = 1.0, hierarchical: bool = False
) -> ByteGradState:
    """State for ``bytegrad``; ``error_feedback`` keeps the local quantization residual, ``piece_mb``
    is the float32 size of the pieces a bucket is sent in (each one quantized on its own),
    ``hierarchical`` reduces within nodes first (subgroups created here, once).

    Example:
        >>> make_state(MeteredLink(), error_feedback=True).error_feedback
        True
    """
    flat = ScatterGatherState(link, MinMaxUInt8Codec(), error_feedback=error_feedback, piece_mb=piece_mb)
    hierarchy = node_hierarchy(link, "bytegrad") if check_hierarchical(hierarchical) else None
    if hierarchy is None:
        return flat
    if hierarchy.local_size > _MAX_INDICATOR:
        raise ValueError(f"bytegrad(hierarchical=True) supports up to {_MAX_INDICATOR} ranks per node")
    leaders = None
    if hierarchy.leaders is not None:
        leaders = ScatterGatherState(hierarchy.leaders, flat.codec, error_feedback=error_feedback, piece_mb=piece_mb)
    return HierarchicalByteGradState(link, hierarchy, leaders)


def _among_leaders(state: HierarchicalByteGradState, bucket: Bucket) -> BucketStage:
    """On a leader, after the node reduce: the 8-bit scatter-gather of the node average among leaders."""
    node_counts = bucket.indicators.float()
    inverse = (1.0 / node_counts.clamp(min=1)).to(bucket.grads.dtype)
    values = bucket.grads.clone()
    views = [values[o : o + n] for o, n in zip(bucket.offsets, bucket.sizes)]
    torch._foreach_mul_(views, list(inverse.unbind()))  # node sum -> node average, weighted back by the counts

    def publish(counts: torch.Tensor) -> None:
        bucket.indicators.copy_(counts)  # the global producer counts travel to the node with the result

    return scatter_gather(state.leaders, bucket, values).followed_by(publish)


def _hierarchical_hook(state: HierarchicalByteGradState, bucket: Bucket) -> BucketStage:
    node = state.hierarchy.node

    def then() -> BucketStage:
        first = _among_leaders(state, bucket) if state.leaders is not None else BucketStage([], lambda: None)
        return first.followed_by(lambda _: BucketStage([node.broadcast_async(bucket.buffer, src=0)], counts))

    def counts() -> torch.Tensor:
        return bucket.indicators.float().round()

    return BucketStage([node.reduce(bucket.buffer, dst=0)], then)


def bytegrad_hook(state: ByteGradState, bucket: Bucket) -> BucketStage:
    """Quantized scatter-reduce + all-gather of ``bucket.grads`` (hierarchical: among node leaders)."""
    if isinstance(state, HierarchicalByteGradState):
        return _hierarchical_hook(state, bucket)
    return scatter_gather(state, bucket)


def forget_residuals(state: ByteGradState) -> None:
    """A skipped (non-finite) step left NaN/inf residuals behind: start error feedback afresh."""
    state.residuals.clear()


ALGORITHMS = (
    Algorithm(
        "bytegrad",
        make_state=make_state,
        hook=bytegrad_hook,
        on_skip=forget_residuals,
        options=("error_feedback", "piece_mb", "hierarchical"),
        aliases=("quantize_allreduce",),
    ),
)
