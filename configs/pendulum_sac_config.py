"""SAC on Pendulum-v1; reaches a greedy evaluation of -200 within 30k env steps (see docs/sac.md).

Train: ``ding-dist train configs/pendulum_sac_config.py`` (add ``--nproc 2`` for two processes).
Sizes are global: with N processes each one steps ``collector_env_num / N`` envs (``n_sample / N`` steps) per
iteration and learns on ``batch_size / N`` samples per update, ``update_per_collect`` updates per iteration, so the
update-to-data ratio ``update_per_collect / n_sample`` and the global batch do not change with N.
"""

from easydict import EasyDict

main_config = EasyDict(
    dict(
        exp_name="pendulum_sac",
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
            model=dict(actor_hidden_sizes=[64, 64], critic_hidden_sizes=[64, 64]),
            learn=dict(
                batch_size=128,
                learning_rate_policy=3e-3,
                learning_rate_q=3e-3,
                learning_rate_alpha=1e-3,
                update_per_collect=64,
                learning_starts=1000,
                target_theta=0.02,
                alpha=0.2,
                auto_alpha=True,
            ),
            collect=dict(n_sample=64),
            eval=dict(eval_freq=512),
            other=dict(log_freq=1024, replay_buffer=dict(replay_buffer_size=100000)),
        ),
    )
)

create_config = EasyDict(
    dict(
        env=dict(type="gymnasium"),
        env_manager=dict(type="sync"),
        policy=dict(type="sac"),
        replay_buffer=dict(type="replay"),
    )
)
