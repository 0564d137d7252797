"""Config keys declared once (``ding_dist.utils.keys``): what a declaration generates and how it is checked."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest

from ding_dist.config.compile import compile_config
from ding_dist.config.describe import main as describe_main
from ding_dist.config.errors import ConfigError
from ding_dist.config.rules import value_errors
from ding_dist.policy import POLICY_REGISTRY, Policy, get_policy_cls
from ding_dist.utils.keys import Key, KeySet


def test_a_key_declared_again_keeps_what_it_leaves_out():
    base = KeySet(Key("learn.batch_size", 64, "batch", ">= 1", reader="pipeline"), Key("learn.lr", 0.1, "rate"))
    derived = base.plus(Key("learn.batch_size", 32), Key("learn.lr", 0.2, "the new rate", "> 0"))
    assert derived["learn.batch_size"] == Key("learn.batch_size", 32, "batch", ">= 1", "pipeline")
    assert derived["learn.lr"] == Key("learn.lr", 0.2, "the new rate", "> 0", "policy")
    assert base["learn.batch_size"].default == 64  # plus() derives; the base stays as declared


def test_a_key_inside_an_open_section_takes_its_place():
    keys = KeySet(Key("device", "auto", "d"), Key("model", {}, "m"), Key("learn.x", 1, "x"))
    keys = keys.plus(Key("model.a", 1, "a"), Key("learn.y", 2, "y"), Key("model.b", 2, "b"))
    assert list(keys) == ["device", "model.a", "model.b", "learn.x", "learn.y"]
    assert keys.defaults() == {"device": "auto", "model": {"a": 1, "b": 2}, "learn": {"x": 1, "y": 2}}
    assert list(keys.minus("model.a", "learn.y")) == ["device", "model.b", "learn.x"]


def test_bad_declarations_fail_where_they_are_written():
    with pytest.raises(ValueError, match=r"unknown key rule '>> 1'"):
        Key("learn.x", 1, "x", ">> 1")
    with pytest.raises(ValueError, match="dotted identifiers"):
        Key("learn..x", 1)
    with pytest.raises(KeyError, match="learn.nope"):
        KeySet(Key("learn.x", 1)).minus("learn.nope")
    with pytest.raises(ValueError, match="'learn.x.y' lies inside 'learn.x', which is a value"):
        KeySet(Key("learn.x", 1)).plus(Key("learn.x.y", 2))


@pytest.mark.parametrize(
    "rule, good, bad, expected",
    [
        (">= 1", 1, 0, ">= 1"),
        (">= 1", 3, True, ">= 1"),  # a bool is not a count
        ("> 0", 1e-9, math.inf, "a finite number > 0"),
        ("number >= 0", 0, -0.5, "a number >= 0"),
        ("[0, 1]", 1.0, 1.5, "in [0, 1]"),
        ("(0, 1]", 1, 0, "in (0, 1]"),
        ("sizes", [64, 64], [64, 0], "a non-empty list of ints >= 1"),
        ("in ('huber', 'mse')", "mse", "l1", "one of 'huber', 'mse'"),
        ("in (False,)", False, 0, "one of False"),
        ("> 0 or None", None, -1.0, "a finite number > 0 or None"),
    ],
)
def test_rules(rule, good, bad, expected):
    key = Key("learn.x", good, "x", rule)
    assert key.error(good) is None
    assert key.error(bad) == f"must be {expected}"
    assert key.expected == expected


@pytest.mark.parametrize("policy_type", sorted(POLICY_REGISTRY))
def test_default_config_is_the_declarations(policy_type):
    cls = get_policy_cls(policy_type)
    assert cls.default_config() == cls.keys.defaults()
    assert [p for p, k in cls.keys.items() if not k.meaning] == []
    assert [p for p, k in cls.keys.items() if k.error(k.default) is not None] == []  # each default obeys its rule


@pytest.mark.parametrize("policy_type", sorted(POLICY_REGISTRY))
def test_keys_population_based_training_may_change_are_declared(policy_type):
    cls = get_policy_cls(policy_type)
    assert sorted(set(cls.pbt_keys) - set(cls.keys)) == []


def test_the_docstring_lists_the_keys_a_policy_declares_beyond_the_shared_ones():
    doc = get_policy_cls("ppo").__doc__
    for path in ("learn.lr_decay_collects", "model.obs_norm", "learn.betas", "learn.eps", "learn.learning_rate"):
        assert f"``{path}``" in doc
    assert "``other.log_freq``" not in doc  # shared, declared so by Policy: in Policy.keys, not repeated
    assert "``learn.batch_size`` = ``64`` (>= 1): minibatch" in doc


def _compile(policy_type: str, policy: dict) -> object:
    defaults = {"policy": get_policy_cls(policy_type).default_config()}
    return compile_config({"policy": policy}, {"policy": {"type": policy_type}}, defaults=defaults)


def test_compile_checks_the_rule_the_policy_declares():
    with pytest.raises(ConfigError) as exc:
        _compile("dqn", {"learn": {"loss": "l1"}})
    assert str(exc.value) == "config key 'policy.learn.loss' must be one of 'huber', 'mse', got 'l1'"
    with pytest.raises(ConfigError) as exc:
        _compile("sac", {"priority": True})
    assert str(exc.value) == "config key 'policy.priority' must be one of False, got True"
    assert _compile("d4pg", {"priority": False}).policy.priority is False


def test_a_config_without_a_policy_type_is_judged_by_any_declaration():
    assert value_errors({"policy": {"learn": {"loss": "l1", "batch_size": None}}}) == [
        "config key 'policy.learn.loss' must be one of 'huber', 'mse', got 'l1'"  # None: PG's batch_size allows it
    ]


def test_ppo_reads_the_adam_settings_it_declares():
    cfg = _compile("ppo", {"device": "cpu", "learn": {"betas": [0.8, 0.99], "eps": 1e-7}}).policy
    obs, act = gym.spaces.Box(-1, 1, (3,), np.float32), gym.spaces.Discrete(2)
    group = get_policy_cls("ppo")(cfg, obs, act).optimizer.param_groups[0]
    assert (group["betas"], group["eps"]) == ((0.8, 0.99), 1e-7)


def test_describe_prints_a_policy_s_key_table(capsys):
    assert describe_main(["--markdown", "ppo"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "| key | default | must be | meaning |"
    assert "| `learn.betas` | [0.9, 0.999] | - | Adam's betas |" in lines
    assert len(lines) == 2 + len(get_policy_cls("ppo").keys)
    assert describe_main(["--markdown"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2 + len(Policy.keys)
