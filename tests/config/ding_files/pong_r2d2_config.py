"""DI-engine's dizoo/atari/config/serial/pong/pong_r2d2_config.py: its keys and values, unchanged."""

from easydict import EasyDict

pong_r2d2_config = dict(
    exp_name="pong_r2d2_seed0",
    env=dict(
        collector_env_num=8,
        evaluator_env_num=8,
        n_evaluator_episode=8,
        stop_value=20,
        env_id="PongNoFrameskip-v4",
        frame_stack=4,
    ),
    policy=dict(
        cuda=True,
        priority=True,
        priority_IS_weight=True,
        model=dict(
            obs_shape=[4, 84, 84],
            action_shape=6,
            encoder_hidden_size_list=[128, 128, 512],
        ),
        discount_factor=0.997,
        nstep=5,
        burnin_step=20,
        learn_unroll_len=80,
        learn=dict(
            update_per_collect=8,
            batch_size=64,
            learning_rate=0.0005,
            target_update_theta=0.001,
        ),
        collect=dict(
            n_sample=32,
            traj_len_inf=True,
            env_num=8,
        ),
        eval=dict(
            env_num=8,
        ),
        other=dict(
            eps=dict(
                type="exp",
                start=0.95,
                end=0.05,
                decay=100000.0,
            ),
            replay_buffer=dict(
                replay_buffer_size=10000,
                alpha=0.6,
                beta=0.4,
            ),
        ),
    ),
)
pong_r2d2_config = EasyDict(pong_r2d2_config)
main_config = pong_r2d2_config

pong_r2d2_create_config = dict(
    env=dict(
        type="atari",
        import_names=["dizoo.atari.envs.atari_env"],
    ),
    env_manager=dict(
        type="subprocess",
    ),
    policy=dict(
        type="r2d2",
    ),
)
pong_r2d2_create_config = EasyDict(pong_r2d2_create_config)
create_config = pong_r2d2_create_config
