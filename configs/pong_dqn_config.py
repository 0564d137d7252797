"""DQN on Atari Pong (``ALE/Pong-v5``, sticky actions off as in ``PongNoFrameskip-v4``), Nature-CNN Q-network.

Reference: CleanRL ``dqn_atari.py`` (Mnih et al. 2015 hyperparameters): replay 1M, batch 32, lr 1e-4 (Adam),
gamma 0.99, one update per 4 env steps, target copy every 1000 env steps (= 250 updates), epsilon 1 -> 0.01
over the first 1M env steps, learning starts at 80k, MSE loss, no double DQN.
Difference: gradients are clipped to norm 10 (this library's DQN default; the reference does not clip).
The replay stores each 84x84 frame once (``FrameReplayBuffer``, ~7.1 kB per transition: ~7 GB for 1M).
Train: ``ding-dist train configs/pong_dqn_config.py`` (``pip install -e '.[atari]'``).
"""

from easydict import EasyDict

main_config = EasyDict(
    dict(
        exp_name="pong_dqn",
        env=dict(
            id="ALE/Pong-v5",
            env_kwargs=dict(repeat_action_probability=0.0),
            collector_env_num=4,
            evaluator_env_num=4,
            n_evaluator_episode=4,
            stop_value=20,
        ),
        policy=dict(
            discount_factor=0.99,
            nstep=1,
            model=dict(hidden_sizes=[512], dueling=False),  # on images: the Nature-CNN's 512-unit layer
            learn=dict(
                batch_size=32,
                learning_rate=1e-4,
                update_per_collect=1,
                learning_starts=80_000,
                target_update_freq=250,
                double=False,
                loss="mse",
            ),
            collect=dict(n_sample=4),
            eval=dict(eval_freq=100_000),
            other=dict(
                log_freq=10_000,
                eps=dict(type="linear", start=1.0, end=0.01, decay=1_000_000),
                replay_buffer=dict(replay_buffer_size=1_000_000),
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
