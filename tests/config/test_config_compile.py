"""compile_config: merging, overrides and strict validation."""

from __future__ import annotations

import copy

import pytest
from easydict import EasyDict
from hypothesis import given, settings
from hypothesis import strategies as st

from ding_dist.config import ConfigError, apply_overrides, parse_override, validate_config
from ding_dist.config.compile import compile_config


def _defaults() -> dict:
    return {
        "env": {"env_id": "CartPole-v1", "collector_env_num": 8, "env_kwargs": {}, "max_episode_steps": None},
        "policy": {
            "cuda": False,
            "model": {"obs_shape": 4, "hidden_sizes": [64, 64]},
            "learn": {"batch_size": 32, "learning_rate": 1e-3, "update_per_collect": 3},
            "other": {"eps": {"start": 1.0, "end": 0.05}},
        },
    }


def _compile(main: dict, **kw) -> EasyDict:
    return compile_config(main, {"env": {"type": "gym"}, "policy": {"type": "dqn"}}, defaults=_defaults(), **kw)


# ------------------------------------------------------------------------------------------ merging
def test_user_values_win_and_defaults_fill_in():
    cfg = _compile({"exp_name": "x", "policy": {"learn": {"batch_size": 128}}})
    assert cfg.policy.learn.batch_size == 128
    assert cfg.policy.learn.learning_rate == _defaults()["policy"]["learn"]["learning_rate"]
    assert cfg.policy.other.eps.end == 0.05
    assert cfg.env.env_id == "CartPole-v1"
    assert cfg.exp_name == "x"
    assert isinstance(cfg, EasyDict) and isinstance(cfg.policy.learn, EasyDict)


def test_inputs_are_not_mutated():
    defaults, main, create = (
        _defaults(),
        {"policy": {"learn": {"batch_size": 7}}},
        {"policy": {"type": "dqn"}},
    )
    d0, m0, c0 = copy.deepcopy(defaults), copy.deepcopy(main), copy.deepcopy(create)
    cfg = compile_config(main, create, defaults=defaults, overrides=["policy.cuda=True", "create_config.env.type=x"])
    cfg.policy.model.hidden_sizes.append(1)
    cfg.create_config.policy.type = "ppo"
    assert (defaults, main, create) == (d0, m0, c0)


def test_seed_precedence_and_exp_name_default():
    assert _compile({}).seed == 0
    assert _compile({"seed": 5}).seed == 5
    assert _compile({"seed": 5}, seed=9).seed == 9
    assert _compile({}, overrides=["seed=4"]).seed == 4
    assert _compile({}).exp_name == "default_experiment"
    with pytest.raises(ConfigError, match="seed must be an int"):
        _compile({}, seed=True)


def test_create_config_is_a_copy_with_overrides():
    create = {"env": {"type": "gym"}, "env_manager": {"type": "base"}, "policy": {"type": "dqn"}}
    cfg = compile_config({}, create, defaults=_defaults(), overrides=["create_config.env_manager.type=subprocess"])
    assert cfg.create_config.env_manager.type == "subprocess"
    assert cfg.create_config.policy.type == "dqn"
    assert create["env_manager"]["type"] == "base"


def test_compiled_config_compiles_again_to_itself():
    cfg = _compile({"exp_name": "a", "policy": {"learn": {"batch_size": 3}}}, seed=2)
    again = compile_config(cfg, None, defaults=_defaults())
    assert again == cfg


# ------------------------------------------------------------------------------------- validation
def test_unknown_key_names_path_and_closest():
    with pytest.raises(ConfigError) as e:
        _compile({"policy": {"learn": {"batch_sise": 64}}})
    msg = str(e.value)
    assert "'policy.learn.batch_sise'" in msg and "did you mean 'policy.learn.batch_size'" in msg


def test_misplaced_key_suggests_its_real_place():
    with pytest.raises(ConfigError, match=r"'policy\.batch_size'.*'policy\.learn\.batch_size'"):
        _compile({"policy": {"batch_size": 64}})


def test_unknown_top_level_section_suggests():
    with pytest.raises(ConfigError, match=r"unknown config key 'evn' \(did you mean 'env'\?\)"):
        _compile({"evn": {}})


def test_unknown_key_without_close_match_lists_valid_keys():
    with pytest.raises(ConfigError) as e:
        _compile({"policy": {"model": {"zzzzqqq": 1}}})
    assert "'policy.model.zzzzqqq'" in str(e.value) and "hidden_sizes, obs_shape" in str(e.value)


@pytest.mark.parametrize(
    ("key_path", "value", "expected"),
    [
        (("policy", "learn", "batch_size"), "64", "int"),
        (("policy", "learn", "batch_size"), True, "int"),  # bool is not an int here
        (("policy", "learn", "batch_size"), 64.0, "int"),
        (("policy", "learn", "learning_rate"), False, "float"),
        (("policy", "learn", "learning_rate"), "1e-3", "float"),
        (("policy", "cuda"), 1, "bool"),
        (("env", "env_id"), 3, "str"),
        (("policy", "model", "hidden_sizes"), 64, "list or tuple"),
        (("policy", "learn"), 5, "dict"),
        (("policy", "model", "obs_shape"), None, "int"),
        (("exp_name",), 1, "str"),
        (("seed",), 1.5, "int"),
    ],
)
def test_wrong_type_names_key_value_and_expected(key_path, value, expected):
    main: dict = {}
    node = main
    for part in key_path[:-1]:
        node = node.setdefault(part, {})
    node[key_path[-1]] = value
    with pytest.raises(ConfigError) as e:
        _compile(main)
    msg = str(e.value)
    assert f"'{'.'.join(key_path)}'" in msg
    assert repr(value) in msg
    assert f"expected {expected}" in msg


