"""DI-engine's dizoo/atari/config/serial/pong/pong_a2c_config.py: its keys and values, unchanged."""

from easydict import EasyDict

pong_a2c_config = dict(
    exp_name="pong_a2c_seed0",
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
        model=dict(
            obs_shape=[4, 84, 84],
            action_shape=6,
            encoder_hidden_size_list=[64, 64, 128],
            actor_head_hidden_size=128,
            critic_head_hidden_size=128,
        ),
        learn=dict(
            batch_size=160,
            adv_norm=False,
            learning_rate=0.0001414,
            value_weight=0.5,
            entropy_weight=0.01,
            grad_norm=0.5,
            betas=(0.0, 0.99),
        ),
        collect=dict(
            n_sample=160,
            gae_lambda=0.99,
            discount_factor=0.99,
        ),
        eval=dict(
            evaluator=dict(
                eval_freq=500,
            ),
        ),
    ),
)
pong_a2c_config = EasyDict(pong_a2c_config)
main_config = pong_a2c_config

pong_a2c_create_config = dict(
    env=dict(
        type="atari",
        import_names=["dizoo.atari.envs.atari_env"],
    ),
    env_manager=dict(
        type="subprocess",
    ),
    policy=dict(
        type="a2c",
    ),
    replay_buffer=dict(
        type="naive",
    ),
)
pong_a2c_create_config = EasyDict(pong_a2c_create_config)
create_config = pong_a2c_create_config
