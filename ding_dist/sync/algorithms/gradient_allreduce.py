"""``gradient_allreduce``: plain full-precision averaging of gradients (what torch DDP does).

Relative to a bare SUM allreduce it pre-scales the gradients by ``1/W`` (as DDP does, so the
result matches DDP's) and sends the bucket's indicator slots in the same collective; parameters
that only some ranks produced are then rescaled to the average over those ranks.

Non-finite flag, at no extra pass over the data: for float32 buckets the pre-scaling runs as the
fused multiply-and-check kernel behind ``torch.amp.GradScaler`` (the same product, bit for bit),
which also tells whether this rank's gradient holds a NaN/inf. A rank that saw one adds ``W + 1``
to every indicator slot, so after the SUM each slot is ``count + k * (W + 1)`` with ``count <= W``:
every rank reads both the producer count and ``k``, the number of ranks that saw a non-finite value
(``bucket.nonfinite_ranks``), from the one collective. Both stay on the device: the average divides by
the counts there and nothing is read back in backward.

``hierarchical=True`` (Bagua's option): ranks are grouped in nodes of
:func:`ding_dist.comm.get_local_size` consecutive ranks (torchrun's ``LOCAL_WORLD_SIZE``); each bucket
is SUM-reduced onto the node's local rank 0, allreduced among those node leaders and broadcast back
within the node (three stages, the engine drives them bucket by bucket). Only the leaders cross nodes.
The sum is the same as the flat one up to the order of the additions (bitwise when the partial sums
are exact); on one node, or with one rank per node, it is the flat algorithm.

Register: ``model, opt = ding_dist.distribute(model, opt, algorithm='gradient_allreduce')``, or
``distribute(model, opt, 'gradient_allreduce', hierarchical=True)``
"""

from __future__ import annotations

import torch

from ding_dist.sync._primitives import MeteredLink, NodeHierarchy, node_hierarchy
from ding_dist.sync.algorithms import Algorithm
from ding_dist.sync.bucket import Bucket, BucketStage, average_by_counts, exact_integer_limit

_fused_scale_and_check = getattr(torch, "_amp_foreach_non_finite_check_and_unscale_", None)


class AllreduceState:
    """State of ``gradient_allreduce``: the link, per bucket the two 1-element tensors of the check, per
    device the decoding table of the summed indicator slots (:func:`slot_table`), and the node layout when
    hierarchical (``None``: flat)."""

    __slots__ = ("link", "scratch", "tables", "hierarchy")

    def __init__(self, link: MeteredLink, hierarchy: NodeHierarchy | None = None) -> None:
        self.link = link
        self.scratch: dict[int, _Plan] = {}
        self.tables: dict[torch.device, torch.Tensor] = {}
        self.hierarchy = hierarchy


def check_hierarchical(value: object) -> bool:
    """``hierarchical`` must be True or False."""
    if not isinstance(value, bool):
        raise TypeError(f"hierarchical must be True or False, got {value!r}")
    return value


def make_state(link: MeteredLink, hierarchical: bool = False) -> AllreduceState:
    """Build the state; ``hierarchical=True`` creates the node subgroups (collective, once, here).

    Example:
        >>> make_state(MeteredLink()).hierarchy is None
        True
    """
    hierarchy = node_hierarchy(link, "gradient_allreduce") if check_hierarchical(hierarchical) else None
    return AllreduceState(link, hierarchy)


def hierarchical_allreduce(hierarchy: NodeHierarchy, tensors: list[torch.Tensor]) -> BucketStage:
    """Start an in-place SUM of ``tensors`` over every rank through the node leaders: reduce onto local
    rank 0, allreduce among the leaders, broadcast within the node. A three-stage :class:`BucketStage`."""
    node, leaders = hierarchy.node, hierarchy.leaders

    def among_leaders() -> BucketStage:
        works = [leaders.allreduce(t) for t in tensors] if leaders is not None else []
        return BucketStage(works, lambda: BucketStage([node.broadcast_async(t, src=0) for t in tensors], lambda: None))

    return BucketStage([node.reduce(t, dst=0) for t in tensors], among_leaders)


# The flagged slots hold ``count + k * (W + 1) <= W * (W + 2)``; float32 holds such integers exactly
# up to 2**24, so the flag is used up to W = 4094 (beyond, the engine checks the synchronized gradient).
_FLAG_EXACT = 2**24
# Up to this many possible slot sums (W <= 254) a flagged bucket is decoded by one table lookup.
_TABLE_ROWS = 2**16


def slot_table(world: int, device: torch.device) -> torch.Tensor:
    """Decoding table of a flagged bucket's summed indicator slot ``s = count + k * (W + 1)``: row ``s`` holds
    ``(W / max(count, 1), count, k)`` in float32, the scale rounded once from float64 (as
    :func:`~ding_dist.sync.bucket.average_by_counts` rounds it), so a lookup gives its values bit for bit.

    Example:
        >>> slot_table(2, torch.device("cpu"))[[2, 1, 5]].tolist()  # everyone; one rank; everyone, 1 saw NaN
        [[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [1.0, 2.0, 1.0]]
    """
    exact = torch.float32 if device.type == "mps" else torch.float64
    sums = torch.arange(world * (world + 2) + 1, dtype=exact)
    counts = torch.remainder(sums, world + 1)
    scale = world / counts.clamp(min=1)
    ranks = torch.div(sums, world + 1, rounding_mode="floor")
    return torch.stack([scale, counts, ranks], dim=1).to(device=device, dtype=torch.float32)


