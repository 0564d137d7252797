"""Ape-X DQN (Horgan et al. 2018) on Atari Pong (``ALE/Pong-v5``, sticky actions off): 2 actors, 1 learner.

From ``pong_dqn_config.py`` (Nature-CNN Q-network, frames stored once: ``FrameReplayBuffer``), with Ape-X's
parts: actor ``i`` of ``N`` explores with the constant ``0.4 ** (1 + 7 i / (N - 1))`` (``other.eps_ladder``) and
sends its transitions with their first priorities, ``|3-step TD error|`` from its own copy of the networks; the
learner keeps one prioritized shard per actor (``alpha`` 0.6, ``beta`` 0.4 rising to 1 over 250k updates) and
publishes weights after every round. Double DQN, a dueling head and 3-step returns as in the paper; the paper's
scale (360 actors, batch 512, replay 2M, centered RMSProp) is cut to one machine: batch 64, Adam 1e-4, replay
1M (~7 GB), gradients clipped to norm 40, one update per 4 env steps of all actors together (as the DQN config),
the target network copied every 2500 updates. Sizes are global: each actor steps ``collector_env_num`` envs.
Train: ``ding-dist train configs/pong_apex_dqn_config.py`` (3 processes; ``--actors N --learners M`` changes
them; ``pip install -e '.[atari]'``).
"""

from easydict import EasyDict

main_config = EasyDict(
    dict(
        exp_name="pong_apex_dqn",
        env=dict(
            id="ALE/Pong-v5",
            env_kwargs=dict(repeat_action_probability=0.0),
            collector_env_num=8,
            evaluator_env_num=4,
            n_evaluator_episode=4,
            stop_value=20,
        ),
        policy=dict(
            discount_factor=0.99,
            nstep=3,
            priority=True,
            priority_IS_weight=True,
            model=dict(hidden_sizes=[512], dueling=True),  # on images: the Nature-CNN's 512-unit layer
            learn=dict(
                batch_size=64,
                learning_rate=1e-4,
                update_per_collect=16,  # per 64 env steps: one update per 4
                learning_starts=50_000,
                target_update_freq=2500,
                double=True,
                loss="huber",
                grad_clip_norm=40.0,
            ),
            collect=dict(n_sample=64),
            eval=dict(eval_freq=100_000),
            other=dict(
                log_freq=10_000,
                eps_ladder=dict(enable=True, base=0.4, alpha=7.0),
                replay_buffer=dict(replay_buffer_size=1_000_000, alpha=0.6, beta=0.4, anneal_step=250_000),
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
