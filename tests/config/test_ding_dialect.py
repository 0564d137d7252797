"""DI-engine config files run unchanged: detection, translation with DI-engine's meaning, report, refusals.

The files in ``tests/config/ding_files/`` are in DI-engine's dialect (its keys and layout, ``main_config`` +
``create_config``): some written for these tests, the others hold the keys and values of one of DI-engine's own
classic-control files (named in the file's docstring), written out in this project's layout, without its text.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from easydict import EasyDict

from ding_dist.comm import resolve_device
from ding_dist.config import ConfigError, load_config, read_config, save_config
from ding_dist.config.ding import NO_CLIP, looks_like_ding, translate_ding_config
from ding_dist.config.ding import report as ding_report
from ding_dist.entry import pipeline

REPO = Path(__file__).resolve().parents[2]
FILES = Path(__file__).resolve().parent / "ding_files"
DQN = FILES / "cartpole_dqn_ding_config.py"
PPO = FILES / "cartpole_ppo_ding_config.py"
SAC = FILES / "pendulum_sac_ding_config.py"
DDP = FILES / "cartpole_dqn_ddp_ding_config.py"
CREATE_DQN = {
    "env": {"type": "cartpole", "import_names": ["dizoo.classic_control.cartpole.envs.cartpole_env"]},
    "env_manager": {"type": "base"},
    "policy": {"type": "dqn"},
}


@pytest.fixture(autouse=True)
def _fresh_report_state(monkeypatch):
    """Each test sees the translation report as a new job would."""
    monkeypatch.setattr(ding_report, "reported", set())
    monkeypatch.delenv(ding_report.REPORTED_ENV, raising=False)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _dqn_main(**policy) -> dict:
    return {"env": {"stop_value": 195}, "policy": {"cuda": False, **policy}}


# ------------------------------------------------------------------------------------------- detection
def test_detects_di_engine_files_and_leaves_ours_alone(tmp_path):
    for path in (DQN, PPO, SAC, DDP):
        assert looks_like_ding(*read_config(path)), path.name
    for path in sorted((REPO / "configs").glob("*_config.py")):
        assert not looks_like_ding(*read_config(path)), path.name
    saved = save_config(load_config(DQN), tmp_path / "config.py")  # the run's resolved config is ours
    assert not looks_like_ding(*read_config(saved))
    assert load_config(saved) == load_config(DQN)


@pytest.mark.parametrize(
    ("main", "create"),
    [
        ({}, {"env": {"type": "cartpole"}}),
        ({}, {"policy": {"type": "dqn", "import_names": ["my_pkg.policy"]}}),
        ({"policy": {"cuda": False}}, {}),
        ({"policy": {"multi_gpu": True}}, {}),
        ({"policy": {"model": {"obs_shape": 4}}}, {}),
        ({"policy": {"model": {"encoder_hidden_size_list": [64]}}}, {}),
        ({"policy": {"eval": {"evaluator": {"eval_freq": 100}}}}, {}),
    ],
)
def test_each_di_engine_mark_is_enough(main, create):
    assert looks_like_ding(main, create)


# ------------------------------------------------------------------------------------------- translation
def test_dqn_file_gets_di_engine_meaning():
    cfg = load_config(DQN)
    p = cfg.policy
    assert cfg.exp_name == "ding_cartpole_dqn"
    assert dict(cfg.env) == {
        "id": "CartPole-v0",  # DI-engine's CartPole: gym v0, 200-step episodes
        "entry_point": None,
        "env_kwargs": {},
        "max_episode_steps": None,
        "collector_env_num": 4,
        "evaluator_env_num": 4,
        "n_evaluator_episode": 4,
        "stop_value": 195,
        "atari": None,  # not an Atari id: no Atari preprocessing
        "step_cost_ms": 0.0,
        "max_restarts": 5,  # crashed collector envs are recreated (ding_dist's own default)
        "restart_window_s": 300.0,
        "sample_groups": 1,  # one group of envs: no double-buffered sampling (ding_dist's own default)
        "channels_first": False,  # vector observations
        "reward_clip": None,  # DI-engine's CartPole does not clip rewards
    }
    ours = {"env": {"type": "gymnasium"}, "env_manager": {"type": "sync"}, "policy": {"type": "dqn"}}
    assert cfg.create_config == ours
    assert p.device == "cpu"
    assert dict(p.model) == {"hidden_sizes": [64, 64], "dueling": True, "activation": "relu", "conv_channels": None}
    assert (p.discount_factor, p.nstep) == (0.99, 3)
    assert (p.learn.update_per_collect, p.learn.batch_size, p.learn.learning_rate) == (8, 64, 0.002)
    assert (p.learn.target_update_freq, p.learn.target_theta) == (50, None)
    assert (p.learn.loss, p.learn.double, p.learn.grad_clip_norm) == ("mse", True, NO_CLIP)
    assert p.learn.learning_starts == 64  # DI-engine samples once the buffer holds a batch
    assert p.collect.n_sample == 16
    assert dict(p.other.eps) == {"type": "exp", "start": 0.95, "end": 0.05, "decay": 1500}
    assert p.other.replay_buffer.replay_buffer_size == 20000
    # eval_freq=60 train iterations at 8 per collect: every ceil(60 / 8) = 8 collects of 16 env steps
    assert p.eval.eval_freq == 128


def test_dqn_defaults_are_di_engines_where_ours_differ():
    cfg = load_config((_dqn_main(), CREATE_DQN))
    p = cfg.policy
    assert (p.discount_factor, p.learn.update_per_collect, p.learn.target_update_freq) == (0.97, 3, 100)
    assert dict(p.other.eps) == {"type": "exp", "start": 0.95, "end": 0.1, "decay": 10000}
    assert p.other.replay_buffer.replay_buffer_size == 10000
    assert dict(p.model) == {
        "hidden_sizes": [128, 128, 64],
        "dueling": True,
        "activation": "relu",
        "conv_channels": None,
    }
    assert p.collect.n_sample == 8
    assert p.eval.eval_freq == 2672  # DI-engine's evaluator default, 1000 iterations: ceil(1000 / 3) = 334 collects x 8
    assert p.other.checkpoint.freq == 26672  # DI-engine's learner default, 10000 iterations: 3334 collects x 8


def test_dqn_plain_head_adds_its_hidden_layer():
    model = dict(encoder_hidden_size_list=[32, 32], dueling=False)
    cfg = load_config((_dqn_main(model=model), CREATE_DQN))
    assert (cfg.policy.model.hidden_sizes, cfg.policy.model.dueling) == ([32, 32, 32], False)


def test_dqn_prioritized_replay_keys_keep_di_engines_meaning():
    rb = dict(replay_buffer_size=5000, alpha=0.7, beta=0.5, anneal_step=2000)
    cfg = load_config((_dqn_main(priority=True, priority_IS_weight=True, other=dict(replay_buffer=rb)), CREATE_DQN))
    p = cfg.policy
    assert (p.priority, p.priority_IS_weight) == (True, True)
    rb_out = p.other.replay_buffer
    assert (rb_out.alpha, rb_out.beta, rb_out.anneal_step, rb_out.replay_buffer_size) == (0.7, 0.5, 2000, 5000)
    plain = load_config((_dqn_main(), CREATE_DQN)).policy
    assert (plain.priority, plain.priority_IS_weight, plain.other.replay_buffer.anneal_step) == (False, False, 100_000)


def test_dqn_target_theta_is_ignored_as_di_engine_does():
    cfg = load_config((_dqn_main(learn=dict(target_theta=0.01)), CREATE_DQN))
    assert (cfg.policy.learn.target_theta, cfg.policy.learn.target_update_freq) == (None, 100)


def test_ppo_file_gets_di_engine_meaning():
    cfg = load_config(PPO)
    p = cfg.policy
    assert (cfg.env.id, cfg.env.collector_env_num, cfg.env.stop_value) == ("CartPole-v0", 8, 195)
    assert dict(p.model) == {
        "hidden_sizes": [64, 64, 64],
        "activation": "relu",
        "log_std_init": -0.5,
        "obs_norm": False,
        "conv_channels": None,
    }
    learn = {k: p.learn[k] for k in ("epoch_per_collect", "batch_size", "learning_rate", "value_weight")}
    assert learn == {"epoch_per_collect": 4, "batch_size": 128, "learning_rate": 0.002, "value_weight": 0.5}
    assert (p.learn.entropy_weight, p.learn.clip_ratio, p.learn.value_clip_ratio) == (0.005, 0.2, 0.2)
    assert (p.learn.grad_clip_norm, p.learn.adv_norm) == (0.5, True)
    assert (p.collect.n_sample, p.collect.discount_factor, p.collect.gae_lambda) == (512, 0.99, 0.95)
    assert p.eval.eval_freq == 4 * 512  # one DI-engine train iteration per collect
    assert p.other.checkpoint.freq == 20 * 512  # learner hook save_ckpt_after_iter=20


def test_report_says_the_rollout_horizon_is_kept_where_di_engines_ddp_would_shorten_it():
    main, create = read_config(PPO)
    *_, report = translate_ding_config(main, create, (), PPO.name)
    (line,) = [text for text in report.of("differs") if text.startswith("env.collector_env_num")]
    assert line.startswith("env.collector_env_num=8: DI-engine steps that many envs in every process")
    assert "each env's rollout keeps n_sample / collector_env_num steps on any number of processes" in line


def test_sac_file_gets_di_engine_meaning():
    cfg = load_config(SAC)
    p = cfg.policy
    assert (cfg.seed, cfg.env.id, cfg.env.stop_value) == (5, "Pendulum-v1", -200)
    assert (p.model.actor_hidden_sizes, p.model.critic_hidden_sizes) == ([96, 96], [96, 96])
    rates = (p.learn.learning_rate_q, p.learn.learning_rate_policy, p.learn.learning_rate_alpha)
    assert rates == (0.002, 0.001, 0.0005)
    assert (p.learn.target_theta, p.discount_factor, p.learn.alpha, p.learn.auto_alpha) == (0.01, 0.98, 0.2, True)
    assert (p.learn.update_per_collect, p.collect.n_sample, p.learn.batch_size) == (4, 8, 96)
    assert p.learn.learning_starts == 800  # random_collect_size: random actions first
    assert p.other.replay_buffer.replay_buffer_size == 50000
    assert p.eval.eval_freq == 504  # ceil(250 / 4) = 63 collects x 8 env steps


def test_r2d2_file_gets_di_engine_meaning():
    cfg = load_config(FILES / "cartpole_r2d2_ding_config.py")
    p = cfg.policy
    assert (cfg.env.id, cfg.create_config.policy.type, p.device) == ("CartPole-v0", "r2d2", "cpu")
    assert dict(p.sequence) == {"seq_len": 42, "burnin": 2, "overlap": 0}  # burnin_step + learn_unroll_len
    assert dict(p.model) == {
        "hidden_sizes": [128, 128, 64],
        "lstm_size": 64,
        "dueling": True,
        "activation": "relu",
        "conv_channels": None,
    }
    assert (p.discount_factor, p.nstep, p.value_rescale_eps, p.priority, p.priority_IS_weight) == (
        0.995, 5, 0.01, False, False)  # fmt: skip
    assert (p.learn.learning_rate, p.learn.update_per_collect, p.learn.batch_size) == (0.0005, 5, 64)
    assert (p.learn.target_theta, p.learn.loss, p.learn.double) == (0.001, "mse", True)
    # 32 sequences of 42 steps per collect; a replay of 100000 sequences; training once it holds a batch of them
    assert (p.collect.n_sample, p.other.replay_buffer.replay_buffer_size) == (32 * 42, 100000 * 42)
    assert (p.learn.learning_starts, p.other.replay_buffer.type) == (64 * 42, "sequence")
    assert p.eval.eval_freq == 6 * 1344  # eval_freq=30 train iterations at 5 per collect
    assert dict(p.other.eps) == {"type": "exp", "start": 0.95, "end": 0.05, "decay": 10000}
    from ding_dist.entry.factories import build_policy
    from ding_dist.envs import make_env
    from ding_dist.policy.r2d2 import R2D2Policy

    env = make_env(cfg.env.id)  # the policy builds on the env's spaces
    assert isinstance(build_policy(cfg, env.observation_space, env.action_space, device="cpu"), R2D2Policy)


def test_ddp_file_runs_where_there_is_no_gpu():
    cfg = load_config(DDP)
    assert (cfg.policy.device, cfg.create_config.env_manager.type) == ("auto", "async")
    assert str(resolve_device(cfg.policy.device)) == ("cuda:0" if torch.cuda.is_available() else "cpu")


# ------------------------------------------------------------------------------------------- --set
def test_set_takes_di_engine_keys_before_and_our_keys_after_the_translation():
    sets = [
        "policy.eval.evaluator.eval_freq=30",  # DI-engine's key and meaning: 30 train iterations
        "policy.learn.update_per_collect=4",
        "policy.learn.loss=huber",  # ours: wins over the translation's 'mse'
        "env.id=CartPole-v1",
        "create_config.env_manager.type=subprocess",
    ]
    cfg = load_config(DQN, overrides=sets)
    assert cfg.policy.eval.eval_freq == 128  # ceil(30 / 4) = 8 collects x 16 env steps
    assert (cfg.policy.learn.update_per_collect, cfg.policy.learn.loss) == (4, "huber")
    assert (cfg.env.id, cfg.create_config.env_manager.type) == ("CartPole-v1", "async")


# ------------------------------------------------------------------------------------------- report
def test_report_printed_once_per_job(capsys):
    load_config(DQN)
    load_config(DQN)
    err = capsys.readouterr().err
    assert err.count("is a DI-engine config") == 1
    assert err.startswith("ding-dist: cartpole_dqn_ding_config.py is a DI-engine config (policy dqn, env CartPole-v0)")
    assert (
        "converted  policy.eval.evaluator.eval_freq=60 train iters -> policy.eval.eval_freq=128 env steps "
        "(8 train iters and 16 env steps per collect)"
    ) in err
    assert "ignored    env.replay_path: ding_dist records no videos of evaluation episodes" in err
    assert "ignored    policy.load_path: used by DI-engine's eval entry" in err
    assert "ignored    create_config.env.import_names" in err
    assert os.environ[ding_report.REPORTED_ENV]  # the ranks a launcher starts inherit it and stay quiet


def test_report_only_on_rank_zero(capsys, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    load_config(DQN)
    assert capsys.readouterr().err == ""


# ------------------------------------------------------------------------------------------- refusals
@pytest.mark.parametrize(
    ("main", "create", "message"),
    [
        (
            _dqn_main(learn=dict(batch_sise=64)),
            CREATE_DQN,
            "DI-engine config key 'policy.learn.batch_sise' = 64 cannot be honoured by ding_dist "
            "(closest key it knows: 'policy.learn.batch_size')",
        ),
        (
            {"policy": {"priority": True, "collect": {"n_sample": 64}}},
            {"env": {"type": "cartpole"}, "policy": {"type": "ppo"}},
            "DI-engine config key 'policy.priority' = True cannot be honoured: prioritized replay is implemented for "
            "['",
        ),
        (
            _dqn_main(collect=dict(n_episode=8)),
            CREATE_DQN,
            "'policy.collect.n_episode' cannot be honoured: ding_dist collects a fixed number of env steps per "
            "iteration (did you mean 'policy.collect.n_sample'?)",
        ),
        (
            _dqn_main(),
            {**CREATE_DQN, "policy": {"type": "dt"}},  # DI-engine's decision transformer: offline, not here
            "'create_config.policy.type' = 'dt' cannot be honoured: 'dt' is DI-engine's offline or imitation "
            "learning (from a dataset or demonstrations), which ding_dist does not have; ding_dist has the policies ['",
        ),
        (
            _dqn_main(),
            {**CREATE_DQN, "policy": {"type": "dqnn"}},  # a typo: the policy it is close to
            "'create_config.policy.type' = 'dqnn' cannot be honoured: ding_dist has the policies ['a2c', ",
        ),
        (
            {**_dqn_main(), "reward_model": {"intrinsic_reward_type": "add", "batch_size": 32}},
            {**CREATE_DQN, "reward_model": {"type": "rnd"}},  # DI-engine's RND/ICM files
            "DI-engine config key 'create_config.reward_model' cannot be honoured: ding_dist has no reward models "
            "(DI-engine's RND, ICM, TREX, GAIL, ...), so its reward model 'rnd' would be left out; remove reward_model "
            "from the file (and from create_config) to train the plain 'dqn' policy on the env's reward",
        ),
        (
            {**_dqn_main(), "reward_model": {"type": "trex", "checkpoint_max": 500}},  # TREX: main_config only
            CREATE_DQN,
            "DI-engine config key 'reward_model' cannot be honoured: ding_dist has no reward models",
        ),
        (
            _dqn_main(),
            {**CREATE_DQN, "env": {"type": "cartpol"}},
            "'create_config.env.type' = 'cartpol' cannot be honoured: known DI-engine envs are",
        ),
        (
            _dqn_main(learn=dict(learner=dict(hook=dict(load_ckpt_before_run="ckpt/iteration_100.pth.tar")))),
            CREATE_DQN,
            "'policy.learn.learner.hook.load_ckpt_before_run' = 'ckpt/iteration_100.pth.tar' cannot be honoured: "
            "continue a run with --resume EXP_DIR",
        ),
    ],
)
def test_refuses_what_it_cannot_honour(main, create, message):
    with pytest.raises(ConfigError) as info:
        load_config((main, create))
    assert message in str(info.value)
    if "dqnn" in message:  # a typo gets the name it is close to; a policy or section ding_dist lacks gets none
        assert str(info.value).endswith("(closest: 'dqn')")
    if "'dt'" in message or "reward model" in message:
        assert "closest" not in str(info.value) and "did you mean" not in str(info.value)


@pytest.mark.skipif(importlib.util.find_spec("Box2D") is not None, reason="Box2D is installed here")
def test_lunarlander_without_box2d_says_what_to_install():
    create = {"env": {"type": "lunarlander"}, "policy": {"type": "dqn"}}
    want = r"gymnasium's LunarLander-v3, which needs Box2D and it is not installed: pip install 'ding_dist\[box2d\]'"
    with pytest.raises(ConfigError, match=want):
        load_config((_dqn_main(), create))


# ------------------------------------------------------------------------------------------- training
@pytest.mark.parametrize(
    ("path", "max_env_steps", "train_iters"),
    [
        (DQN, 320, 17 * 8),  # 20 collects of 16; updates from env step 64 (the 4th collect on), 8 per collect
        (PPO, 1024, 2 * 4 * 4),  # 2 collects x 4 epochs x 512 / 128 minibatches
        (SAC, 880, 11 * 4),  # 110 collects of 8; updates from env step 800 (the 100th collect on), 4 per collect
    ],
)
def test_di_engine_files_train(tmp_path, path, max_env_steps, train_iters):
    result = pipeline.train(str(path), max_env_steps=max_env_steps, exp_dir=tmp_path / "run")
    assert (result["env_steps"], result["train_iters"], result["world_size"]) == (max_env_steps, train_iters, 1)


def _train_ddp_file(exp_dir: str) -> tuple:
    result = pipeline.train(str(DDP), max_env_steps=160, exp_dir=exp_dir)
    return result["env_steps"], result["train_iters"], result["world_size"]


@pytest.mark.quality  # the CLI form (test_cli_trains_di_engine_ddp_file_with_nproc_2_and_set) runs by default
def test_di_engine_ddp_file_trains_on_two_cpu_processes(run_ranks, tmp_path):
    # per rank: n_sample 8 over 4 envs (2 vector steps); 16 global env steps per collect, 10 collects;
    # updates from env step 64 (the 4th collect on), 8 per collect
    assert run_ranks(_train_ddp_file, 2, str(tmp_path / "run")) == [(160, 56, 2), (160, 56, 2)]


def test_cli_trains_di_engine_ddp_file_with_nproc_2_and_set(tmp_path):
    exp = tmp_path / "ddp"
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR")}
    env["OMP_NUM_THREADS"] = "1"
    env.pop(ding_report.REPORTED_ENV, None)
    cmd = [sys.executable, "-m", "ding_dist.entry.cli", "train", str(DDP), "--nproc", "2", "--max-env-steps", "160"]
    cmd += ["--exp-dir", str(exp), "--set", "policy.learn.batch_size=32", "policy.sync.algorithm=gradient_allreduce"]
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr.count("is a DI-engine config") == 1  # the parent's report; the two ranks stay quiet
    assert "set        policy.learn.batch_size=32 (DI-engine's meaning, before the translation)" in done.stderr
    # a successful run prints our lines only: no gymnasium DeprecationWarning for CartPole-v0, no colour codes
    assert "Warning" not in done.stderr and "\x1b[" not in done.stderr, done.stderr[-3000:]
    assert "env.id 'CartPole-v0': gymnasium has a newer version (v1) of this env" in done.stderr
    result = json.loads((exp / "result.json").read_text())
    assert (result["env_steps"], result["world_size"]) == (160, 2)
    saved, _ = read_config(exp / "config.py")
    assert (saved.policy.learn.batch_size, saved.env.id, saved.policy.device) == (32, "CartPole-v0", "auto")


# ------------------------------------------------------------------------------------------- slow: to stop_value
def _to_stop_value(path: str, exp_dir: str) -> tuple:
    result = pipeline.train(path, seed=0, exp_dir=exp_dir)
    return result["stopped_by"], result["best_eval_return"], result["world_size"]


@pytest.mark.slow
@pytest.mark.parametrize("path", [pytest.param(DQN, marks=pytest.mark.quality), PPO], ids=["dqn", "ppo"])
def test_di_engine_cartpole_files_reach_their_stop_value(tmp_path, run_ranks, path):
    stop = read_config(path)[0].env.stop_value
    single = _to_stop_value(str(path), str(tmp_path / "one"))
    assert single[0] == "stop_value" and single[1] >= stop and single[2] == 1
    for stopped_by, best, world in run_ranks(_to_stop_value, 2, str(path), str(tmp_path / "two")):
        assert (stopped_by, world) == ("stop_value", 2)
        assert best >= stop


def test_translated_config_is_an_easydict():
    main, create, overrides, report = translate_ding_config(*read_config(DQN))
    assert isinstance(main, EasyDict) and isinstance(create, EasyDict) and overrides == []
    assert report.policy == "dqn" and report.env_id == "CartPole-v0"


def test_benchmark_says_so_when_di_engine_is_missing(tmp_path):
    cmd = [sys.executable, str(REPO / "benchmarks" / "bench_vs_ding.py"), "--ding-venv", str(tmp_path / "none")]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "DI-engine is not installed in" in done.stderr and "nothing measured" in done.stderr


def test_ppo_offpolicy_file_gets_di_engine_meaning():
    cfg = load_config(FILES / "cartpole_ppo_offpolicy_config.py")
    p = cfg.policy
    assert (cfg.env.id, cfg.env.stop_value, cfg.create_config.policy.type) == ("CartPole-v0", 195, "ppo_offpolicy")
    assert (p.model.hidden_sizes, p.model.activation) == ([64, 64, 128, 128], "relu")
    assert (p.learn.update_per_collect, p.learn.batch_size, p.learn.learning_rate) == (6, 64, 0.001)
    assert (p.learn.clip_ratio, p.learn.value_clip_ratio, p.learn.adv_norm) == (0.2, 0.2, False)
    assert p.learn.grad_clip_norm == 0.5
    assert (p.learn.value_weight, p.learn.entropy_weight) == (0.5, 0.01)
    assert (p.collect.n_sample, p.collect.discount_factor, p.collect.gae_lambda) == (128, 0.9, 0.95)
    assert p.other.replay_buffer.replay_buffer_size == 5000
    assert p.eval.eval_freq == 896  # 40 train iters at 6 per collect: ceil(40 / 6) = 7 collects of 128 env steps


def test_rainbow_file_trains_once_the_buffer_holds_a_batch():
    # DI-engine 0.5.3's RainbowDQNPolicy has no random_collect_size (it is commented out), so its serial pipeline
    # collects nothing at random and trains on the first collect that fills a batch
    p = load_config(FILES / "cartpole_rainbow_ding_config.py").policy
    assert (p.learn.learning_starts, p.learn.batch_size, p.collect.n_sample) == (64, 64, 80)


def test_ppg_file_gets_di_engine_meaning():
    cfg = load_config(FILES / "cartpole_ppg_config.py")
    p = cfg.policy
    assert (cfg.env.id, cfg.env.stop_value, cfg.create_config.policy.type) == ("CartPole-v0", 195, "ppg_offpolicy")
    assert (p.model.hidden_sizes, p.model.activation) == ([64, 64, 128, 128], "relu")
    assert (p.learn.update_per_collect, p.learn.batch_size, p.learn.clip_ratio) == (5, 64, 0.2)
    assert p.learn.grad_clip_norm is None
    assert (p.learn.aux_freq, p.learn.aux_train_epoch, p.learn.aux_bc_weight) == (5, 6, 1.0)
    rings = p.other.replay_buffer
    assert (rings.policy.replay_buffer_size, rings.value.replay_buffer_size) == (100, 1000)
    assert p.eval.eval_freq == 1024  # 40 train iters at 5 per collect: 8 collects of 128 env steps


def test_acer_file_gets_di_engine_meaning():
    cfg = load_config(FILES / "cartpole_acer_config.py")
    p = cfg.policy
    assert (cfg.env.id, cfg.env.stop_value, cfg.create_config.policy.type) == ("CartPole-v0", 195, "acer")
    assert (p.model.hidden_sizes, p.model.activation) == ([64, 64, 64], "relu")
    assert (p.learn.unroll_len, p.learn.update_per_collect, p.learn.batch_size) == (32, 4, 16)
    assert (p.learn.learning_rate_actor, p.learn.learning_rate_critic, p.learn.entropy_weight) == (5e-4, 5e-4, 0.0)
    assert (p.learn.trust_region, p.learn.trust_region_value, p.learn.c_clip_ratio) == (True, 1.0, 10)
    assert (p.learn.discount_factor, p.learn.target_theta) == (0.9, 0.01)
    assert p.collect.n_sample == 512  # 16 trajectories of 32 steps: 2 chunks per env of its 8
    assert p.other.replay_buffer.replay_buffer_size == 10000
    assert p.eval.eval_freq == 25600  # 200 train iters at 4 per collect: 50 collects of 512 env steps


def test_benchmark_reads_di_engines_env_steps_from_its_result_pickle(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("bench_vs_ding", REPO / "benchmarks" / "bench_vs_ding.py")
    bench = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "bench_vs_ding", bench)  # its dataclass looks its module up
    spec.loader.exec_module(bench)
    assert bench.ding_env_steps(Path(sys.executable), tmp_path) is None  # no result.pkl: a run cut short
    (tmp_path / "cartpole_a2c_seed0").mkdir()
    (tmp_path / "cartpole_a2c_seed0" / "result.pkl").write_bytes(pickle.dumps({"stop": True, "env_step": 5688}))
    assert bench.ding_env_steps(Path(sys.executable), tmp_path) == 5688


def test_pendulum_files_of_0_5_3_get_their_activation_and_ignore_what_di_engine_never_reads(tmp_path):
    ppo = load_config(FILES / "pendulum_ppo_ding_config.py").policy
    assert (ppo.model.activation, ppo.model.hidden_sizes) == ("tanh", [64, 64])  # nn.Tanh() in the file
    a2c = load_config(FILES / "pendulum_a2c_ding_config.py")
    assert (a2c.create_config.policy.type, a2c.policy.collect.n_sample) == ("a2c", 200)  # epoch_per_collect unread
    text = (FILES / "pendulum_ppo_ding_config.py").read_text().replace("nn.Tanh()", "nn.Sigmoid()")
    (tmp_path / "sigmoid_config.py").write_text(text)
    with pytest.raises(ConfigError, match=r"'policy.model.activation' = Sigmoid\(\) cannot be honoured .* nn.Tanh\(\)"):
        load_config(tmp_path / "sigmoid_config.py")


def test_pendulum_with_discrete_torques_is_refused_before_it_fails_at_the_first_step(tmp_path):
    text = (FILES / "pendulum_a2c_ding_config.py").read_text()
    text = text.replace("act_scale=True,", "act_scale=True, continuous=False,")
    assert "continuous=False" in text
    (tmp_path / "pendulum_discrete_config.py").write_text(text)
    with pytest.raises(ConfigError, match=r"'env.continuous' = False cannot be honoured .* 11 discrete torques"):
        load_config(tmp_path / "pendulum_discrete_config.py")
    assert load_config(FILES / "pendulum_bdq_ding_config.py").create_config.policy.type == "bdq"  # BDQ bins itself
