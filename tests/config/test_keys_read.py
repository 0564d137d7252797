"""Every config key a policy reads is declared in its ``keys``, and every key it declares is read.

Each policy type is built from its declared defaults wrapped in a mapping that records every key looked up (found or
not), acts on a small env (CartPole-v1; Pendulum-v1 for continuous actions) for one collect and learns once on it
(on-policy: the rollout; off-policy: one update from the pipeline's replay buffer of the policy's kind). Keys the
pipeline reads instead of the policy (``reader="pipeline"``: loops, collectors, replay buffers) need not be read here;
each must be named in the pipeline's code (``ding_dist/entry``, ``ding_dist/worker``, ``ding_dist/data``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from easydict import EasyDict

from ding_dist.entry.factories import make_replay_buffer
from ding_dist.policy import POLICY_REGISTRY, get_policy_cls
from ding_dist.policy.base import acting_only
from ding_dist.utils.keys import KeySet
from ding_dist.utils.plan import PLAN_KEYS
from ding_dist.worker import Collector, Learner

ROOT = Path(__file__).resolve().parents[2] / "ding_dist"
#: What :meth:`Plan.of <ding_dist.utils.plan.Plan.of>` looks up in any policy config: whether it is a full config, and
#: every run size (``collect.n_episode`` only where a policy declares it): probes, not reads.
PLAN_PROBES = {"policy", "env", *(k.removeprefix("policy.") for k in PLAN_KEYS.values())}
#: One name per class (aliases read the same keys).
TYPES = sorted({cls: name for name, cls in sorted(POLICY_REGISTRY.items(), reverse=True)}.values())
CONTINUOUS = {"sac", "td3", "ddpg", "d4pg", "bdq"}
#: Small sizes, so one learn step is quick; every other key keeps its declared default.
SMALL = {
    "device": "cpu",
    "collect.n_sample": 16,
    "collect.n_episode": 2,
    "learn.batch_size": 8,
    "learn.update_per_collect": 1,
    "learn.learning_starts": 0,
    "learn.lr_decay_collects": 10,
    "other.eps_ladder.enable": True,
    "learn.noise": True,
    "learn.epoch_per_collect": 1,
    "learn.unroll_len": 4,
    "learn.aux_freq": 1,
    "sequence.seq_len": 6,
    "sequence.burnin": 2,
    "sequence.overlap": 2,
    "other.replay_buffer.replay_buffer_size": 512,
}


class _Recording:
    """Records the dotted path of every key looked up through it (``cfg.learn.x``, ``cfg["x"]``, ``.get``, ``in``)."""

    def __init__(self, d: Any = None, *, log: set[str] | None = None, prefix: str = "") -> None:
        object.__setattr__(self, "_log", d._log if isinstance(d, _Recording) else (set() if log is None else log))
        object.__setattr__(self, "_prefix", d._prefix if isinstance(d, _Recording) else prefix)
        super().__init__(d)

    def _seen(self, key: Any) -> None:
        if isinstance(key, str):
            object.__getattribute__(self, "_log").add(object.__getattribute__(self, "_prefix") + key)

    def __getattribute__(self, name: str) -> Any:
        if not name.startswith("_") and dict.__contains__(self, name):
            object.__getattribute__(self, "_seen")(name)
        try:
            return object.__getattribute__(self, name)
        except AttributeError:
            object.__getattribute__(self, "_seen")(name)  # a missing key looked up as an attribute
            raise

    def __getitem__(self, key: Any) -> Any:
        self._seen(key)
        return dict.__getitem__(self, key)

    def get(self, key: Any, default: Any = None) -> Any:
        self._seen(key)
        return dict.get(self, key, default)

    def __contains__(self, key: Any) -> bool:
        self._seen(key)
        return dict.__contains__(self, key)


class Recording(_Recording, EasyDict):
    """An EasyDict that records reads (its methods live on the mixin: EasyDict copies a class's own attributes)."""


def recording(node: Any, log: set[str], prefix: str = "") -> Any:
    if not isinstance(node, dict):
        return node
    out = Recording(log=log, prefix=prefix)
    for key, value in node.items():
        dict.__setitem__(out, key, recording(value, log, f"{prefix}{key}."))
        object.__setattr__(out, key, dict.__getitem__(out, key))
    return out


def small_config(keys: KeySet) -> EasyDict:
    cfg = keys.defaults()
    for path, value in SMALL.items():
        *parents, leaf = path.split(".")
        node = cfg
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict) and leaf in node:
            node[leaf] = value
    if "hidden_sizes" in cfg.model:
        cfg.model.hidden_sizes = [16] * len(cfg.model.hidden_sizes)
    return cfg


