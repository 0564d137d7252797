"""DI-engine's Atari, MuJoCo and Box2D files, unchanged: their env semantics, the keys DI-engine reads little, and a
short training run of a sample.

The files in ``tests/config/ding_files/`` named in their docstring hold the keys and values of DI-engine 0.5.3's
own files (``dizoo/atari``, ``dizoo/mujoco``, ``dizoo/box2d``), written out in this project's layout.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from ding_dist.config import ConfigError, read_config
from ding_dist.config.ding import report as ding_report
from ding_dist.config.ding import translate_ding_config
from ding_dist.entry import pipeline
from ding_dist.entry.pipeline import load_config

FILES = Path(__file__).resolve().parent / "ding_files"
needs_box2d = pytest.mark.skipif(importlib.util.find_spec("Box2D") is None, reason="needs Box2D (.[box2d])")
needs_ale = pytest.mark.skipif(importlib.util.find_spec("ale_py") is None, reason="needs ale-py (.[atari])")
needs_mujoco = pytest.mark.skipif(importlib.util.find_spec("mujoco") is None, reason="needs mujoco (.[mujoco])")


@pytest.fixture(autouse=True)
def _fresh_report_state(monkeypatch):
    monkeypatch.setattr(ding_report, "reported", set())
    monkeypatch.delenv(ding_report.REPORTED_ENV, raising=False)


def _translate(name: str, edit=None):
    main, create = read_config(FILES / name)
    if edit is not None:
        edit(main, create)
    return translate_ding_config(main, create, (), name)


# ------------------------------------------------------------------------------------------------ Atari
@needs_ale
def test_pong_dqn_gets_deepminds_preprocessing_and_di_engines_conv_encoder():
    cfg = load_config(FILES / "pong_dqn_config.py")
    assert cfg.env.id == "PongNoFrameskip-v4"  # ale-py registers DI-engine's (old gym's) id itself
    assert dict(cfg.env.atari) == {
        "noop_max": 30,
        "frame_skip": 4,
        "screen_size": 84,
        "frame_stack": 4,
        "terminal_on_life_loss": True,
        "clip_reward": True,
        "fire_reset": True,
    }
    assert (cfg.env.collector_env_num, cfg.env.evaluator_env_num, cfg.env.n_evaluator_episode) == (8, 8, 8)
    assert cfg.env.stop_value == 20
    m = cfg.policy.model
    assert (m.conv_channels, m.hidden_sizes, m.dueling) == ([128, 128, 512], [512], True)
    assert cfg.create_config.env_manager.type == "async"  # DI-engine's subprocess manager


@needs_ale
def test_atari_report_says_what_each_env_key_became():
    _, _, _, report = _translate("pong_dqn_config.py")
    mapped = "\n".join(report.of("mapped"))
    assert "env.env_id='PongNoFrameskip-v4' -> env.id='PongNoFrameskip-v4' (ale-py's registration: no sticky" in mapped
    assert "env.frame_stack=4 -> env.atari.frame_stack=4" in mapped
    assert "policy.model.conv_channels=[128, 128, 512]" in mapped
    default = "\n".join(report.of("default"))
    assert "terminal_on_life_loss=True (episode-life)" in default and "fire_reset=True" in default


@needs_ale
def test_atari_ids_di_engine_cannot_skip_frames_of_are_refused():
    def edit(main, create):
        main["env"]["env_id"] = "Pong-v4"  # ale-py's own frame skip (2-4 frames) under DI-engine's 4

    with pytest.raises(ConfigError, match=r"'env.env_id' = 'Pong-v4' cannot be honoured: .* frame-skip-free ids"):
        _translate("pong_dqn_config.py", edit)


@needs_ale
def test_env_exp_name_is_accepted_as_di_engine_ignores_it():
    ours, _, _, report = _translate("pong_rainbow_config.py")
    assert "env.exp_name: DI-engine's env classes do not read it" in "\n".join(report.of("ignored"))
    assert "exp_name" not in ours.env


@needs_ale
def test_envpool_manager_runs_on_envpool_or_names_the_extra(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "envpool" else real(name, *a))
    with pytest.raises(ConfigError, match=r"env_pool manager .* needs envpool, .*pip install -e '\.\[envpool\]'"):
        _translate("pong_dqn_envpool_config.py")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name == "envpool" else real(name, *a))
    ours, create, _, report = _translate("pong_dqn_envpool_config.py")
    assert (create.env_manager.type, ours.env.atari.fire_reset) == ("envpool", True)
    assert "env.collector_batch_size=8: EnvPool's sync mode" in "\n".join(report.of("mapped"))

    def async_mode(main, create):
        main["env"]["collector_batch_size"] = 4

    with pytest.raises(ConfigError, match=r"'env.collector_batch_size' = 4 cannot be honoured: EnvPool steps all"):
        _translate("pong_dqn_envpool_config.py", async_mode)


@needs_ale
def test_on_policy_ppo_update_per_collect_is_accepted_as_di_engine_does_not_read_it():
    cfg = load_config(FILES / "pong_ppo_config.py")
    assert (cfg.policy.learn.epoch_per_collect, cfg.policy.model.conv_channels) == (10, [64, 64, 128])
    _, _, _, report = _translate("pong_ppo_config.py")
    assert "policy.learn.update_per_collect: DI-engine's on-policy pipeline" in "\n".join(report.of("ignored"))


@needs_ale
def test_a2c_adam_betas_and_eps_reach_the_optimizer():
    from ding_dist.policy import get_policy_cls

    cfg = load_config(FILES / "pong_a2c_config.py")
    assert (cfg.policy.learn.betas, cfg.policy.learn.eps) == ([0.0, 0.99], 1e-8)
    policy = get_policy_cls("a2c")(cfg.policy, gym.spaces.Box(-1.0, 1.0, (3,)), gym.spaces.Discrete(3))
    group = policy.optimizer.param_groups[0]
    assert (group["betas"], group["eps"]) == ((0.0, 0.99), 1e-8)


@needs_ale
def test_r2d2_float_counts_become_ints():
    cfg = load_config(FILES / "pong_r2d2_config.py")
    assert cfg.policy.other.eps.decay == 100000 and isinstance(cfg.policy.other.eps.decay, int)


# ------------------------------------------------------------------------------------------------ MuJoCo
@needs_mujoco
def test_mujoco_v3_ids_become_gymnasiums_current_version_named_in_the_report():
    cfg = load_config(FILES / "hopper_sac_config.py")
    assert cfg.env.id == "Hopper-v5"
    _, _, _, report = _translate("hopper_sac_config.py")
    line = next(t for t in report.of("mapped") if t.startswith("env.env_id"))
    assert line == (
        "env.env_id='Hopper-v3' -> env.id='Hopper-v5' (gymnasium's current version; v3 needs mujoco-py; v5: the "
        "healthy reward only while healthy)"
    )
    assert "env.norm_obs.use_norm=False (no observation normalization)" in report.of("same")


@needs_mujoco
def test_mujoco_env_wrapper_is_what_mujoco_env_does_not_read():
    _, _, _, report = _translate("ant_ddpg_config.py")
    assert any(t.startswith("env.env_wrapper='mujoco_default': read by DI-engine's DingEnvWrapper only")
               for t in report.of("ignored"))  # fmt: skip


@needs_mujoco
def test_norm_obs_maps_onto_the_policys_running_statistics_or_is_refused():
    def norm(main, create):
        main["env"]["norm_obs"] = {"use_norm": True}

    ours, _, _, report = _translate("hopper_onppo_config.py", norm)
    assert ours.policy.model.obs_norm is True
    assert any("ObsNormWrapper keeps statistics per env" in t for t in report.of("differs"))
    with pytest.raises(ConfigError, match=r"'env.norm_obs.use_norm' = True cannot be honoured for sac"):
        _translate("hopper_sac_config.py", norm)

    def norm_reward(main, create):
        main["env"]["norm_reward"] = {"use_norm": True, "reward_discount": 0.99}

    with pytest.raises(ConfigError, match=r"'env.norm_reward.use_norm' = True cannot be honoured"):
        _translate("hopper_sac_config.py", norm_reward)


@needs_mujoco
def test_ppo_lr_scheduler_becomes_the_linear_decay_per_collect():
    cfg = load_config(FILES / "hopper_onppo_config.py")
    learn = cfg.policy.learn
    assert (learn.lr_decay_collects, learn.lr_decay_min_factor, learn.learning_rate) == (1500, 0.0, 3e-4)


@needs_mujoco
def test_bdq_env_bins_must_match_the_model_bins():
    cfg = load_config(FILES / "hopper_bdq_config.py")
    assert cfg.policy.model.action_bins_per_branch == 4

    def differ(main, create):
        main["env"]["action_bins_per_branch"] = 5

    with pytest.raises(ConfigError, match=r"'env.action_bins_per_branch' = 5 cannot be honoured with policy.model"):
        _translate("hopper_bdq_config.py", differ)


@needs_mujoco
def test_d4pg_categorical_critic_is_accepted():
    cfg = load_config(FILES / "halfcheetah_d4pg_config.py")
    assert (cfg.env.id, cfg.create_config.policy.type) == ("HalfCheetah-v5", "d4pg")


# ------------------------------------------------------------------------------------------------ Box2D
@needs_box2d
def test_bipedalwalker_rew_clip_floors_collector_rewards_at_minus_10():
    cfg = load_config(FILES / "bipedalwalker_td3_config.py")
    assert (cfg.env.id, cfg.env.reward_clip) == ("BipedalWalker-v3", [-10.0, None])


@needs_box2d
def test_carracing_images_are_channels_first_with_di_engines_conv_encoder():
    cfg = load_config(FILES / "carracing_dqn_config.py")
    assert (cfg.env.id, dict(cfg.env.env_kwargs), cfg.env.channels_first) == ("CarRacing-v3", {"continuous": False},
                                                                                True)  # fmt: skip
    assert (cfg.policy.model.conv_channels, cfg.policy.model.hidden_sizes) == ([64, 64, 128], [128])


def test_missing_box2d_names_the_extra(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "Box2D" else real(name, *a))
    with pytest.raises(ConfigError, match=r"LunarLander-v3, which needs Box2D .*: pip install 'ding_dist\[box2d\]'"):
        _translate("lunarlander_dqn_config.py")


# ------------------------------------------------------------------------------------------------ `ding` imports
def test_a_file_importing_only_ding_config_helpers_runs(tmp_path):
    path = tmp_path / "helpers_config.py"
    path.write_text(
        "from ding.utils import EasyDict, deep_merge_dicts\n"
        "base = dict(env=dict(env_id='LunarLander-v2', stop_value=200), policy=dict(cuda=False))\n"
        "main_config = EasyDict(deep_merge_dicts(base, dict(env=dict(collector_env_num=4))))\n"
        "create_config = dict(env=dict(type='lunarlander'), policy=dict(type='dqn'))\n"
    )
    main, create = read_config(path)
    assert main.env == {"env_id": "LunarLander-v2", "stop_value": 200, "collector_env_num": 4}
    assert "ding" not in __import__("sys").modules  # the helpers are gone again


def test_a_file_importing_ding_classes_gets_one_line(tmp_path):
    path = tmp_path / "model_config.py"
    path.write_text("from easydict import EasyDict\nfrom ding.model.common import FCEncoder, ReparameterizationHead\n"
                    "main_config = EasyDict(dict(policy=dict(cuda=False)))\n")  # fmt: skip
    with pytest.raises(ConfigError) as info:
        read_config(path)
    message = str(info.value)
    assert "\n" not in message
    assert (
        "imports DI-engine at its top (ding.model.common.FCEncoder, ding.model.common.ReparameterizationHead)"
        in message
    )


# ------------------------------------------------------------------------------------------------ the env side
class _FireGame(gym.Env):
    """A toy with ALE's action meanings: records the actions; reward -100 on action 2 ("a fall")."""

    observation_space = gym.spaces.Box(0, 255, (6, 5, 3), np.uint8)
    action_space = gym.spaces.Discrete(3)

    def __init__(self) -> None:
        self.actions: list[int] = []

    def get_action_meanings(self) -> list[str]:
        return ["NOOP", "FIRE", "RIGHT"]

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.arange(90, dtype=np.uint8).reshape(6, 5, 3), {}

    def step(self, action):
        self.actions.append(int(action))
        obs = np.full((6, 5, 3), len(self.actions), np.uint8)
        return obs, -100.0 if action == 2 else 1.0, len(self.actions) >= 4, False, {}


