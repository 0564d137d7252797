"""ACER on CartPole-v1; trains to a greedy evaluation of 475 (docs/rl.md has the env steps and wall time).

Train: ``ding-dist train configs/cartpole_acer_config.py`` (add ``--nproc 2`` for two processes). Each env's rollout
(``collect.n_sample / collector_env_num`` steps) is cut into chunks of ``learn.unroll_len`` steps that go into a
replay of ``replay_buffer_size`` chunks; ``update_per_collect`` ACER steps on ``batch_size`` chunks drawn from it
follow (sizes global: N processes each keep and draw 1/N).
"""

from easydict import EasyDict

main_config = EasyDict(
    dict(
        exp_name="cartpole_acer",
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
                unroll_len=16,
                update_per_collect=4,
                batch_size=16,
                learning_rate_actor=5e-4,
                learning_rate_critic=5e-4,
                entropy_weight=1e-3,
                discount_factor=0.99,
                c_clip_ratio=10.0,
                trust_region=True,
                trust_region_value=1.0,
                target_theta=0.01,
            ),
            collect=dict(n_sample=128),
            eval=dict(eval_freq=4096),
            other=dict(replay_buffer=dict(replay_buffer_size=1000)),
        ),
    )
)

create_config = EasyDict(
    dict(
        env=dict(type="gymnasium"),
        env_manager=dict(type="sync"),
        policy=dict(type="acer"),
    )
)
