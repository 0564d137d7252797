"""IMPALA (V-trace actor-critic) on Atari Pong (``ALE/Pong-v5``, sticky actions off), pixels through a Nature-CNN,
made for the actor-learner mode; the sizes of ``configs/pong_ppo_config.py`` (the same work per update).

8 envs x 128 steps per chunk (``n_sample=1024``), 4 epochs of 4 minibatches (``batch_size=256``: 2 whole env
columns of 128 steps each), lr 2.5e-4, gamma 0.99, value 0.5, entropy 0.01, grad norm 0.5; V-trace's
``rho_bar = c_bar = 1`` (the IMPALA paper's). The network is PPO's: a shared Nature-CNN trunk with policy and
value heads (1.69M parameters). Preprocessing (ding_dist.envs.atari) as in the PPO config.
Train: ``ding-dist train configs/pong_impala_config.py --actors 1 --learners 1`` (``pip install -e '.[atari]'``;
or in one process, where V-trace sees no lag). ``benchmarks/bench_pong_roles.py`` measures it side by side
with the PPO config and Sample Factory.
"""

from easydict import EasyDict

main_config = EasyDict(
    dict(
        exp_name="pong_impala",
        env=dict(
            id="ALE/Pong-v5",
            env_kwargs=dict(repeat_action_probability=0.0),
            collector_env_num=8,
            evaluator_env_num=4,
            n_evaluator_episode=4,
            stop_value=20,
        ),
        policy=dict(
            learn=dict(
                epoch_per_collect=4,
                batch_size=256,
                learning_rate=2.5e-4,
                value_weight=0.5,
                entropy_weight=0.01,
                grad_clip_norm=0.5,
            ),
            collect=dict(n_sample=1024, discount_factor=0.99),
            eval=dict(eval_freq=100_000),
            other=dict(log_freq=10_000),
        ),
    )
)

create_config = EasyDict(
    dict(
        env=dict(type="gymnasium"),
        env_manager=dict(type="async"),
        policy=dict(type="impala"),
    )
)
