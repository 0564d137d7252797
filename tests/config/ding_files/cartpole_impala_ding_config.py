"""DI-engine's dizoo/classic_control/cartpole/config/cartpole_impala_config.py: its keys and values, unchanged."""

from easydict import EasyDict

cartpole_impala_config = dict(
    exp_name="cartpole_impala_seed0",
    env=dict(collector_env_num=8, evaluator_env_num=5, n_evaluator_episode=5, stop_value=195),
    policy=dict(
        cuda=False,
        nstep=1,
        discount_factor=0.9,
        model=dict(obs_shape=4, action_shape=2, encoder_hidden_size_list=[64, 64]),
        learn=dict(
            update_per_collect=4,
            batch_size=16,
            learning_rate=0.0005,
            value_weight=0.5,
            entropy_weight=0.0001,
            discount_factor=0.9,
            lambda_=0.95,
            unroll_len=32,
            rho_clip_ratio=1.0,
            c_clip_ratio=1.0,
            rho_pg_clip_ratio=1.0,
        ),
        collect=dict(
            n_sample=16,
            unroll_len=32,
            discount_factor=0.9,
            gae_lambda=0.95,
            collector=dict(collect_print_freq=1000),
        ),
        eval=dict(evaluator=dict(eval_freq=200)),
        other=dict(replay_buffer=dict(replay_buffer_size=1000, max_use=16)),
    ),
)
main_config = EasyDict(cartpole_impala_config)

cartpole_impala_create_config = dict(
    env=dict(type="cartpole", import_names=["dizoo.classic_control.cartpole.envs.cartpole_env"]),
    env_manager=dict(type="base"),
    policy=dict(type="impala"),
)
create_config = EasyDict(cartpole_impala_create_config)
