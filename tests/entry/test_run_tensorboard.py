"""What a run writes to TensorBoard besides the curves: the resolved config once (text and hparams), the
learning rate, DQN's epsilon, and the evaluation's return std and episode length."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.hparams import plugin_data_pb2

from ding_dist.entry.cli import main
from ding_dist.entry.services.metrics import Metrics
from ding_dist.policy.base import Policy
from ding_dist.policy.exploration import epsilon_schedule
from ding_dist.utils import MetricWriter, read_metrics

REPO = Path(__file__).resolve().parents[2]
DQN_CONFIG = REPO / "configs" / "cartpole_dqn_config.py"
FAST = ["policy.learn.learning_starts=0", "policy.learn.update_per_collect=4", "env.n_evaluator_episode=3"]


def _events(folder: Path) -> EventAccumulator:
    acc = EventAccumulator(str(folder), size_guidance={"tensors": 0, "scalars": 0})
    acc.Reload()
    return acc


def _hparams(acc: EventAccumulator) -> dict:
    content = acc.PluginTagToContent("hparams")["_hparams_/session_start_info"]
    info = plugin_data_pb2.HParamsPluginData.FromString(content).session_start_info
    return {k: v.WhichOneof("kind") and getattr(v, v.WhichOneof("kind")) for k, v in info.hparams.items()}


@pytest.fixture(scope="module")
def dqn_run(tmp_path_factory) -> Path:
    exp = tmp_path_factory.mktemp("tb") / "run"
    argv = ["train", str(DQN_CONFIG), "--max-env-steps", "256", "--exp-dir", str(exp), "--seed", "4"]
    assert main([*argv, "--set", "policy.learn.learning_rate=0.0007", *FAST]) == 0
    return exp


def test_config_written_once_as_text_and_hparams(dqn_run):
    acc = _events(dqn_run / "tb")
    (text_event,) = acc.Tensors("config/text_summary")  # once
    text = text_event.tensor_proto.string_val[0].decode()
    assert all(line.startswith("    ") for line in text.splitlines())  # a markdown code block
    config = json.loads(text)
    assert config["seed"] == 4 and config["policy"]["learn"]["learning_rate"] == 0.0007
    assert config["create_config"]["policy"]["type"] == "dqn"
    hp = _hparams(acc)
    assert hp["seed"] == 4 and hp["policy.learn.learning_rate"] == pytest.approx(0.0007)
    assert hp["env.id"] == "CartPole-v1" and hp["policy.learn.double"] == 1  # a bool: torch stores it as a number
    assert "policy.model.hidden_sizes" not in hp  # only scalar leaves are hparams


def test_learning_rate_epsilon_and_eval_details_are_scalars(dqn_run):
    acc = _events(dqn_run / "tb")
    tags = set(acc.Tags()["scalars"])
    assert {"train/learning_rate", "train/epsilon", "eval/std_reward", "eval/mean_ep_length"} <= tags
    assert [e.value for e in acc.Scalars("train/learning_rate")] == pytest.approx([0.0007])
    records = read_metrics(dqn_run / "tb")
    eps = [(r["step"], r["train/epsilon"]) for r in records if "train/epsilon" in r]
    assert eps and all(v == pytest.approx(epsilon_schedule("linear", 1.0, 0.04, 8000, s)) for s, v in eps)
    (ev,) = [r for r in records if "eval/mean_reward" in r]
    assert ev["eval/std_reward"] >= 0 and ev["eval/mean_ep_length"] >= 8  # CartPole: a return of 1 per step
    assert ev["eval/mean_ep_length"] == pytest.approx(ev["eval/mean_reward"])


def test_learning_rate_of_each_optimizer_and_no_epsilon_outside_dqn():
    p = torch.nn.Parameter(torch.zeros(1))
    policy = SimpleNamespace(
        actor_optimizer=torch.optim.Adam([p], lr=3e-4),
        critic_optimizer=torch.optim.SGD([p], lr=1e-3),
        actor=None,
        schedule_values=Policy.schedule_values.__get__(object()),  # a policy without schedules of its own
    )
    run = SimpleNamespace(policy=policy, counters=SimpleNamespace(env_steps=10))
    values = Metrics.schedule_values(run)
    assert values == {"train/learning_rate_actor": 3e-4, "train/learning_rate_critic": 1e-3}


def test_write_config_without_tensorboard_is_a_no_op(tmp_path):
    with MetricWriter(tmp_path, tensorboard=False) as w:
        w.write_config({"seed": 1})
    assert not list(tmp_path.glob("events.out.tfevents.*"))
