"""``policy.sync`` chooses the synchronization of every network a policy trains, from the config."""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import pytest
import torch

import ding_dist as dd
from ding_dist.config import ConfigError, check_sync_config
from ding_dist.entry import load_config
from ding_dist.policy import DQNPolicy, PPOPolicy, SACPolicy
from ding_dist.sync import QAdamOptimizer
from tests.entry.test_pipeline import CONFIGS

OBS = gym.spaces.Box(-1.0, 1.0, (3,))


def _build(kind: str, algorithm: str, options: dict):
    cls, action = {
        "dqn": (DQNPolicy, gym.spaces.Discrete(2)),
        "ppo": (PPOPolicy, gym.spaces.Discrete(2)),
        "sac": (SACPolicy, gym.spaces.Box(-1.0, 1.0, (1,))),
    }[kind]
    cfg = cls.default_config()
    cfg.device = "cpu"
    cfg.sync = {"algorithm": algorithm, "options": options}
    policy = cls(cfg, OBS, action)
    models = [v for v in vars(policy).values() if isinstance(v, dd.sync.DistributedModel)]
    optimizers = sorted({type(v).__name__ for k, v in vars(policy).items() if k.endswith("optimizer")})
    return sorted({m.algorithm for m in models}), optimizers, len(models)


@pytest.mark.parametrize(
    "kind, algorithm, options, expected",
    [
        ("dqn", "bytegrad", {"error_feedback": True}, (["bytegrad"], ["Adam"], 1)),
        ("ppo", "bf16", {}, (["bf16"], ["Adam"], 1)),
        ("ppo", "qadam", {"warmup_steps": 5}, (["qadam"], ["QAdamOptimizer"], 1)),
        ("sac", "fp16", {}, (["fp16"], ["Adam"], 3)),
    ],
)
def test_every_trained_network_takes_the_configured_algorithm(run_ranks, kind, algorithm, options, expected):
    assert run_ranks(_build, 2, kind, algorithm, options) == [expected, expected]


def test_qadam_from_the_config_builds_bagua_optimizer_with_its_warmup():
    cfg = PPOPolicy.default_config()
    cfg.device = "cpu"
    cfg.sync = {"algorithm": "qadam", "options": {"warmup_steps": 7}}
    policy = PPOPolicy(cfg, OBS, gym.spaces.Discrete(2))
    assert isinstance(policy.optimizer, QAdamOptimizer)
    assert policy.optimizer.warmup_steps == 7


def test_an_algorithm_that_needs_its_own_optimizer_gets_its_optimizer_options(monkeypatch):
    from ding_dist.sync import algorithms

    class OwnAdam(torch.optim.Adam):
        def __init__(self, params, lr: float, own_option: int = 0, **kwargs) -> None:
            super().__init__(params, lr=lr, **kwargs)
            self.own_option = own_option

    plain = algorithms.get_algorithm("gradient_allreduce")
    algo = dataclasses.replace(plain, name="own_optimizer", optimizer=OwnAdam, optimizer_options=("own_option",))
    monkeypatch.setitem(algorithms._REGISTRY, algo.name, algo)  # registered for this test only
    sync = {"algorithm": "own_optimizer", "options": {"own_option": 3}}
    check_sync_config(sync)  # a valid option of this algorithm
    cfg = PPOPolicy.default_config()
    cfg.device = "cpu"
    cfg.sync = sync
    policy = PPOPolicy(cfg, OBS, gym.spaces.Discrete(2))  # distribute() does not get own_option
    assert isinstance(policy.optimizer, OwnAdam) and policy.optimizer.own_option == 3
    assert policy.train_model.algorithm == "own_optimizer"
    with pytest.raises(ConfigError, match="unknown config key 'policy.sync.options.own_option'"):
        check_sync_config({"algorithm": "gradient_allreduce", "options": {"own_option": 3}})


@pytest.mark.parametrize(
    "sync, needles",
    [
        (
            {"algorithm": "bytegrd"},
            ["'policy.sync.algorithm' must be one of", "got 'bytegrd'", "did you mean 'bytegrad'"],
        ),
        (
            {"algorithm": "bytegrad", "options": {"error_fedback": True}},
            [
                "unknown config key 'policy.sync.options.error_fedback'",
                "did you mean 'policy.sync.options.error_feedback'",
            ],
        ),
    ],
)
def test_a_bad_sync_block_is_one_config_error(sync, needles):
    with pytest.raises(ConfigError) as info:
        check_sync_config(sync)
    message = str(info.value)
    assert "\n" not in message
    for needle in needles:
        assert needle in message


def test_set_reaches_the_sync_block():
    cfg = load_config(f"{CONFIGS}/cartpole_ppo_config.py", overrides=["policy.sync.algorithm=bf16"])
    assert (cfg.policy.sync.algorithm, dict(cfg.policy.sync.options)) == ("bf16", {})
