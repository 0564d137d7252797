"""Short Atari (Pong PPO) and MuJoCo (Hopper PPO, HalfCheetah SAC) runs through the pipeline.

CI-sized (they run in CI: the ``test`` extra installs ale-py and MuJoCo): 512-1024 env steps each, on the
shipped configs with smaller sizes and 100-step evaluation episodes; 1 and 2 gloo processes. The short Pong
DQN run (with a checkpoint and a resume of its frame-deduplicated replay) is in ``test_atari_replay.py``.
"""

from __future__ import annotations

import pytest

from ding_dist.entry.pipeline import train

pytestmark = pytest.mark.slow

SMALL = {
    "pong_ppo": (
        "env.collector_env_num=2",
        "env.evaluator_env_num=1",
        "env.n_evaluator_episode=1",
        "env.max_episode_steps=100",
        "policy.collect.n_sample=256",
        "policy.learn.batch_size=128",
        "policy.learn.epoch_per_collect=1",
        "policy.eval.eval_freq=0",
    ),
    "hopper_ppo": (
        "env.evaluator_env_num=1",
        "env.max_episode_steps=100",
        "env.n_evaluator_episode=1",
        "policy.collect.n_sample=512",
        "policy.learn.epoch_per_collect=2",
        "policy.eval.eval_freq=0",
    ),
    "halfcheetah_sac": (
        "env.evaluator_env_num=1",
        "env.n_evaluator_episode=1",
        "env.max_episode_steps=100",
        "policy.learn.learning_starts=300",
        "policy.learn.update_per_collect=4",
        "policy.eval.eval_freq=0",
    ),
}
STEPS = {"pong_ppo": 512, "hopper_ppo": 1024, "halfcheetah_sac": 600}


def _run(name: str, exp_dir: str, extra: tuple[str, ...] = ()) -> tuple[int, int, int]:
    overrides = (*SMALL[name], *extra)
    out = train(f"configs/{name}_config.py", overrides=overrides, exp_dir=exp_dir, max_env_steps=STEPS[name])
    return out["env_steps"], out["world_size"], int(out["train_iters"] > 0)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_short_run_one_process(name, tmp_path):
    pytest.importorskip("ale_py" if name.startswith("pong") else "mujoco")
    steps, world, learned = _run(name, str(tmp_path / name))
    assert steps >= STEPS[name] and world == 1 and learned == 1


# Pong on two processes (18 s) is quality-marked: CI keeps Pong on one process and images on two ranks
# (tests/entry/test_image_policies.py); the suite stays within CI's time.
@pytest.mark.parametrize("name", [pytest.param("pong_ppo", marks=pytest.mark.quality), "halfcheetah_sac"])
def test_short_run_two_processes(name, tmp_path, run_ranks):
    pytest.importorskip("ale_py" if name.startswith("pong") else "mujoco")
    # halfcheetah_sac steps one env (as CleanRL): two processes need two, one each (the envs are what is split)
    extra = ("env.collector_env_num=2",) if name == "halfcheetah_sac" else ()
    results = run_ranks(_run, 2, name, str(tmp_path / name), extra)
    assert [r[1:] for r in results] == [(2, 1), (2, 1)]
    assert results[0][0] == results[1][0] >= STEPS[name]
