"""Double DQN on Acrobot-v1 (reward -1 per step until the tip swings up; 500 steps at most).

Train: ``ding-dist train configs/acrobot_dqn_config.py`` (add ``--nproc 2`` for two processes).
Stops at a greedy evaluation mean of -100 (gymnasium's reward threshold for Acrobot-v1), typically
within 30-60k env steps.
"""

from easydict import EasyDict

main_config = EasyDict(
    dict(
        exp_name="acrobot_dqn",
        env=dict(
            id="Acrobot-v1",
            collector_env_num=8,
            evaluator_env_num=5,
            n_evaluator_episode=5,
            stop_value=-100,
        ),
        policy=dict(
            discount_factor=0.99,
            nstep=3,
            model=dict(hidden_sizes=[256, 256], dueling=True),
            learn=dict(
                batch_size=128,
                learning_rate=6.3e-4,
                update_per_collect=64,
                learning_starts=1000,
                target_update_freq=250,
                loss="huber",
                grad_clip_norm=10.0,
            ),
            collect=dict(n_sample=256),
            eval=dict(eval_freq=4096),
            other=dict(
                eps=dict(type="linear", start=1.0, end=0.1, decay=12000),
                replay_buffer=dict(replay_buffer_size=50000),
            ),
        ),
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
