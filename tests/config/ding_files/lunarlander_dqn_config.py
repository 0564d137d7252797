"""DI-engine's dizoo/box2d/lunarlander/config/lunarlander_dqn_config.py: its keys and values, unchanged."""

from easydict import EasyDict

lunarlander_dqn_config = dict(
    exp_name="lunarlander_dqn_seed0",
    env=dict(
        collector_env_num=8,
        evaluator_env_num=8,
        env_id="LunarLander-v2",
        n_evaluator_episode=8,
        stop_value=200,
    ),
    policy=dict(
        cuda=True,
        load_path="./lunarlander_dqn_seed0/ckpt/ckpt_best.pth.tar",
        model=dict(
            obs_shape=8,
            action_shape=4,
            encoder_hidden_size_list=[512, 64],
            dueling=True,
        ),
        discount_factor=0.99,
        nstep=3,
        learn=dict(
            update_per_collect=10,
            batch_size=64,
            learning_rate=0.001,
            target_update_freq=100,
        ),
        collect=dict(
            n_sample=64,
            unroll_len=1,
        ),
        other=dict(
            eps=dict(
                type="exp",
                start=0.95,
                end=0.1,
                decay=50000,
            ),
            replay_buffer=dict(
                replay_buffer_size=100000,
            ),
        ),
    ),
)
lunarlander_dqn_config = EasyDict(lunarlander_dqn_config)
main_config = lunarlander_dqn_config

lunarlander_dqn_create_config = dict(
    env=dict(
        type="lunarlander",
        import_names=["dizoo.box2d.lunarlander.envs.lunarlander_env"],
    ),
    env_manager=dict(
        type="subprocess",
    ),
    policy=dict(
        type="dqn",
    ),
)
lunarlander_dqn_create_config = EasyDict(lunarlander_dqn_create_config)
create_config = lunarlander_dqn_create_config
