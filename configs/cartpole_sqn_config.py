"""SQN (soft Q-network: twin Q-networks, a Boltzmann policy on Q / alpha, a tuned temperature) on CartPole-v1, to a
greedy evaluation of 475.

Train: ``ding-dist train configs/cartpole_sqn_config.py`` (add ``--nproc 2`` for two processes).
Sizes are global, as in ``cartpole_dqn_config.py``. Acting is uniform for the first 1000 updates (``eps.decay``
2000, DI-engine's rule), then samples the Boltzmann policy.
"""

from easydict import EasyDict

main_config = EasyDict(
    dict(
        exp_name="cartpole_sqn",
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
            model=dict(hidden_sizes=[128, 128], dueling=True),
            learn=dict(
                batch_size=64,
                learning_rate=1e-3,
                update_per_collect=128,
                learning_starts=1000,
                target_theta=0.05,
                alpha=0.2,
                learning_rate_alpha=1e-3,
                target_entropy=0.2,
            ),
            collect=dict(n_sample=256),
            eval=dict(eval_freq=2048),
            other=dict(
                eps=dict(decay=2000),
                replay_buffer=dict(replay_buffer_size=100000),
            ),
        ),
    )
)

create_config = EasyDict(
    dict(
        env=dict(type="gymnasium"),
        env_manager=dict(type="sync"),
        policy=dict(type="sqn"),
        replay_buffer=dict(type="replay"),
    )
)
