"""Every policy that takes image observations trains on them through the pipeline: in one process and with
1 actor + 1 learner, on a tiny frame-stacked uint8 env (4 x 36 x 36, the Nature-CNN's smallest input).

IMPALA, PPO and DQN build a Nature-CNN on uint8 ``(C, H, W)`` observations. SAC has no image encoder and
refuses image observations with one line (tests/policy/test_sac.py).
"""

from __future__ import annotations

from ding_dist.comm import get_rank
from ding_dist.config import read_config
from ding_dist.entry import pipeline
from ding_dist.envs.toy import FrameStackEnv
from ding_dist.policy.encoders import is_image_space
from tests.entry.test_pipeline import CONFIGS

SIDE = 36  # min(H, W) >= 36: the smallest image the Nature-CNN (8/4, 4/2, 3/1 convolutions) takes
POLICIES = ("impala", "ppo", "dqn")
STEPS = 64


def _config(name: str):
    main, create = read_config(f"{CONFIGS}/cartpole_{name}_config.py")
    main.exp_name = f"image_{name}"
    main.env.update(
        id=None,
        entry_point="ding_dist.envs.toy:FrameStackEnv",
        env_kwargs={"side": SIDE, "end_p": 0.1},
        max_episode_steps=12,
        collector_env_num=2,
        evaluator_env_num=1,
        n_evaluator_episode=1,
        stop_value=None,
    )
    main.policy.eval.eval_freq = 0
    main.policy.other = dict(log_freq=10**9)
    if name == "dqn":
        main.policy.model.hidden_sizes = [32]  # on images: the CNN's output features, then no hidden layer
        main.policy.learn.update(batch_size=8, update_per_collect=2, learning_starts=16)
        main.policy.collect.n_sample = 16
        main.policy.other.replay_buffer = dict(replay_buffer_size=256)
    else:  # learn calls on 2 envs x 16 steps, 2 epochs of 2 minibatches (IMPALA: one env column each)
        main.policy.learn.update(epoch_per_collect=2, batch_size=16)
        main.policy.collect.n_sample = 32
    return main, create


def _train_all(exp_dir: str, actors: int) -> list[tuple]:
    out = []
    for name in POLICIES:
        main, create = _config(name)
        if actors:
            main.actor_learner = dict(actors=actors, learners=1)
        result = pipeline.train((main, create), seed=0, exp_dir=f"{exp_dir}/{name}", max_env_steps=STEPS)
        out.append((name, result.get("role", "learner"), result["env_steps"], result.get("train_iters")))
    return out


# updates: IMPALA / PPO 2 learn calls x 2 epochs x 2 minibatches (16 // 16 steps = 1 env column each);
# DQN: learning starts at 16 env steps, then 2 updates per 16 (iterations ending at 16, 32, 48, 64)
EXPECTED = [("impala", "learner", STEPS, 8), ("ppo", "learner", STEPS, 8), ("dqn", "learner", STEPS, 8)]


def test_image_policies_train_in_one_process(tmp_path):
    assert is_image_space(FrameStackEnv(SIDE).observation_space)  # the policies build their Nature-CNN networks
    assert _train_all(str(tmp_path), actors=0) == EXPECTED


def _one_actor_one_learner(exp_dir: str):
    return get_rank(), _train_all(exp_dir, actors=1)


def test_image_policies_train_with_one_actor_and_one_learner(run_ranks, tmp_path):
    (r0, learner), (r1, actor) = run_ranks(_one_actor_one_learner, 2, str(tmp_path))
    assert (r0, r1) == (0, 1)
    assert learner == EXPECTED
    assert [(name, role) for name, role, *_ in actor] == [(name, "actor") for name in POLICIES]
