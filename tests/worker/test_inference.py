"""Batched inference across actors: one inference rank acts for two actor ranks, one forward pass per batch."""

from __future__ import annotations

import numpy as np
import pytest

from ding_dist.comm import get_rank
from ding_dist.envs import env_seeds, make_vec_env
from ding_dist.worker import Collector
from ding_dist.worker.inference import InferenceServer, RemotePolicy
from tests.worker.test_sample_groups import Greedy, Recurrent


class Counted(Greedy):
    """The greedy CartPole policy, counting its calls and the rows of each."""

    def __init__(self) -> None:
        self.rows: list[int] = []

    def collect_action(self, obs, env_step):
        self.rows.append(len(obs))
        action, extras = super().collect_action(obs, env_step)
        return action, {**extras, "done_mask": obs[:, 0] > 0}  # a bool extra travels too


def _rollout(policy, rank: int, groups: int):
    venv = make_vec_env({"id": "CartPole-v1", "sample_groups": groups}, 4, training=True)
    col = Collector(venv, policy, env_seeds(0, rank, "collector", 4))
    try:
        return [col.collect(n, env_step=10 * n) for n in (9, 6)], col.pop_episodes()
    finally:
        col.close()


def _serve_two_actors():
    """Rank 0 serves ranks 1 (one group of 4 envs) and 2 (two groups of 2); each actor also collects locally."""
    space = make_vec_env({"id": "CartPole-v1"}, 1).single_observation_space
    if get_rank() == 0:
        policy = Counted()
        stats = InferenceServer(policy, [1, 2], space, max_rows=4).serve()
        return stats, policy.rows
    groups = get_rank()
    remote = RemotePolicy(Counted(), server=0, obs_space=space)
    served = _rollout(remote, get_rank(), groups)
    remote.stop()
    return served, _rollout(Counted(), get_rank(), groups)


def test_one_server_acts_for_two_actors_as_their_own_policy_would(run_ranks):
    (stats, rows), (served_1, local_1), (served_2, local_2) = run_ranks(_serve_two_actors, 3)
    for served, local in ((served_1, local_1), (served_2, local_2)):
        for a, b in zip(served[0], local[0]):
            assert sorted(a) == sorted(b)
            for key in a:
                np.testing.assert_array_equal(a[key], b[key], err_msg=key)
                assert a[key].dtype == b[key].dtype, key
        assert served[1] == local[1]
    # the probe (1 row), then batches of what has arrived: actor 1 asks once per step (4 rows), actor 2 twice
    # (two groups of 2 rows): 15 + 30 requests, 60 + 60 rows; how they share batches depends on the timing
    assert stats["requests"] == 45 and stats["rows"] == 4 * 15 + 4 * 15 and stats["lost"] == []
    assert rows[0] == 1 and len(rows) == 1 + stats["batches"] and sum(rows[1:]) == stats["rows"]
    assert set(rows[1:]) <= {2, 4, 6}  # one request of each actor at most: an actor waits for its answer


def test_recurrent_policies_are_refused():
    space = make_vec_env({"id": "CartPole-v1"}, 1).single_observation_space
    with pytest.raises(ValueError, match="does not serve recurrent policies"):
        RemotePolicy(Recurrent(), server=0, obs_space=space)
