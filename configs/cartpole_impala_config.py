"""IMPALA (V-trace actor-critic) on CartPole-v1, made for the actor-learner mode; reaches a greedy evaluation
of 475 within 8-16k env steps in one process and 8-43k with 1 or 2 actors and a learner (seeds 0-3).

Train: ``ding-dist train configs/cartpole_impala_config.py --actors 2 --learners 1`` (or in one process,
where V-trace sees no lag). ``collect.n_sample`` is the env steps each learner round consumes (one chunk
per learner), ``learn.batch_size`` the global minibatch (whole env columns of every learner's chunk).
"""

from easydict import EasyDict

main_config = EasyDict(
    dict(
        exp_name="cartpole_impala",
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
                epoch_per_collect=4,
                batch_size=128,
                learning_rate=5e-4,
                value_weight=0.5,
                entropy_weight=0.0,
                grad_clip_norm=0.5,
            ),
            collect=dict(n_sample=256, discount_factor=0.98),
            eval=dict(eval_freq=2048),
        ),
    )
)

create_config = EasyDict(
    dict(
        env=dict(type="gymnasium"),
        env_manager=dict(type="sync"),
        policy=dict(type="impala"),
    )
)
