"""Phasic Policy Gradient (off-policy, DI-engine's ``ppg_offpolicy``) on CartPole-v1; trains to a greedy evaluation
of 475 (docs/rl.md has the env steps and wall time).

Train: ``ding-dist train configs/cartpole_ppg_config.py`` (add ``--nproc 2`` for two processes). Each rollout of
``collect.n_sample`` env steps (global) gets its GAE advantages at collection and goes into the policy ring and the
value ring; ``update_per_collect`` policy-phase steps follow, and an auxiliary phase every ``aux_freq`` of them.
"""

from easydict import EasyDict

main_config = EasyDict(
    dict(
        exp_name="cartpole_ppg",
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
                aux_freq=8,
                aux_train_epoch=2,
                aux_bc_weight=1.0,
            ),
            collect=dict(n_sample=128, discount_factor=0.99, gae_lambda=0.95),
            eval=dict(eval_freq=4096),
            other=dict(replay_buffer=dict(policy=dict(replay_buffer_size=512), value=dict(replay_buffer_size=2048))),
        ),
    )
)

create_config = EasyDict(
    dict(
        env=dict(type="gymnasium"),
        env_manager=dict(type="sync"),
        policy=dict(type="ppg_offpolicy"),
    )
)
