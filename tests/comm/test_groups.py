"""Subgroups over real gloo processes."""

import pytest
import torch

import ding_dist as dd


def _groups_of_two():
    r = dd.get_rank()
    group = dd.get_group(2)
    assert dd.get_group(2) is group, "groups are cached"
    t = torch.tensor([float(r)])
    dd.allreduce(t, group=group)
    split = dd.comm.simple_group_split(4, r, 2)
    whole = dd.get_group(4)
    return dd.get_world_size(group), dd.get_rank(group), t.item(), split is group, dd.get_world_size(whole)


@pytest.mark.slow
def test_groups_of_two_in_a_world_of_four(run_ranks):
    for rank, (size, group_rank, total, same, whole) in enumerate(run_ranks(_groups_of_two, 4)):
        start = rank - rank % 2
        assert (size, group_rank, whole) == (2, rank % 2, 4)
        assert total == start + start + 1
        assert same


def _group_size_not_dividing():
    dd.get_group(2)


def test_group_size_must_divide_the_world(run_ranks):
    with pytest.raises(dd.comm.LaunchError, match="group_size 2 does not divide the world size 3"):
        run_ranks(_group_size_not_dividing, 3)
