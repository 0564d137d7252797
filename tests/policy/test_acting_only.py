"""Policies built ``acting_only()`` (actors, the launcher's config check) act without optimizers."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.processes  # each test starts a Python process

PROBE = """
import sys
import gymnasium as gym
import numpy as np
from ding_dist.policy import get_policy_cls
from ding_dist.policy.base import acting_only

obs, act = gym.spaces.Box(-1, 1, (4,), np.float32), gym.spaces.Discrete(2)
for name in ("dqn", "ppo", "impala"):
    cls = get_policy_cls(name)
    with acting_only():
        policy = cls(cls.default_config(), obs, act)
    assert policy.optimizer is None and policy.train_model is policy.model, name
    actions, _ = policy.collect_action(np.zeros((3, 4), np.float32), env_step=0)
    assert actions.shape == (3,), actions.shape
print("torch._dynamo" in sys.modules)
full = cls(cls.default_config(), obs, act)  # a learning policy: its Adam leaves torch._dynamo out too
full.optimizer.zero_grad()
print("torch._dynamo" in sys.modules)
import torch
torch.optim.Adam(full.model.parameters()).zero_grad()  # torch's own optimizer imports it: the probe sees it
print("torch._dynamo" in sys.modules)
"""


def test_acting_only_policies_act_without_optimizer_and_no_policy_imports_dynamo():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["False", "False", "True"]