def test_fire_reset_fires_after_reset_in_games_with_fire():
    from ding_dist.envs.atari import FireReset

    game = _FireGame()
    env = FireReset(game)
    obs, _ = env.reset(seed=0)
    assert game.actions == [1] and obs[0, 0, 0] == 1  # the observation after FIRE


def test_channels_first_and_reward_clip_keep_the_true_return():
    from ding_dist.envs.env import make_env

    env = make_env(entry_point=_FireGame, channels_first=True, reward_clip=[-10.0, None], training=True)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (3, 6, 5) and obs[1, 0, 0] == np.arange(90).reshape(6, 5, 3)[0, 0, 1]
    rewards = [env.step(a)[1] for a in (2, 0, 2)]
    *_, info = env.step(0)
    assert rewards == [-10.0, 1.0, -10.0]
    assert info["episode"]["r"] == pytest.approx(-198.0)  # -100 + 1 - 100 + 1: the true return
    evaluation = make_env(entry_point=_FireGame, reward_clip=[-10.0, None], training=False)
    evaluation.reset(seed=0)
    assert evaluation.step(2)[1] == -100.0  # evaluation envs are not clipped


def test_conv_channels_build_di_engines_conv_sizes():
    from ding_dist.policy.encoders import NatureCNN

    cnn = NatureCNN((4, 84, 84), features=512, channels=(128, 128, 512))
    by_hand = (4 * 128 * 64 + 128) + (128 * 128 * 16 + 128) + (128 * 512 * 9 + 512) + (512 * 7 * 7 * 512 + 512)
    assert sum(p.numel() for p in cnn.parameters()) == by_hand
    assert cnn(torch.zeros(2, 4, 84, 84, dtype=torch.uint8)).shape == (2, 512)


