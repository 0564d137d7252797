"""Producer counts stay exact on 16-bit wires for any world size (one process, the packing itself).

bfloat16 holds integers exactly only up to 256 and float16 up to 2048, so a count summed in one
16-bit slot per parameter goes wrong beyond that. The ranks' indicators are summed here the way an
allreduce does (partial sums in the wire's dtype, rank after rank), for world sizes past the limit.
"""

from __future__ import annotations

import pytest
import torch

from ding_dist.sync.algorithms.low_precision import count_slots, decode_counts, encode_indicators
from ding_dist.sync.bucket import exact_integer_limit

N_PARAMS = 5


def _indicators(rank: int) -> torch.Tensor:
    """Parameter j is produced by the ranks r with r % (j + 1) == 0 (parameter 0: by everyone)."""
    return torch.tensor([float(rank % (j + 1) == 0) for j in range(N_PARAMS)])


def _expected(world: int) -> list[float]:
    return [float(sum(r % (j + 1) == 0 for r in range(world))) for j in range(N_PARAMS)]


def _summed_wire(world: int, dtype: torch.dtype) -> torch.Tensor:
    total = None
    for rank in range(world):
        wire = torch.empty(count_slots(world, dtype) * N_PARAMS, dtype=dtype)
        encode_indicators(_indicators(rank).to(dtype), rank, world, wire)
        total = wire if total is None else total + wire  # every partial sum in the wire's dtype
    return total


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("world", [2, 256, 257, 300, 2049, 5000])
def test_counts_are_exact_for_any_world_size(dtype, world):
    counts = decode_counts(_summed_wire(world, dtype), N_PARAMS)
    assert counts.dtype == torch.float32
    assert counts.tolist() == _expected(world)


def test_one_16_bit_slot_would_lose_counts_past_the_limit():
    # what the wire did before: every rank's indicator summed into one bfloat16 slot
    world = 300
    naive = sum(_indicators(r).to(torch.bfloat16) for r in range(world)).float().tolist()
    assert naive[0] == 256.0 and _expected(world)[0] == 300.0


def test_slot_count_and_limits():
    assert (exact_integer_limit(torch.bfloat16), exact_integer_limit(torch.float16)) == (256, 2048)
    assert [count_slots(w, torch.bfloat16) for w in (1, 256, 257, 512, 513)] == [1, 1, 2, 2, 3]
    assert [count_slots(w, torch.float16) for w in (2048, 2049)] == [1, 2]
