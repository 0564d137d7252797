"""A short Pong DQN run stores its replay frame-deduplicated (<= 1.1x one 84x84 frame per transition), and
its replay file round-trips through a checkpoint and a resume."""

from __future__ import annotations

import logging

import pytest

pytest.importorskip("ale_py")
pytest.importorskip("cv2")

from ding_dist.data import FrameReplayBuffer, ReplayBuffer  # noqa: E402
from ding_dist.entry.loops import data_parallel  # noqa: E402
from ding_dist.entry.pipeline import train  # noqa: E402

CAPACITY = 1000
SMALL = (
    "env.collector_env_num=2",
    "env.evaluator_env_num=1",
    "env.n_evaluator_episode=1",
    "env.max_episode_steps=200",
    "policy.collect.n_sample=16",
    "policy.learn.learning_starts=200",
    "policy.learn.batch_size=16",
    f"policy.other.replay_buffer.replay_buffer_size={CAPACITY}",
    "policy.other.replay_buffer.save_in_checkpoint=True",
    "policy.eval.eval_freq=0",
)


@pytest.fixture
def built_buffers(monkeypatch):
    """Every replay buffer the data-parallel pipeline builds, in order."""
    built: list = []
    original = data_parallel.make_replay_buffer

    def recording(*args, **kwargs):
        built.append(original(*args, **kwargs))
        return built[-1]

    monkeypatch.setattr(data_parallel, "make_replay_buffer", recording)
    return built


def test_pong_dqn_replay_is_frame_deduplicated_and_resumes(tmp_path, built_buffers, caplog):
    exp = tmp_path / "pong_dqn"
    out = train("configs/pong_dqn_config.py", overrides=SMALL, exp_dir=exp, max_env_steps=1100)
    assert out["env_steps"] >= 1100 and out["train_iters"] > 0
    buf = built_buffers[0]
    assert isinstance(buf, FrameReplayBuffer) and len(buf) == buf.capacity == CAPACITY  # full, wrapped around
    per_transition = buf.nbytes() / len(buf)
    assert per_transition <= 1.1 * 84 * 84, per_transition
    batch = buf.sample(8)
    assert batch["obs"].shape == (8, 4, 84, 84) and batch["next_obs"].shape == (8, 4, 84, 84)

    with caplog.at_level(logging.INFO, logger="ding_dist"):
        resumed = train("configs/pong_dqn_config.py", overrides=SMALL, resume=exp, max_env_steps=1200)
    assert resumed["env_steps"] >= 1200
    assert "replay buffer restored" in caplog.text
    again = built_buffers[1]
    assert isinstance(again, FrameReplayBuffer) and len(again) == CAPACITY  # restored full, then extended


def test_frame_dedup_false_keeps_the_plain_uint8_buffer(tmp_path, built_buffers):
    overrides = (*SMALL, "policy.other.replay_buffer.frame_dedup=False", "policy.learn.learning_starts=100")
    train("configs/pong_dqn_config.py", overrides=overrides, exp_dir=tmp_path / "plain", max_env_steps=160)
    buf = built_buffers[0]
    assert type(buf) is ReplayBuffer and buf.nbytes() / buf.capacity > 8 * 84 * 84  # obs and next_obs stacks
