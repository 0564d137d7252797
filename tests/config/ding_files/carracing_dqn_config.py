"""DI-engine's dizoo/box2d/carracing/config/carracing_dqn_config.py: its keys and values, unchanged."""

from easydict import EasyDict

carracing_dqn_config = dict(
    exp_name="carracing_dqn_seed0",
    env=dict(
        collector_env_num=8,
        evaluator_env_num=8,
        env_id="CarRacing-v2",
        continuous=False,
        n_evaluator_episode=8,
        stop_value=900,
    ),
    policy=dict(
        cuda=True,
        model=dict(
            obs_shape=[3, 96, 96],
            action_shape=5,
            encoder_hidden_size_list=[64, 64, 128],
            dueling=True,
        ),
        discount_factor=0.99,
        nstep=3,
        learn=dict(
            update_per_collect=10,
            batch_size=64,
            learning_rate=0.0001,
            target_update_freq=100,
        ),
        collect=dict(
            n_sample=64,
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
carracing_dqn_config = EasyDict(carracing_dqn_config)
main_config = carracing_dqn_config

carracing_dqn_create_config = dict(
    env=dict(
        type="carracing",
        import_names=["dizoo.box2d.carracing.envs.carracing_env"],
    ),
    env_manager=dict(
        type="subprocess",
    ),
    policy=dict(
        type="dqn",
    ),
)
carracing_dqn_create_config = EasyDict(carracing_dqn_create_config)
create_config = carracing_dqn_create_config
