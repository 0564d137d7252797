"""PPO on Atari Breakout (``ALE/Breakout-v5``, no sticky actions as in ``BreakoutNoFrameskip-v4``), Nature-CNN.

Reference: CleanRL ``ppo_atari.py`` (Huang et al., "The 37 implementation details of PPO"): 8 envs x 128
steps per rollout (``n_sample=1024``), 4 epochs, 4 minibatches (``batch_size=256``), lr 2.5e-4, gamma
0.99, GAE lambda 0.95, clip 0.1 (also on the value loss), entropy 0.01, value 0.5, grad norm 0.5.
Differences: no linear annealing of the learning rate and the clip range; no FIRE on reset
(the agent must learn to launch the ball).
Preprocessing (ding_dist.envs.atari): no-op reset, frame skip 4 + max-pool, 84x84 gray, 4 stacked frames;
training envs also end at a lost life and clip rewards to their sign; logged returns are the game score.
Train: ``ding-dist train configs/breakout_ppo_config.py --nproc 2`` (``pip install -e '.[atari]'``).
"""

from easydict import EasyDict

main_config = EasyDict(
    dict(
        exp_name="breakout_ppo",
        env=dict(
            id="ALE/Breakout-v5",
            env_kwargs=dict(repeat_action_probability=0.0),
            collector_env_num=8,
            evaluator_env_num=4,
            n_evaluator_episode=4,
            stop_value=400,
        ),
        policy=dict(
            learn=dict(
                epoch_per_collect=4,
                batch_size=256,
                learning_rate=2.5e-4,
                clip_ratio=0.1,
                value_clip_ratio=0.1,
                value_weight=0.5,
                entropy_weight=0.01,
                adv_norm=True,
                grad_clip_norm=0.5,
            ),
            collect=dict(n_sample=1024, discount_factor=0.99, gae_lambda=0.95),
            eval=dict(eval_freq=100_000),
            other=dict(log_freq=10_000),
        ),
    )
)

create_config = EasyDict(
    dict(
        env=dict(type="gymnasium"),
        env_manager=dict(type="async"),
        policy=dict(type="ppo"),
    )
)
