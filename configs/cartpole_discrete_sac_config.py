"""Discrete SAC (a categorical policy, twin Q-values of every action, the soft value as an exact expectation over
the policy, a tuned temperature) on CartPole-v1, to a greedy evaluation of 475.

Train: ``ding-dist train configs/cartpole_discrete_sac_config.py`` (add ``--nproc 2`` for two processes).
Sizes are global, as in ``cartpole_dqn_config.py``. The entropy target is DI-engine's default, ``-n_actions``, so
the temperature only falls, from 0.2, at the pace of its learning rate.
"""

from easydict import EasyDict

main_config = EasyDict(
    dict(
        exp_name="cartpole_discrete_sac",
        env=dict(
            id="CartPole-v1",
            collector_env_num=8,
            evaluator_env_num=5,
            n_evaluator_episode=5,
            stop_value=475,
        ),
        policy=dict(
            discount_factor=0.99,
            nstep=1,
            model=dict(actor_hidden_sizes=[128, 128], critic_hidden_sizes=[128, 128]),
            learn=dict(
                batch_size=64,
                learning_rate_q=1e-3,
                learning_rate_policy=1e-3,
                learning_rate_alpha=3e-4,
                update_per_collect=128,
                learning_starts=1000,
                target_theta=0.01,
                alpha=0.2,
                auto_alpha=True,
            ),
            collect=dict(n_sample=256),
            eval=dict(eval_freq=2048),
            other=dict(replay_buffer=dict(replay_buffer_size=100000)),
        ),
    )
)

create_config = EasyDict(
    dict(
        env=dict(type="gymnasium"),
        env_manager=dict(type="sync"),
        policy=dict(type="discrete_sac"),
        replay_buffer=dict(type="replay"),
    )
)
