"""``decentralized``: weight averaging with peers instead of gradient averaging (not built yet).

The engine already supports such algorithms through ``Algorithm.step_hook`` (called after every
``optimizer.step()``); the decentralized/asynchronous family is planned for a later issue.
"""

from __future__ import annotations

from typing import NoReturn

from ding_dist.sync._primitives import Link
from ding_dist.sync.algorithms import Algorithm


def make_state(link: Link, **options: object) -> NoReturn:
    """Always raises: the algorithm is not implemented yet."""
    raise NotImplementedError(
        "algorithm 'decentralized' (Bagua 'decentralize', peer-to-peer weight averaging) is not built "
        "yet in ding_dist; use 'gradient_allreduce', 'fp16', 'bf16', 'bytegrad', 'sg_allreduce' or 'qadam'"
    )


ALGORITHMS = (
    Algorithm(
        "decentralized",
        make_state=make_state,
        aliases=("low_precision_decentralized", "async"),
    ),
)
