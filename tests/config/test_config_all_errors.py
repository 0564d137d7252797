"""Every mistake of a config is reported in one ConfigError; create_config keys and values are checked."""

from __future__ import annotations

import pytest

from ding_dist.config import ConfigError, create_config_errors
from ding_dist.config.compile import compile_config
from ding_dist.config.split import split_errors


def _defaults() -> dict:
    return {
        "env": {"id": "CartPole-v1", "collector_env_num": 8, "env_kwargs": {}},
        "policy": {"learn": {"batch_size": 32, "lr": 1e-3}, "collect": {"n_sample": 64}},
    }


_CREATE = {"env": {"type": "gymnasium"}, "env_manager": {"type": "sync"}, "policy": {"type": "dqn"}}


def test_all_mistakes_in_one_error():
    main = {"env": {"collector_env_num": 0}, "policy": {"learn": {"batch_sise": 64, "lr": "fast"}}}
    create = {**_CREATE, "env_manger": {"type": "sync"}}
    with pytest.raises(ConfigError) as exc:
        compile_config(main, create, defaults=_defaults(), overrides=["policy.collect.n_sample=-1"])
    errors = exc.value.errors
    assert len(errors) == 5
    message = str(exc.value)
    assert message.startswith("5 config errors: ")
    assert "\n" not in message
    for part in ("'policy.learn.batch_sise'", "'policy.learn.lr' = 'fast'", "'env.collector_env_num' must be >= 1",
                 "'policy.collect.n_sample' must be >= 1", "'create_config.env_manger'"):  # fmt: skip
        assert part in message


def test_single_error_keeps_its_own_line():
    with pytest.raises(ConfigError) as exc:
        compile_config({"policy": {"learn": {"batch_size": 0}}}, _CREATE, defaults=_defaults())
    assert str(exc.value) == "config key 'policy.learn.batch_size' must be >= 1, got 0"
    assert exc.value.errors == [str(exc.value)]


def test_mistyped_key_is_not_also_range_checked():
    with pytest.raises(ConfigError) as exc:
        compile_config({"policy": {"learn": {"batch_size": "x"}}}, _CREATE, defaults=_defaults())
    assert exc.value.errors == ["config key 'policy.learn.batch_size' = 'x' has type str, expected int"]


def test_create_config_misspelled_section_and_key():
    create = {"env_manger": {"type": "sync"}, "policy": {"tpye": "dqn"}}
    assert create_config_errors(create) == [
        "unknown config key 'create_config.env_manger' (did you mean 'create_config.env_manager'?)",
        "unknown config key 'create_config.policy.tpye' (did you mean 'create_config.policy.type'?)",
    ]


def test_create_config_unknown_env_manager_type():
    (error,) = create_config_errors({"env_manager": {"type": "asnyc"}})
    assert "'create_config.env_manager.type'" in error
    assert "(did you mean 'async'?)" in error


def test_create_config_override_is_checked():
    with pytest.raises(ConfigError, match="did you mean 'async'"):
        compile_config({}, _CREATE, defaults=_defaults(), overrides=["create_config.env_manager.type=asnyc"])


def test_split_errors_name_divisible_sizes():
    cfg = {"policy": {"learn": {"batch_size": 256}, "collect": {"n_sample": 256}}}
    assert split_errors(cfg, 4) == []
    errors = split_errors(cfg, 3)
    assert errors == [
        "policy.learn.batch_size=256 cannot be split over 3 processes: --set policy.learn.batch_size=255 or 258",
        "policy.collect.n_sample=256 cannot be split over 3 processes: --set policy.collect.n_sample=255 or 258; "
        "or --nproc 1, 2, 4, 8, 16, 32, 64, 128 or 256, which split every size",
    ]
    assert split_errors({"policy": {"learn": {"batch_size": 2}}}, 3) == [
        "policy.learn.batch_size=2 cannot be split over 3 processes: --set policy.learn.batch_size=3; or --nproc 1 "
        "or 2, which split every size"
    ]
    # a count of envs that the processes cannot share: what to set, and the process counts that work
    assert split_errors({"policy": {"learn": {"batch_size": 256}}, "env": {"collector_env_num": 8}}, 64) == [
        "env.collector_env_num=8 cannot be split over 64 processes: --set env.collector_env_num=64; or --nproc 1, 2, "
        "4 or 8, which split every size"
    ]
    assert split_errors({"policy": {"learn": {"batch_size": 6}}}, 4, "--learners")[0].endswith(
        "; or --learners 1, 2, 3 or 6, which split every size"
    )