def read_keys(policy_type: str) -> set[str]:
    """The dotted ``policy.*`` paths (relative) looked up while the policy is built, acts, collects and learns once."""
    cls = get_policy_cls(policy_type)
    log: set[str] = set()
    cfg = recording(small_config(cls.keys), log)
    env_id = "Pendulum-v1" if policy_type in CONTINUOUS else "CartPole-v1"
    venv = gym.vector.SyncVectorEnv([lambda: gym.make(env_id)] * 2)
    try:
        torch.manual_seed(0)
        policy = cls(cfg, venv.single_observation_space, venv.single_action_space, "cpu")
        policy.schedule_values(0)
        run = EasyDict(seed=0, create_config={"policy": {"type": policy_type}}, policy=cfg)
        collector = Collector(venv, policy, seeds=[0, 1])
        n_vec = 48 if "collect.n_episode" in cls.keys else 8  # PG learns on complete episodes only
        learner = Learner(policy)
        if cls.on_policy:
            for _ in range(2):  # twice: some read their schedules from the second learn on (PPG's phases)
                learner.train_rollout(collector.collect(n_vec, 0))
        else:
            space = venv.single_observation_space, venv.single_action_space
            buffer = make_replay_buffer(run, *space, 2, 512, seed=0)
            for _ in range(3):
                buffer.extend(collector.collect(n_vec, 0))
            learner.train_replay(buffer, 2, 4)
        obs = np.stack([venv.single_observation_space.sample()] * 2)
        policy.eval_action(obs)
        if hasattr(policy, "set_actor_index"):  # an actor of an actor-learner run (Ape-X's epsilon ladder)
            policy.set_actor_index(1, 2)
            policy.collect_action(obs, env_step=0)
        if "model.conv_channels" in cls.keys:  # read where observations are images
            with acting_only():
                cls(recording(small_config(cls.keys), log), gym.spaces.Box(0, 255, (4, 84, 84), np.uint8),
                    venv.single_action_space, "cpu")  # fmt: skip
    finally:
        venv.close()
    return log


def leaves_read(log: set[str], keys: KeySet) -> tuple[set[str], set[str]]:
    """(declared keys read, reads of keys not declared); a read of a section (``learn``) is neither."""
    read, undeclared = set(), set()
    for path in log:
        if path in keys:
            read.add(path)
        elif any(k.startswith(path + ".") for k in keys):
            continue  # a section on the way to its keys
        elif any(path.startswith(k + ".") for k, key in keys.items() if key.default == {}):
            continue  # inside an open dict (sync.options): its keys belong to someone else
        elif path in PLAN_PROBES:
            continue
        else:
            undeclared.add(path)
    return read, undeclared


def pipeline_source() -> str:
    return "\n".join(p.read_text() for d in ("entry", "worker", "data") for p in (ROOT / d).rglob("*.py"))


@pytest.mark.parametrize("policy_type", TYPES)
def test_a_policy_reads_exactly_the_keys_it_declares(policy_type):
    keys = get_policy_cls(policy_type).keys
    read, undeclared = leaves_read(read_keys(policy_type), keys)
    assert sorted(undeclared) == [], f"{policy_type} reads keys it does not declare"
    unread = sorted(p for p, k in keys.items() if k.reader == "policy" and p not in read)
    assert unread == [], f"{policy_type} declares keys nothing read (reader='pipeline' if the pipeline reads them)"


def test_every_pipeline_key_is_named_in_the_pipeline():
    source = pipeline_source()
    pipeline = {p for name in TYPES for p, k in get_policy_cls(name).keys.items() if k.reader == "pipeline"}
    assert pipeline
    missing = sorted(p for p in pipeline if not re.search(rf"\b{re.escape(p.rsplit('.', 1)[-1])}\b", source))
    assert missing == []
