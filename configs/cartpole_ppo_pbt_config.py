"""PPO on CartPole-v1 as a population of 4 members (population-based training, docs/pbt.md).

Train: ``ding-dist train cartpole_ppo_pbt --nproc 4`` (one process per member; ``--nproc 8`` gives each member two).
Each member starts from its own draw of the learning rate, entropy weight and clip ratio; every 2048 env steps the
worst member copies the best one's weights, optimizer state and hyperparameters and perturbs the hyperparameters
(x0.8 or x1.2, within the bounds). The population stops when a member's evaluation at an exploit step reaches 475.
The run folder holds ``member<i>/`` (each member's logs and checkpoints), ``lineage.jsonl`` (who copied whom, with
the hyperparameters before and after) and ``ckpt/best.pt`` (the best member at the end).
"""

from easydict import EasyDict

main_config = EasyDict(
    dict(
        exp_name="cartpole_ppo_pbt",
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
                epoch_per_collect=20,
                batch_size=256,
                learning_rate=1e-3,
                clip_ratio=0.2,
                value_weight=0.5,
                entropy_weight=0.0,
                adv_norm=True,
                grad_clip_norm=0.5,
            ),
            collect=dict(n_sample=256, discount_factor=0.98, gae_lambda=0.8),
            eval=dict(eval_freq=2048),
        ),
        pbt=dict(
            population=4,
            interval=2048,
            quantile=0.25,
            hyperparams={
                "learn.learning_rate": dict(min=1e-4, max=3e-3, log=True),
                "learn.entropy_weight": dict(min=0.0, max=0.02),
                "learn.clip_ratio": dict(min=0.1, max=0.3),
            },
            seed=0,
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
