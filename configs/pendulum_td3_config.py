"""TD3 on Pendulum-v1; trains to a greedy evaluation of -200 (docs/rl.md has the env steps and wall time).

Train: ``ding-dist train configs/pendulum_td3_config.py`` (add ``--nproc 2`` for two processes).
Sizes are global: with N processes each one steps ``collector_env_num / N`` envs (``n_sample / N`` steps) per
iteration and learns on ``batch_size / N`` samples per update, ``update_per_collect`` updates per iteration, so the
update-to-data ratio ``update_per_collect / n_sample`` and the global batch do not change with N.
"""

from easydict import EasyDict

main_config = EasyDict(
    dict(
        exp_name="pendulum_td3",
        env=dict(
            id="Pendulum-v1",
            collector_env_num=4,
            evaluator_env_num=10,
            n_evaluator_episode=10,
            stop_value=-200,
        ),
        policy=dict(
            discount_factor=0.99,
            nstep=1,
            model=dict(actor_hidden_sizes=[64, 64], critic_hidden_sizes=[64, 64], twin_critic=True),
            learn=dict(
                batch_size=128,
                learning_rate_actor=1e-3,
                learning_rate_critic=1e-3,
                update_per_collect=64,
                learning_starts=1000,
                target_theta=0.005,
                actor_update_freq=2,
                noise=True,
                noise_sigma=0.2,
                noise_range=dict(min=-0.5, max=0.5),
            ),
            collect=dict(n_sample=64, noise_sigma=0.1),
            eval=dict(eval_freq=512),
            other=dict(log_freq=1024, replay_buffer=dict(replay_buffer_size=100000)),
        ),
    )
)

create_config = EasyDict(
    dict(
        env=dict(type="gymnasium"),
        env_manager=dict(type="sync"),
        policy=dict(type="td3"),
        replay_buffer=dict(type="replay"),
    )
)
