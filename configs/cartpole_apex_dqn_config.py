"""Ape-X DQN (Horgan et al. 2018) on CartPole-v1: 2 actors, 1 learner, to a greedy evaluation of 475.

Train: ``ding-dist train configs/cartpole_apex_dqn_config.py`` (3 processes: ``actor_learner`` below; change
them with ``--actors N --learners M``). Double DQN with a dueling head and 3-step returns; actor ``i`` of ``N``
explores with the constant ``0.4 ** (1 + 7 i / (N - 1))`` (``other.eps_ladder``) and computes its transitions'
first priorities, ``|3-step TD error|`` from its own copy of the networks, which it sends with its chunks; the
learner keeps one prioritized shard per actor (``priority``, ``priority_IS_weight``; ``alpha`` 0.6, ``beta``
0.4 rising to 1) and publishes weights after every round. Sizes are global, as in ``cartpole_dqn_config.py``.
"""

from easydict import EasyDict

main_config = EasyDict(
    dict(
        exp_name="cartpole_apex_dqn",
        env=dict(
            id="CartPole-v1",
            collector_env_num=8,
            evaluator_env_num=5,
            n_evaluator_episode=5,
            stop_value=475,
        ),
        policy=dict(
            discount_factor=0.99,
            nstep=3,
            priority=True,
            priority_IS_weight=True,
            model=dict(hidden_sizes=[128, 128], dueling=True),
            learn=dict(
                batch_size=64,
                learning_rate=2.3e-3,
                update_per_collect=128,
                learning_starts=1000,
                target_update_freq=128,
                double=True,
                loss="huber",
                grad_clip_norm=10.0,
            ),
            collect=dict(n_sample=256),
            eval=dict(eval_freq=2048),
            other=dict(
                eps_ladder=dict(enable=True, base=0.4, alpha=7.0),
                replay_buffer=dict(replay_buffer_size=100000, alpha=0.6, beta=0.4, anneal_step=20000),
            ),
        ),
        actor_learner=dict(actors=2, learners=1),
    )
)

create_config = EasyDict(
    dict(
        env=dict(type="gymnasium"),
        env_manager=dict(type="sync"),
        policy=dict(type="dqn"),
        replay_buffer=dict(type="replay"),
    )
)
