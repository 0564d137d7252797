"""FQF (fully parameterized quantile function: 32 fractions proposed per state) on CartPole-v1, to a greedy
evaluation of 475.

Train: ``ding-dist train configs/cartpole_fqf_config.py`` (add ``--nproc 2`` for two processes).
Sizes are global, as in ``cartpole_dqn_config.py``.
"""

from easydict import EasyDict

main_config = EasyDict(
    dict(
        exp_name="cartpole_fqf",
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
            model=dict(hidden_sizes=[128, 128], head_hidden_sizes=[128], num_quantiles=32, quantile_embedding_size=64),
            learn=dict(
                batch_size=64,
                learning_rate=2.3e-3,
                learning_rate_fraction=1e-4,
                ent_coef=0.0,
                update_per_collect=128,
                learning_starts=1000,
                target_update_freq=128,
                kappa=1.0,
                grad_clip_norm=10.0,
            ),
            collect=dict(n_sample=256),
            eval=dict(eval_freq=2048),
            other=dict(
                eps=dict(type="linear", start=1.0, end=0.04, decay=8000),
                replay_buffer=dict(replay_buffer_size=100000),
            ),
        ),
    )
)

create_config = EasyDict(
    dict(
        env=dict(type="gymnasium"),
        env_manager=dict(type="sync"),
        policy=dict(type="fqf"),
        replay_buffer=dict(type="replay"),
    )
)
