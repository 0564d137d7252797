"""DI-engine's dizoo/classic_control/pendulum/config/pendulum_ppo_config.py: its keys and values, unchanged (the
activation is a torch module, as there)."""

import torch.nn as nn
from easydict import EasyDict

main_config = EasyDict(
    dict(
        exp_name="pendulum_ppo_seed0",
        env=dict(collector_env_num=10, evaluator_env_num=5, act_scale=True, n_evaluator_episode=5, stop_value=-250),
        policy=dict(
            cuda=False,
            action_space="continuous",
            recompute_adv=True,
            model=dict(
                obs_shape=3,
                action_shape=1,
                encoder_hidden_size_list=[64, 64],
                action_space="continuous",
                actor_head_layer_num=0,
                critic_head_layer_num=0,
                sigma_type="independent",
                activation=nn.Tanh(),
                bound_type="tanh",
            ),
            learn=dict(
                epoch_per_collect=10,
                batch_size=32,
                learning_rate=1e-3,
                value_weight=0.5,
                entropy_weight=0.0,
                clip_ratio=0.2,
                adv_norm=True,
                value_norm=True,
                ignore_done=True,
            ),
            collect=dict(n_sample=5000, unroll_len=1, discount_factor=0.9, gae_lambda=0.95),
            eval=dict(evaluator=dict(eval_freq=200)),
        ),
    )
)
create_config = EasyDict(
    dict(
        env=dict(type="pendulum", import_names=["dizoo.classic_control.pendulum.envs.pendulum_env"]),
        env_manager=dict(type="base"),
        policy=dict(type="ppo"),
    )
)