class _Plan:
    """What a bucket's launches reuse: the two 1-element tensors of the check, the argument list of the fused
    kernel, and the decoding table when it applies (``None``: the general path)."""

    __slots__ = ("buffer", "found", "inv_world", "grads", "table")

    def __init__(self, state: AllreduceState, bucket: Bucket, world: int) -> None:
        device = bucket.buffer.device
        self.buffer = bucket.buffer
        self.found = torch.zeros(1, device=device)
        self.inv_world = torch.full((1,), 1.0 / world, device=device)
        self.grads = [bucket.grads]
        flaggable = _fused_scale_and_check is not None and bucket.buffer.dtype == torch.float32
        self.table = None
        if flaggable and world * (world + 2) < _TABLE_ROWS and world <= exact_integer_limit(bucket.buffer.dtype):
            self.table = state.tables.get(device)
            if self.table is None:
                self.table = state.tables[device] = slot_table(world, device)


def _plan(state: AllreduceState, bucket: Bucket, world: int) -> _Plan:
    plan = state.scratch.get(bucket.index)
    if plan is None or plan.buffer is not bucket.buffer:
        plan = state.scratch[bucket.index] = _Plan(state, bucket, world)
    return plan


def _prescale_and_flag(state: AllreduceState, bucket: Bucket, world: int) -> bool:
    """``grads *= 1/W``; for float32 also flag a local NaN/inf in the indicator slots. True if flagged."""
    flaggable = bucket.buffer.dtype == torch.float32 and world * (world + 2) <= _FLAG_EXACT
    if _fused_scale_and_check is None or not flaggable:
        bucket.grads.mul_(1.0 / world)
        return False
    plan = _plan(state, bucket, world)
    plan.found.zero_()
    _fused_scale_and_check(plan.grads, plan.found, plan.inv_world)
    bucket.indicators.add_(plan.found, alpha=world + 1)
    return True


def _decoded(table: torch.Tensor, bucket: Bucket) -> torch.Tensor:
    """The end of a flagged float32 bucket for small worlds: the values of the general path, each found by one
    lookup of the summed slot in :func:`slot_table` (a few kernel launches: what a small network's step notices)."""
    rows = torch.index_select(table, 0, bucket.indicators.long())  # float32 sums of small integers: exact
    scale, counts, ranks = rows.unbind(1)
    bucket.nonfinite_ranks = ranks[0]  # every slot carries the same k * (W + 1)
    torch._foreach_mul_(bucket.views, scale.unbind())
    return counts


def allreduce_hook(state: AllreduceState, bucket: Bucket) -> BucketStage:
    """Average ``bucket.grads`` over the producing ranks with one SUM allreduce of the buffer."""
    world = state.link.world_size
    plan = state.scratch.get(bucket.index)
    if plan is not None and plan.table is not None and plan.buffer is bucket.buffer:  # the common case, lean
        plan.found.zero_()
        _fused_scale_and_check(plan.grads, plan.found, plan.inv_world)
        bucket.indicators.add_(plan.found, alpha=world + 1)
        table = plan.table
        if state.hierarchy is not None:
            stage = hierarchical_allreduce(state.hierarchy, [bucket.buffer])
            return stage.followed_by(lambda _: _decoded(table, bucket))
        return BucketStage([state.link.allreduce(bucket.buffer)], lambda: _decoded(table, bucket))
    flagged = _prescale_and_flag(state, bucket, world)
    tensors = [bucket.buffer]
    apart = None
    if world > exact_integer_limit(bucket.buffer.dtype):  # e.g. a bfloat16 model on > 256 ranks
        apart = bucket.indicators.float()  # the counts travel in float32 beside the 16-bit slots
        tensors.append(apart)
    table = state.scratch[bucket.index].table if flagged else None

    def then() -> torch.Tensor:
        if table is not None:
            return _decoded(table, bucket)
        counts = (bucket.indicators if apart is None else apart).float().round()  # exact integers
        if flagged:
            k = counts[0].div(world + 1, rounding_mode="floor")  # every slot carries the same k * (W + 1)
            bucket.nonfinite_ranks = k
            counts = counts - k * (world + 1)
        average_by_counts(bucket, counts, world)
        return counts

    if state.hierarchy is not None:
        return hierarchical_allreduce(state.hierarchy, tensors).followed_by(lambda _: then())
    return BucketStage([state.link.allreduce(t) for t in tensors], then)


ALGORITHMS = (
    Algorithm(
        "gradient_allreduce",
        make_state=make_state,
        hook=allreduce_hook,
        options=("hierarchical",),
        aliases=("ddp",),
    ),
)
