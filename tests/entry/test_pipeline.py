"""Pipelines on one process: experiment folder, counters, resume, evaluate, dispatch, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ding_dist.config import ConfigError, read_config
from ding_dist.entry import evaluate, serial_pipeline, serial_pipeline_onpolicy, train
from ding_dist.utils import CheckpointManager, load_checkpoint, read_metrics

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def tiny_dqn():
    main, create = read_config(f"{CONFIGS}/cartpole_dqn_config.py")
    main.exp_name = "tiny_dqn"
    main.env.update(collector_env_num=4, evaluator_env_num=2, n_evaluator_episode=2)
    main.policy.model.hidden_sizes = [32]
    main.policy.learn.update(update_per_collect=4, learning_starts=128, batch_size=32)
    main.policy.collect.n_sample = 64
    main.policy.eval.eval_freq = 512
    main.policy.other.update(log_freq=256, checkpoint=dict(freq=512, keep_last=2))
    main.policy.other.replay_buffer.save_in_checkpoint = True
    return main, create


def tiny_ppo():
    main, create = read_config(f"{CONFIGS}/cartpole_ppo_config.py")
    main.env.update(collector_env_num=4, evaluator_env_num=2, n_evaluator_episode=2)
    main.policy.learn.update(epoch_per_collect=2, batch_size=64)
    main.policy.collect.n_sample = 128
    main.policy.eval.eval_freq = 512
    main.policy.other = dict(log_freq=256)
    return main, create


def test_dqn_run_writes_experiment_folder(tmp_path):
    result = train(tiny_dqn(), seed=3, exp_dir=tmp_path, max_env_steps=1024)
    assert result["env_steps"] == 1024 and result["world_size"] == 1
    assert result["stopped_by"] == "max_env_steps"
    # learning starts at 128 env steps: iterations ending at 128, 192, ..., 1024 (15) x 4 updates each
    assert result["train_iters"] == 15 * 4
    assert json.loads((tmp_path / "result.json").read_text())["env_steps"] == 1024
    saved_main, _ = read_config(tmp_path / "config.py")
    assert saved_main.seed == 3 and saved_main.policy.learn.batch_size == 32
    assert [p.name for p in CheckpointManager(tmp_path / "ckpt").checkpoints()] == [
        "ckpt_000000512.pt",
        "ckpt_000001024.pt",
    ]
    records = read_metrics(tmp_path / "tb" / "metrics.jsonl")
    steps = [r["step"] for r in records if "time/fps" in r]
    assert steps == [256, 512, 768, 1024]
    evals = [r for r in records if "eval/mean_reward" in r]
    assert [r["step"] for r in evals] == [512, 1024]
    assert evals[-1]["eval/mean_reward"] == result["last_eval_return"]
    last = [r for r in records if "time/fps" in r][-1]
    assert last["rollout/episodes"] == result["episodes"] > 0
    assert last["time/train_iters"] == result["train_iters"]
    assert "train/loss" in last and "rollout/ep_rew_mean" in last
    assert any((tmp_path / "tb").glob("events.out.tfevents.*"))


def test_resume_continues_counters_and_metrics(tmp_path):
    first = train(tiny_dqn(), seed=0, exp_dir=tmp_path, max_env_steps=512)
    second = train(tiny_dqn(), seed=0, resume=tmp_path, max_env_steps=1024)
    assert second["env_steps"] == 1024
    assert second["train_iters"] == first["train_iters"] + 8 * 4  # 8 more iterations, all learning
    assert second["episodes"] > first["episodes"]
    assert second["eval_history"][0] == first["eval_history"][0]
    steps = [r["step"] for r in read_metrics(tmp_path / "tb" / "metrics.jsonl") if "time/fps" in r]
    assert steps == [256, 512, 768, 1024]  # TB steps continue, nothing duplicated
    # the replay buffer was restored too: it holds the rows of both runs (1024 steps / 4 envs)
    state = load_checkpoint(tmp_path / "ckpt" / "replay_rank0.pt")
    assert state["env_steps"] == 1024 and len(state["buffer"]["data"]["reward"]) == 1024 // 4
    # wall time: the total over both segments (the first up to its checkpoint at 512), and the segment's own
    assert first["wall_time_s"] == first["segment_wall_time_s"] > 0
    before = load_checkpoint(tmp_path / "ckpt" / "ckpt_000000512.pt")["counters"]["wall_time_s"]
    assert 0 < before <= first["wall_time_s"]
    assert second["wall_time_s"] == pytest.approx(before + second["segment_wall_time_s"], rel=1e-12)
    assert json.loads((tmp_path / "result.json").read_text())["wall_time_s"] == second["wall_time_s"]


def test_ppo_dispatch_and_evaluate(tmp_path):
    result = train(tiny_ppo(), seed=1, exp_dir=tmp_path, max_env_steps=512)
    assert result["env_steps"] == 512 and result["train_iters"] == 4 * 2 * 2  # iterations x epochs x minibatches
    out = evaluate(tiny_ppo(), tmp_path, episodes=3, seed=5)  # a run folder: its best evaluation's policy
    assert len(out["returns"]) == 3 and out["checkpoint"] == str(tmp_path / "ckpt" / "best.pt")
    assert out["mean_return"] == pytest.approx(sum(out["returns"]) / 3)
    # same checkpoint and seed -> same greedy returns
    assert evaluate(tiny_ppo(), tmp_path / "ckpt" / "best.pt", episodes=3, seed=5)["returns"] == out["returns"]
    last = evaluate(tiny_ppo(), tmp_path / "ckpt" / "ckpt_000000512.pt", episodes=3, seed=5)
    assert last["checkpoint"].endswith("ckpt_000000512.pt") and len(last["returns"]) == 3


def test_wrong_pipeline_and_bad_config_are_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="serial_pipeline_onpolicy"):
        serial_pipeline(tiny_ppo(), exp_dir=tmp_path, max_env_steps=64)
    with pytest.raises(ValueError, match="needs serial_pipeline"):
        serial_pipeline_onpolicy(tiny_dqn(), exp_dir=tmp_path, max_env_steps=64)
    with pytest.raises(ConfigError, match="batch_sise"):
        train(tiny_dqn(), overrides=["policy.learn.batch_sise=3"], exp_dir=tmp_path)
    main, create = tiny_dqn()
    main.env.id = "CartPol-v1"
    with pytest.raises(ValueError, match="CartPole-v1"):
        train((main, create), exp_dir=tmp_path, max_env_steps=64)
    with pytest.raises(FileNotFoundError, match="no loadable checkpoint"):
        train(tiny_dqn(), resume=tmp_path / "nothing_here", max_env_steps=64)
    with pytest.raises(ValueError, match="max_env_steps"):
        train(tiny_dqn(), exp_dir=tmp_path, max_env_steps=0)


@pytest.mark.parametrize("name", ["cartpole_dqn", "cartpole_ppo", "acrobot_dqn"])
def test_shipped_configs_compile_and_run_briefly(tmp_path, name):
    result = train(f"{CONFIGS}/{name}_config.py", exp_dir=tmp_path, max_env_steps=256)
    assert result["env_steps"] == 256 and result["last_eval_return"] is not None
