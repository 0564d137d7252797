"""No policy's update makes the host wait for the device: a learn step reads no value back (``.item()``, ``bool(t)``,
``int(t)``, ``.cpu()``, ``read_host``), with the non-finite verdict on its device path as on an accelerator.

Counted around each ``policy.learn`` call of a real short collection and update, for the shipped CartPole and
Pendulum config of every policy type:

- ``cpu`` (every machine): the instruments of ``tests/sync/test_host_syncs.py`` (a dispatch mode that sees every
  scalar read, and ``read_host``'s own count), with the non-finite check forced onto its accelerator path. Every
  tensor is a host tensor here, so the few reads of values that stay on the host on an accelerator too are listed
  with their reason and counted exactly;
- ``cuda`` (a GPU machine; skipped elsewhere): the policy on the GPU, every read of a CUDA value counted (scalar
  reads, copies to the CPU, ``nonzero``): none at all.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

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
_SYNCING = {torch.ops.aten._local_scalar_dense.default, torch.ops.aten.nonzero.default}


class _DeviceReads(TorchDispatchMode):
    """Counts the operations that make the host wait for a device value: scalar reads, ``nonzero`` (its output size),
    and copies from a device to the host."""

    def __init__(self) -> None:
        super().__init__()
        self.where: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        src = args[0] if args and isinstance(args[0], torch.Tensor) else None
        if src is not None and src.device.type != "cpu":
            to_host = func in (torch.ops.aten._to_copy.default,) and kwargs.get("device") == torch.device("cpu")
            if func in _SYNCING or to_host:
                self.where.append(str(func))
        if func is torch.ops.aten.copy_.default and args[0].device.type == "cpu" and args[1].device.type != "cpu":
            self.where.append(str(func))
        return out


def _learn_reads(name: str, device: str) -> tuple[list[int], int, bool]:
    """Reads per ``policy.learn`` call of a short collection and update of config ``name`` on ``device``, the calls
    made (2 rollouts on-policy, 3 replay updates off-policy), and whether every distributed model's non-finite check
    kept its verdict on the device."""
    cfg = load_config(name, overrides=[f"policy.device={device}"])
    n = cfg.env.collector_env_num
    venv = make_vec_env(cfg.env, n, env_manager(cfg), training=True)
    try:
        policy = build_policy(cfg, venv.single_observation_space, venv.single_action_space)
        learn, reads = policy.learn, []

        def counted(batch):
            if device == "cpu":
                before = host_reads()
                with _ScalarReads() as scalars:
                    out = learn(batch)
                reads.append(scalars.count + host_reads() - before)
            else:
                with _DeviceReads() as seen:
                    out = learn(batch)
                reads.append(len(seen.where))
            return out

        policy.learn = counted
        collector, learner = Collector(venv, policy, list(range(n))), Learner(policy)
        p = cfg.policy
        n_vec = max(1, math.ceil(p.collect.n_sample / n))
        on_policy = get_policy_cls(cfg.create_config.policy.type).on_policy
        calls = 2 if on_policy else 3
        if on_policy:
            for _ in range(calls):
                learner.train_rollout(collector.collect(n_vec, 0))
        else:
            space = venv.single_observation_space, venv.single_action_space
            buffer = make_replay_buffer(cfg, *space, n, replay_capacity(cfg, 1), 0)
            while len(buffer) < 2 * p.learn.batch_size:
                buffer.extend(collector.collect(n_vec, 0))
            learner.train_replay(buffer, calls, p.learn.batch_size)
    finally:
        venv.close()
    guards = [m._guard for m in learner._models() if m._guard is not None]
    return reads, calls, bool(guards) and all(g.on_device for g in guards)


@pytest.mark.parametrize("name", CONFIGS)
def test_a_learn_step_reads_nothing_back(name, monkeypatch):
    monkeypatch.setattr(nonfinite, "reads_wait_for_device", lambda device: True)
    reads, calls, on_device = _learn_reads(name, "cpu")
    assert on_device, "every optimizer takes the device-side verdict"
    assert reads == [HOST_VALUES.get(name, 0)] * calls, reads


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.parametrize("name", CONFIGS)
def test_a_learn_step_on_cuda_reads_nothing_back(name):
    reads, calls, on_device = _learn_reads(name, "cuda")
    assert on_device, "every optimizer takes the device-side verdict"
    assert reads == [0] * calls, reads
