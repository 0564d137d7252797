"""D4PG (DDPG with a categorical return distribution on 51 atoms, 3-step returns, prioritized replay) on
Pendulum-v1, to a greedy evaluation of -200.

Train: ``ding-dist train configs/pendulum_d4pg_config.py`` (add ``--nproc 2`` for two processes).
Sizes are global, as in ``pendulum_td3_config.py``. The support [-400, 0] covers Pendulum's discounted returns.
"""

from easydict import EasyDict

main_config = EasyDict(
    dict(
        exp_name="pendulum_d4pg",
        env=dict(
            id="Pendulum-v1",
            collector_env_num=4,
            evaluator_env_num=10,
            n_evaluator_episode=10,
            stop_value=-200,
        ),
        policy=dict(
            discount_factor=0.99,
            nstep=3,
            priority=True,
            priority_IS_weight=True,
            model=dict(actor_hidden_sizes=[64, 64], critic_hidden_sizes=[64, 64], n_atom=51, v_min=-400.0, v_max=0.0),
            learn=dict(
                batch_size=128,
                learning_rate_actor=1e-3,
                learning_rate_critic=1e-3,
                update_per_collect=64,
                learning_starts=1000,
                target_theta=0.005,
                actor_update_freq=1,
                noise=False,
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
        policy=dict(type="d4pg"),
        replay_buffer=dict(type="replay"),
    )
)