# ------------------------------------------------------------------------------------------------ short runs
#: Short runs: one evaluation game on one env, envs in the test's process (DI-engine's files ask for 5-10 games).
SHORT = ["env.n_evaluator_episode=1", "env.evaluator_env_num=1", "create_config.env_manager.type=base"]


@needs_ale
@pytest.mark.quality  # its 13M-parameter CNN (conv 128/128/512): 25-120 s for this on 2 loaded CPU cores
def test_pong_dqn_file_trains(tmp_path):
    """DI-engine's pong_dqn for two collects, games cut at 100 steps."""
    sets = [*SHORT, "env.max_episode_steps=100"]
    result = pipeline.train(str(FILES / "pong_dqn_config.py"), overrides=sets, max_env_steps=192, exp_dir=tmp_path)
    assert (result["env_steps"], result["train_iters"]) == (192, 20)  # 2 collects of 96, 10 updates each


@needs_mujoco
def test_hopper_onppo_file_trains(tmp_path):
    result = pipeline.train(str(FILES / "hopper_onppo_config.py"), overrides=SHORT, max_env_steps=2048,
                            exp_dir=tmp_path)  # fmt: skip
    assert (result["env_steps"], result["train_iters"]) == (2048, 10 * 16)  # 10 epochs of 2048 / 128 minibatches


@needs_box2d
def test_lunarlander_dqn_file_trains(tmp_path):
    result = pipeline.train(str(FILES / "lunarlander_dqn_config.py"), overrides=SHORT, max_env_steps=128,
                            exp_dir=tmp_path)  # fmt: skip
    assert (result["env_steps"], result["train_iters"]) == (128, 20)  # 2 collects of 64, 10 updates each
