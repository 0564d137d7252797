"""BDQ (branching dueling Q-network: the torque discretized into 11 values) on Pendulum-v1, to a greedy evaluation
of -250 (DI-engine's stop value for its own BDQ file).

Train: ``ding-dist train configs/pendulum_bdq_config.py`` (add ``--nproc 2`` for two processes).
Sizes are global, as in ``pendulum_td3_config.py``.
"""

from easydict import EasyDict

main_config = EasyDict(
    dict(
        exp_name="pendulum_bdq",
        env=dict(
            id="Pendulum-v1",
            collector_env_num=4,
            evaluator_env_num=10,
            n_evaluator_episode=10,
            stop_value=-250,
        ),
        policy=dict(
            discount_factor=0.97,
            nstep=1,
            model=dict(hidden_sizes=[128, 128], action_bins_per_branch=11, head_layer_num=1),
            learn=dict(
                batch_size=128,
                learning_rate=1e-3,
                update_per_collect=64,
                learning_starts=1000,
                target_update_freq=100,
                grad_clip_norm=10.0,
            ),
            collect=dict(n_sample=64),
            eval=dict(eval_freq=1024),
            other=dict(
                log_freq=1024,
                eps=dict(type="linear", start=1.0, end=0.05, decay=10000),
                replay_buffer=dict(replay_buffer_size=100000),
            ),
        ),
    )
)

create_config = EasyDict(
    dict(
        env=dict(type="gymnasium"),
        env_manager=dict(type="sync"),
        policy=dict(type="bdq"),
        replay_buffer=dict(type="replay"),
    )
)
