"""A CartPole DQN config in DI-engine's dialect (DI-engine's keys and layout), written for ding_dist's tests."""

from easydict import EasyDict

dqn_config = dict(
    exp_name="ding_cartpole_dqn",
    env=dict(
        collector_env_num=4,
        evaluator_env_num=4,
        n_evaluator_episode=4,
        stop_value=195,
        replay_path="ding_cartpole_dqn/video",
        manager=dict(shared_memory=False),
    ),
    policy=dict(
        cuda=False,
        load_path="ding_cartpole_dqn/ckpt/ckpt_best.pth.tar",
        model=dict(
            obs_shape=4,
            action_shape=2,
            encoder_hidden_size_list=[64, 64],
            dueling=True,
        ),
        nstep=3,
        discount_factor=0.99,
        learn=dict(
            update_per_collect=8,
            batch_size=64,
            learning_rate=0.002,
            target_update_freq=50,
        ),
        collect=dict(n_sample=16),
        eval=dict(evaluator=dict(eval_freq=60)),
        other=dict(
            eps=dict(type="exp", start=0.95, end=0.05, decay=1500),
            replay_buffer=dict(replay_buffer_size=20000),
        ),
    ),
)
dqn_config = EasyDict(dqn_config)
main_config = dqn_config

dqn_create_config = EasyDict(
    dict(
        env=dict(type="cartpole", import_names=["dizoo.classic_control.cartpole.envs.cartpole_env"]),
        env_manager=dict(type="base"),
        policy=dict(type="dqn"),
    )
)
create_config = dqn_create_config

if __name__ == "__main__":  # how DI-engine runs it; ding-dist never executes this block
    from ding.entry import serial_pipeline

    serial_pipeline((main_config, create_config), seed=0)
