"""DI-engine's dizoo/classic_control/cartpole/config/cartpole_acer_config.py: its keys and values, unchanged."""

from easydict import EasyDict

main_config = EasyDict(
    dict(
        exp_name="cartpole_acer_seed0",
        env=dict(collector_env_num=8, evaluator_env_num=5, n_evaluator_episode=5, stop_value=195),
        policy=dict(
            cuda=False,
            model=dict(obs_shape=4, action_shape=2, encoder_hidden_size_list=[64, 64]),
            unroll_len=32,
            learn=dict(
                update_per_collect=4,
                batch_size=16,
                learning_rate_actor=0.0005,
                learning_rate_critic=0.0005,
                entropy_weight=0.0,
                discount_factor=0.9,
                trust_region=True,
                c_clip_ratio=10,
            ),
            collect=dict(n_sample=16, discount_factor=0.9, collector=dict(collect_print_freq=1000)),
            eval=dict(evaluator=dict(eval_freq=200)),
            other=dict(replay_buffer=dict(replay_buffer_size=10000)),
        ),
    )
)

create_config = EasyDict(
    dict(
        env=dict(type="cartpole", import_names=["dizoo.classic_control.cartpole.envs.cartpole_env"]),
        env_manager=dict(type="base"),
        policy=dict(type="acer"),
    )
)
