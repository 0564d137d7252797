"""read_config / save_config: loading DI-engine style files and writing resolved configs back."""

from __future__ import annotations

import math
import textwrap

import pytest
from easydict import EasyDict

from ding_dist.config import ConfigError, read_config, save_config
from ding_dist.config.compile import compile_config

DI_ENGINE_STYLE = """
from easydict import EasyDict

cartpole_dqn_config = dict(
    exp_name='cartpole_dqn_seed0',
    env=dict(collector_env_num=8, evaluator_env_num=5, n_evaluator_episode=5, stop_value=195),
    policy=dict(cuda=False, model=dict(obs_shape=4, action_shape=2, encoder_hidden_size_list=[128, 128, 64])),
)
cartpole_dqn_config = EasyDict(cartpole_dqn_config)
main_config = cartpole_dqn_config
cartpole_dqn_create_config = dict(
    env=dict(type='cartpole', import_names=['dizoo.classic_control.cartpole.envs.cartpole_env']),
    env_manager=dict(type='base'),
    policy=dict(type='dqn'),
)
create_config = EasyDict(cartpole_dqn_create_config)

if __name__ == "__main__":
    raise SystemExit("the __main__ block must not run when the config is read")
"""


def test_read_di_engine_style_file(tmp_path):
    p = tmp_path / "cartpole_dqn_config.py"
    p.write_text(DI_ENGINE_STYLE)
    main, create = read_config(p)
    assert main.exp_name == "cartpole_dqn_seed0"
    assert main.policy.model.encoder_hidden_size_list == [128, 128, 64]
    assert create.env_manager.type == "base" and create.policy.type == "dqn"
    assert isinstance(main, EasyDict) and isinstance(create, EasyDict)


def test_read_config_errors_name_the_path(tmp_path):
    missing = tmp_path / "nope_config.py"
    with pytest.raises(ConfigError, match=r"nope_config\.py.*does not exist"):
        read_config(missing)
    with pytest.raises(ConfigError, match="is a directory"):
        read_config(tmp_path)
    no_main = tmp_path / "no_main.py"
    no_main.write_text("create_config = {}\n")
    with pytest.raises(ConfigError, match=r"no_main\.py.*does not define 'main_config'"):
        read_config(no_main)
    broken = tmp_path / "broken.py"
    broken.write_text("main_config = dict(a=\n")
    with pytest.raises(ConfigError, match=r"broken\.py.*SyntaxError"):
        read_config(broken)
    raising = tmp_path / "raising.py"
    raising.write_text("main_config = {}\nraise RuntimeError('boom')\n")
    with pytest.raises(ConfigError, match=r"raising\.py.*RuntimeError: boom"):
        read_config(raising)
    not_py = tmp_path / "c.yaml"
    not_py.write_text("a: 1\n")
    with pytest.raises(ConfigError, match=r"c\.yaml.*must be a Python file"):
        read_config(not_py)
    wrong = tmp_path / "wrong.py"
    wrong.write_text("main_config = [1]\n")
    with pytest.raises(ConfigError, match="main_config must be a dict"):
        read_config(wrong)


def test_create_config_is_optional(tmp_path):
    p = tmp_path / "only_main.py"
    p.write_text("main_config = {'seed': 1}\n")
    main, create = read_config(p)
    assert main == {"seed": 1} and create == {}


def _tricky_config() -> EasyDict:
    return EasyDict(
        {
            "exp_name": 'quote\'s "and" newline\n unicode é',
            "seed": -3,
            "env": {"ids": ("a", "b"), "empty": {}, "empty_list": [], "single": (1,), "none": None},
            "policy": {"lr": 1e-4, "big": 10**20, "ok": True, "inf": math.inf, "ninf": -math.inf},
            "nested": [{"a": 1}, [2, 3.5]],
            "create_config": {"env": {"type": "gym"}, "policy": {"type": "dqn"}},
        }
    )


def test_save_read_round_trip(tmp_path):
    cfg = _tricky_config()
    path = save_config(cfg, tmp_path / "sub" / "config.py")
    main, create = read_config(path)
    assert main == cfg
    assert create == cfg.create_config
    assert isinstance(main.env.ids, tuple) and isinstance(main.nested[0], EasyDict)
    assert [p.name for p in (tmp_path / "sub").iterdir()] == ["config.py"]  # no temp file left


def test_nan_round_trips(tmp_path):
    main, _ = read_config(save_config({"x": math.nan}, tmp_path / "n.py"))
    assert math.isnan(main.x)


def test_save_without_create_config(tmp_path):
    main, create = read_config(save_config({"a": 1}, tmp_path / "c.py"))
    assert main == {"a": 1} and create == {}


def test_unsavable_value_is_named_and_old_file_survives(tmp_path):
    path = save_config({"a": 1}, tmp_path / "config.py")
    before = path.read_text()
    with pytest.raises(ConfigError, match=r"'policy\.fn'.*not a plain literal"):
        save_config({"policy": {"fn": print}}, path)
    assert path.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.py"]


def test_compiled_config_survives_save_read_compile(tmp_path):
    defaults = {"env": {"env_id": "CartPole-v1", "env_kwargs": {}}, "policy": {"learn": {"lr": 0.001}}}
    src = tmp_path / "user_config.py"
    src.write_text(
        textwrap.dedent(
            """
            main_config = dict(exp_name='rt', env=dict(env_kwargs=dict(render_mode=None)))
            create_config = dict(env=dict(type='gym'), policy=dict(type='dqn'))
            """
        )
    )
    cfg = compile_config(*read_config(src), defaults=defaults, seed=7, overrides=["policy.learn.lr=0.5"])
    saved = save_config(cfg, tmp_path / "exp" / "config.py")
    again = compile_config(*read_config(saved), defaults=defaults)
    assert again == cfg and again.seed == 7 and again.policy.learn.lr == 0.5
