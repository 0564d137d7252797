"""No policy's update makes the host wait for the device: a learn step reads no value back (``.item()``, ``bool(t)``,
``int(t)``, ``read_host``), with the non-finite verdict on its device path as on an accelerator.

Counted with the instruments of ``tests/sync/test_host_syncs.py`` (a dispatch mode that sees every scalar read, and
``read_host``'s own count) around each ``policy.learn`` call of a real short collection and update, for the shipped
CartPole and Pendulum config of every policy type. On a CPU-only machine every tensor is a host tensor, so the few
reads of values that stay on the host on an accelerator too are listed with their reason and counted exactly.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from ding_dist.config import load_config
from ding_dist.entry.experiment import Experiment  # noqa: F401  (the factories' layer)
from ding_dist.entry.factories import build_policy, env_manager, make_replay_buffer, replay_capacity
from ding_dist.envs import make_vec_env
from ding_dist.policy import get_policy_cls
from ding_dist.sync import nonfinite
from ding_dist.sync.bucket import host_reads
from ding_dist.worker import Collector, Learner

from ..sync.test_host_syncs import _ScalarReads

REPO = Path(__file__).resolve().parents[2]
CONFIGS = sorted(
    p.name.removesuffix("_config.py")
    for p in (REPO / "configs").glob("*_config.py")
    if p.name.split("_")[0] in ("cartpole", "pendulum")
)
#: Reads per learn call of values that live on the host whatever the device (one per rollout, not per minibatch).
HOST_VALUES = {
    "cartpole_pg": 3,  # the ranks' episode and sample counts, gathered to plan the episodes (host lists)
    "cartpole_ppo_pg": 3,  # the same episode plan
    "cartpole_impala": 1,  # the seed of the minibatch plan, drawn on the host
}


@pytest.mark.parametrize("name", CONFIGS)
def test_a_learn_step_reads_nothing_back(name, monkeypatch):
    monkeypatch.setattr(nonfinite, "reads_wait_for_device", lambda device: True)
    cfg = load_config(name)
    n = cfg.env.collector_env_num
    venv = make_vec_env(cfg.env, n, env_manager(cfg), training=True)
    try:
        policy = build_policy(cfg, venv.single_observation_space, venv.single_action_space)
        learn, reads = policy.learn, []

        def counted(batch):
            before = host_reads()
            with _ScalarReads() as scalars:
                out = learn(batch)
            reads.append(scalars.count + host_reads() - before)
            return out

        policy.learn = counted
        collector, learner = Collector(venv, policy, list(range(n))), Learner(policy)
        p = cfg.policy
        n_vec = max(1, math.ceil(p.collect.n_sample / n))
        on_policy = get_policy_cls(cfg.create_config.policy.type).on_policy
        if on_policy:
            for _ in range(2):
                learner.train_rollout(collector.collect(n_vec, 0))
        else:
            space = venv.single_observation_space, venv.single_action_space
            buffer = make_replay_buffer(cfg, *space, n, replay_capacity(cfg, 1), 0)
            while len(buffer) < 2 * p.learn.batch_size:
                buffer.extend(collector.collect(n_vec, 0))
            learner.train_replay(buffer, 3, p.learn.batch_size)
    finally:
        venv.close()
    guards = [m._guard for m in learner._models() if m._guard is not None]
    assert guards and all(g.on_device for g in guards), "every optimizer takes the device-side verdict"
    assert reads == [HOST_VALUES.get(name, 0)] * (2 if on_policy else 3), reads  # 2 rollouts, or 3 replay updates
