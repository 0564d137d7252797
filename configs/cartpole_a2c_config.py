"""A2C on CartPole-v1; trains to a greedy evaluation of 475 (docs/rl.md has the env steps and wall time).

Train: ``ding-dist train configs/cartpole_a2c_config.py`` (add ``--nproc 2`` for two processes).
``collect.n_sample`` (the rollout per iteration, one A2C step on all of it) is global: with N processes each
one steps ``collector_env_num / N`` envs for the same horizon (``n_sample / collector_env_num`` steps).
"""

from easydict import EasyDict

main_config = EasyDict(
    dict(
        exp_name="cartpole_a2c",
        env=dict(
            id="CartPole-v1",
            collector_env_num=8,
            evaluator_env_num=5,
            n_evaluator_episode=5,
            stop_value=475,
        ),
        policy=dict(
            model=dict(hidden_sizes=[64, 64], activation="tanh"),
            learn=dict(learning_rate=1e-3, value_weight=0.5, entropy_weight=0.01, adv_norm=True, grad_clip_norm=0.5),
            collect=dict(n_sample=128, discount_factor=0.99, gae_lambda=0.95),
            eval=dict(eval_freq=4096),
        ),
    )
)

create_config = EasyDict(
    dict(
        env=dict(type="gymnasium"),
        env_manager=dict(type="sync"),
        policy=dict(type="a2c"),
    )
)
