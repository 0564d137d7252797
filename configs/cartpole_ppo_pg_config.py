"""PPO-PG (PPO's clipped objective on Monte-Carlo returns of whole episodes) on CartPole-v1; trains to a greedy
evaluation of 475 (docs/rl.md has the env steps and wall time).

Train: ``ding-dist train configs/cartpole_ppo_pg_config.py`` (add ``--nproc 2`` for two processes).
``collect.n_episode`` (complete episodes per update), ``collect.n_sample`` (env steps per rollout) and
``learn.batch_size`` (minibatch) are global: with N processes each one steps ``collector_env_num / N`` envs, and
the ranks take their PPO epochs together once they hold ``n_episode`` complete episodes between them.
"""

from easydict import EasyDict

main_config = EasyDict(
    dict(
        exp_name="cartpole_ppo_pg",
        env=dict(
            id="CartPole-v1",
            collector_env_num=8,
            evaluator_env_num=5,
            n_evaluator_episode=5,
            stop_value=475,
        ),
        policy=dict(
            model=dict(hidden_sizes=[64, 64], activation="relu"),
            learn=dict(
                epoch_per_collect=4,
                batch_size=256,
                learning_rate=1e-3,
                clip_ratio=0.2,
                entropy_weight=0.01,
                grad_clip_norm=0.5,
            ),
            collect=dict(n_episode=8, n_sample=256, discount_factor=0.99),
            eval=dict(eval_freq=4096),
        ),
    )
)

create_config = EasyDict(
    dict(
        env=dict(type="gymnasium"),
        env_manager=dict(type="sync"),
        policy=dict(type="ppo_pg"),
    )
)
