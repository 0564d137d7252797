"""DI-engine's dizoo/classic_control/cartpole/config/cartpole_r2d2_config.py: its keys and values, unchanged."""

from easydict import EasyDict

cartpole_r2d2_config = dict(
    exp_name="cartpole_r2d2_seed0",
    env=dict(collector_env_num=8, evaluator_env_num=8, n_evaluator_episode=8, stop_value=195),
    policy=dict(
        cuda=False,
        priority=False,
        priority_IS_weight=False,
        model=dict(obs_shape=4, action_shape=2, encoder_hidden_size_list=[128, 128, 64]),
        discount_factor=0.995,
        nstep=5,
        burnin_step=2,
        learn_unroll_len=40,
        learn=dict(update_per_collect=5, batch_size=64, learning_rate=0.0005, target_update_theta=0.001),
        collect=dict(n_sample=32, unroll_len=2 + 40, traj_len_inf=True, env_num=8),
        eval=dict(env_num=8, evaluator=dict(eval_freq=30)),
        other=dict(
            eps=dict(type="exp", start=0.95, end=0.05, decay=10000),
            replay_buffer=dict(replay_buffer_size=100000),
        ),
    ),
)
main_config = EasyDict(cartpole_r2d2_config)

cartpole_r2d2_create_config = dict(
    env=dict(type="cartpole", import_names=["dizoo.classic_control.cartpole.envs.cartpole_env"]),
    env_manager=dict(type="base"),
    policy=dict(type="r2d2"),
)
create_config = EasyDict(cartpole_r2d2_create_config)
