"""A Pendulum SAC config in DI-engine's dialect (DI-engine's keys and layout), written for ding_dist's tests."""

from easydict import EasyDict

sac_config = dict(
    exp_name="ding_pendulum_sac",
    seed=5,
    env=dict(collector_env_num=4, evaluator_env_num=2, act_scale=True, n_evaluator_episode=2, stop_value=-200),
    policy=dict(
        cuda=False,
        random_collect_size=800,
        model=dict(
            obs_shape=3,
            action_shape=1,
            twin_critic=True,
            action_space="reparameterization",
            actor_head_hidden_size=96,
            critic_head_hidden_size=96,
        ),
        learn=dict(
            update_per_collect=4,
            batch_size=96,
            learning_rate_q=0.002,
            learning_rate_policy=0.001,
            learning_rate_alpha=0.0005,
            ignore_done=True,
            target_theta=0.01,
            discount_factor=0.98,
            auto_alpha=True,
        ),
        collect=dict(n_sample=8),
        eval=dict(evaluator=dict(eval_freq=250)),
        other=dict(replay_buffer=dict(replay_buffer_size=50000)),
    ),
)
sac_config = EasyDict(sac_config)
main_config = sac_config

sac_create_config = EasyDict(
    dict(
        env=dict(type="pendulum", import_names=["dizoo.classic_control.pendulum.envs.pendulum_env"]),
        env_manager=dict(type="base"),
        policy=dict(type="sac"),
    )
)
create_config = sac_create_config
