"""``gradient_allreduce``: plain full-precision averaging of gradients (what torch DDP does).

Relative to a bare SUM allreduce it pre-scales the gradients by ``1/W`` (as DDP does, so the
result matches DDP's) and sends the bucket's indicator slots in the same collective; parameters
that only some ranks produced are then rescaled to the average over those ranks.

Register: ``model, opt = ding_dist.distribute(model, opt, algorithm='gradient_allreduce')``
"""

from __future__ import annotations

from ding_dist.sync._primitives import Link
from ding_dist.sync.algorithms import Algorithm
from ding_dist.sync.bucket import Bucket, Pending, average_by_counts, counts_of


class AllreduceState:
    """State of ``gradient_allreduce``: just the link."""

    __slots__ = ("link",)

    def __init__(self, link: Link) -> None:
        self.link = link


def make_state(link: Link) -> AllreduceState:
    """Build the state (the algorithm takes no options)."""
    return AllreduceState(link)


def allreduce_hook(state: AllreduceState, bucket: Bucket) -> Pending:
    """Average ``bucket.grads`` over the producing ranks with one SUM allreduce of the buffer."""
    world = state.link.world_size
    bucket.grads.mul_(1.0 / world)
    work = state.link.allreduce(bucket.buffer)

    def then() -> list[float]:
        counts = counts_of(bucket.indicators)
        average_by_counts(bucket, counts, world)
        return counts

    return Pending([work], then)


ALGORITHMS = (Algorithm("gradient_allreduce", make_state=make_state, hook=allreduce_hook, aliases=("ddp",)),)
