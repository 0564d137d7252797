"""load_config: the one way from a config file, a shipped name or a dict to a run's compiled config, compiled once."""

from __future__ import annotations

import copy
import pickle

import pytest
from easydict import EasyDict

from ding_dist.config import ConfigError, compiled, is_compiled, load_config, read_config, save_config_data
from ding_dist.config.shipped import find_config


def test_a_compiled_config_comes_back_as_it_is_and_is_not_compiled_again(monkeypatch):
    cfg = load_config("cartpole_dqn", seed=4, overrides=["policy.learn.batch_size=128"])
    calls = []
    monkeypatch.setattr(compiled, "compile_config", lambda *a, **k: calls.append(1))
    assert load_config(cfg) is cfg
    assert calls == []
    assert (cfg.seed, cfg.policy.learn.batch_size, type(cfg.policy).__name__) == (4, 128, "EasyDict")


def test_seed_or_overrides_with_a_compiled_config_are_refused():
    cfg = load_config("cartpole_dqn")
    with pytest.raises(ValueError, match=r"^this config is compiled already: give seed and overrides when it is"):
        load_config(cfg, seed=1)
    with pytest.raises(ValueError, match=r"^this config is compiled already"):
        load_config(cfg, overrides=["seed=1"])


def test_copies_keep_the_mark_and_rebuilt_dicts_are_compiled_again():
    cfg = load_config("cartpole_ppo")
    for copied in (copy.deepcopy(cfg), pickle.loads(pickle.dumps(cfg))):
        assert is_compiled(copied) and copied == cfg
    rebuilt = EasyDict(cfg)
    assert not is_compiled(rebuilt)
    again = load_config(rebuilt)  # a main_config holding its create_config, as a saved config does
    assert is_compiled(again) and again == cfg


def test_a_path_a_shipped_name_a_pair_and_a_saved_json_compile_to_the_same_config(tmp_path):
    by_name = load_config("cartpole_ppo", seed=2)
    pair = read_config("cartpole_ppo")
    assert load_config(pair, seed=2) == by_name
    assert load_config(str(find_config("cartpole_ppo")), seed=2) == by_name
    saved = save_config_data(by_name, tmp_path / "config.json")
    assert load_config(saved) == by_name


def test_a_list_of_dicts_in_a_compiled_config_holds_plain_easydicts():
    cfg = load_config(({"env": {"env_kwargs": {"parts": [{"a": 1}]}}}, {"policy": {"type": "dqn"}}))
    assert type(cfg.env.env_kwargs.parts[0]) is EasyDict
    cfg.extra = [{"b": 2}]  # set on the compiled config itself: the items are not marked compiled
    assert type(cfg.extra[0]) is EasyDict


def test_what_is_not_a_config_is_one_line():
    with pytest.raises(ConfigError) as info:
        load_config(5)
    assert str(info.value) == (
        "config must be a config file's path or a shipped config's name, (main_config, create_config), a "
        "main_config dict or a compiled config, got int 5"
    )
    with pytest.raises(ValueError, match=r"^create_config\.policy\.type is missing; set it to one of the registered"):
        load_config({"policy": {}})
