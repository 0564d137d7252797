"""PPO on MuJoCo Hopper-v5.

Reference: CleanRL ``ppo_continuous_action.py``: rollout 2048 steps, 10 epochs, 32 minibatches
(``batch_size=64``), lr 3e-4, gamma 0.99, GAE lambda 0.95, clip 0.2 (also on the value loss), entropy 0,
value 0.5, grad norm 0.5, 64-64 tanh networks, observation normalization (here ``model.obs_norm``: running
statistics synchronized across ranks, clipped at 10). Differences: no learning-rate annealing and no
reward normalization.
Train: ``ding-dist train configs/hopper_ppo_config.py`` (``pip install -e '.[mujoco]'``).
"""

from easydict import EasyDict

main_config = EasyDict(
    dict(
        exp_name="hopper_ppo",
        env=dict(
            id="Hopper-v5",
            collector_env_num=1,
            evaluator_env_num=5,
            n_evaluator_episode=5,
            stop_value=3000,
        ),
        policy=dict(
            model=dict(hidden_sizes=[64, 64], activation="tanh", log_std_init=0.0, obs_norm=True),
            learn=dict(
                epoch_per_collect=10,
                batch_size=64,
                learning_rate=3e-4,
                clip_ratio=0.2,
                value_clip_ratio=0.2,
                value_weight=0.5,
                entropy_weight=0.0,
                adv_norm=True,
                grad_clip_norm=0.5,
            ),
            collect=dict(n_sample=2048, discount_factor=0.99, gae_lambda=0.95),
            eval=dict(eval_freq=20_480),
            other=dict(log_freq=2048),
        ),
    )
)

create_config = EasyDict(
    dict(
        env=dict(type="gymnasium"),
        env_manager=dict(type="sync"),
        policy=dict(type="ppo"),
    )
)
