"""PPO on CartPole-v1; reaches a greedy evaluation of 475 within ~6-19k env steps (seeds 0-2, 1 and 2 processes).

Train: ``ding-dist train configs/cartpole_ppo_config.py`` (add ``--nproc 2`` for two processes).
``collect.n_sample`` (the rollout per iteration) and ``learn.batch_size`` (the minibatch) are global:
with N processes each one steps ``collector_env_num / N`` envs for the same horizon (``n_sample /
collector_env_num`` steps) and uses minibatches of ``batch_size / N``.
"""

from easydict import EasyDict

main_config = EasyDict(
    dict(
        exp_name="cartpole_ppo",
        env=dict(
            id="CartPole-v1",
            collector_env_num=8,
            evaluator_env_num=5,
            n_evaluator_episode=5,
            stop_value=475,
        ),
        policy=dict(
            model=dict(hidden_sizes=[64, 64], activation="tanh"),
            learn=dict(
                epoch_per_collect=20,
                batch_size=256,
                learning_rate=1e-3,
                clip_ratio=0.2,
                value_weight=0.5,
                entropy_weight=0.0,
                adv_norm=True,
                grad_clip_norm=0.5,
            ),
            collect=dict(n_sample=256, discount_factor=0.98, gae_lambda=0.8),
            eval=dict(eval_freq=2048),
        ),
    )
)

create_config = EasyDict(
    dict(
        env=dict(type="gymnasium"),
        env_manager=dict(type="sync"),
        policy=dict(type="ppo"),
    )
)
