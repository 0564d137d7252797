"""Off-policy PPO on CartPole-v1; trains to a greedy evaluation of 475 (docs/rl.md has the env steps and wall time).

Train: ``ding-dist train configs/cartpole_ppo_offpolicy_config.py`` (add ``--nproc 2`` for two processes).
Each rollout of ``collect.n_sample`` env steps (global) gets its GAE advantages at collection and goes into a replay
of ``replay_buffer_size`` samples; ``update_per_collect`` clipped PPO steps on ``batch_size`` samples drawn from it
follow (both global: N processes each keep and draw 1/N).
"""

from easydict import EasyDict

main_config = EasyDict(
    dict(
        exp_name="cartpole_ppo_offpolicy",
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
                update_per_collect=8,
                batch_size=64,
                learning_rate=1e-3,
                clip_ratio=0.2,
                value_weight=0.5,
                entropy_weight=0.01,
                adv_norm=True,
            ),
            collect=dict(n_sample=128, discount_factor=0.99, gae_lambda=0.95),
            eval=dict(eval_freq=4096),
            other=dict(replay_buffer=dict(replay_buffer_size=2048)),
        ),
    )
)

create_config = EasyDict(
    dict(
        env=dict(type="gymnasium"),
        env_manager=dict(type="sync"),
        policy=dict(type="ppo_offpolicy"),
    )
)