def test_accepted_type_relaxations():
    cfg = _compile(
        {
            "env": {"max_episode_steps": 200, "env_kwargs": {"anything": {"deep": [1, 2]}, "x": None}},
            "policy": {"learn": {"learning_rate": 1}, "model": {"hidden_sizes": (32,)}},
        }
    )
    assert cfg.policy.learn.learning_rate == 1  # int accepted where float expected
    assert tuple(cfg.policy.model.hidden_sizes) == (32,)
    assert cfg.env.env_kwargs.anything.deep == [1, 2]
    assert cfg.env.max_episode_steps == 200
    assert _compile({"env": {"max_episode_steps": "any"}}).env.max_episode_steps == "any"  # default None


def test_defaults_must_be_dicts():
    with pytest.raises(ConfigError, match=r"defaults\['policy'\] must be a dict"):
        compile_config({}, {}, defaults={"policy": 3})
    with pytest.raises(ConfigError, match="main_config must be a dict"):
        compile_config([1], {}, defaults={})


def test_validate_config_directly():
    validate_config({"a": {"b": 1}}, {"a": {"b": 2, "c": 3}})
    with pytest.raises(ConfigError, match="did you mean 'a.c'"):
        validate_config({"a": {"cc": 1}}, {"a": {"b": 2, "c": 3}})


# -------------------------------------------------------------------------------------- overrides
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("policy.learn.batch_size=64", (("policy", "learn", "batch_size"), 64)),
        ("policy.learn.learning_rate=1e-4", (("policy", "learn", "learning_rate"), 1e-4)),
        ("policy.cuda=True", (("policy", "cuda"), True)),
        ("policy.cuda=false", (("policy", "cuda"), False)),
        ("env.max_episode_steps=None", (("env", "max_episode_steps"), None)),
        ("env.max_episode_steps=null", (("env", "max_episode_steps"), None)),
        ("policy.model.hidden_sizes=[128, 128]", (("policy", "model", "hidden_sizes"), [128, 128])),
        ("env.env_id=CartPole-v1", (("env", "env_id"), "CartPole-v1")),
        ("exp_name='42'", (("exp_name",), "42")),
        (" seed = 3 ", (("seed",), 3)),
        ("env.env_kwargs.note=a=b", (("env", "env_kwargs", "note"), "a=b")),
    ],
)
def test_parse_override(text, expected):
    assert parse_override(text) == expected


@pytest.mark.parametrize("text", ["policy.learn.batch_size", "=3", "policy..lr=1", "a b=1", "a.1x=2", ""])
def test_bad_override_syntax(text):
    with pytest.raises(ConfigError, match="bad override"):
        parse_override(text)


def test_override_applies_and_validates():
    cfg = _compile({"policy": {"learn": {"batch_size": 16}}}, overrides=["policy.learn.batch_size=64"])
    assert cfg.policy.learn.batch_size == 64
    with pytest.raises(ConfigError, match="did you mean 'policy.learn.batch_size'"):
        _compile({}, overrides=["policy.learn.batchsize=64"])
    with pytest.raises(ConfigError, match="expected int"):
        _compile({}, overrides=["policy.learn.batch_size=big"])
    with pytest.raises(ConfigError, match="not a dict"):
        _compile({}, overrides=["policy.learn.batch_size.x=1"])
    with pytest.raises(ConfigError, match="sequence of 'key=value'"):
        _compile({}, overrides="policy.cuda=True")


def test_override_keeps_raw_text_for_string_defaults():
    cfg = _compile({}, overrides=["exp_name=2024", "env.env_id=1.5"])
    assert cfg.exp_name == "2024" and cfg.env.env_id == "1.5"


def test_apply_overrides_creates_missing_levels():
    assert apply_overrides({}, ["a.b.c=1"]) == {"a": {"b": {"c": 1}}}


# --------------------------------------------------------------------------------------- property
_leaf = st.one_of(st.integers(-5, 5), st.floats(-1, 1), st.text(max_size=3), st.booleans())
_tree = st.recursive(_leaf, lambda kids: st.dictionaries(st.sampled_from("abcd"), kids, min_size=1), max_leaves=8)


def _same_type_variant(default, data):
    """A user value of the default's type, drawn from a random subset of the default's keys."""
    if isinstance(default, dict):
        keys = data.draw(st.lists(st.sampled_from(sorted(default)), unique=True))
        return {k: _same_type_variant(default[k], data) for k in keys}
    strategy = {bool: st.booleans(), int: st.integers(), float: st.floats(allow_nan=False), str: st.text()}
    return data.draw(strategy[type(default)])


def _expected(default, user):
    if isinstance(default, dict):
        return {k: _expected(v, user[k]) if k in user else v for k, v in default.items()}
    return user


@settings(max_examples=60, deadline=None)
@given(section=st.dictionaries(st.sampled_from("wxyz"), _tree, min_size=1), data=st.data())
def test_merge_property(section, data):
    user = _same_type_variant(section, data)
    cfg = compile_config({"s": user}, {}, defaults={"s": section})
    assert cfg.s == _expected(section, user)
