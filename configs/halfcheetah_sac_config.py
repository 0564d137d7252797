"""SAC on MuJoCo HalfCheetah-v5.

Reference: CleanRL ``sac_continuous_action.py`` (Haarnoja et al. 2018): replay 1M, batch 256, gamma 0.99,
tau 0.005, policy lr 3e-4, Q lr 1e-3 (also the temperature's), automatic entropy tuning, 256-256 networks,
learning starts at 5000, one update per env step. Difference: the policy is updated every step
(the reference updates it every 2nd step, twice).
Train: ``ding-dist train configs/halfcheetah_sac_config.py --max-env-steps 1000000`` (``pip install -e '.[mujoco]'``).
"""

from easydict import EasyDict

main_config = EasyDict(
    dict(
        exp_name="halfcheetah_sac",
        env=dict(
            id="HalfCheetah-v5",
            collector_env_num=1,
            evaluator_env_num=5,
            n_evaluator_episode=5,
            stop_value=None,
        ),
        policy=dict(
            discount_factor=0.99,
            nstep=1,
            model=dict(actor_hidden_sizes=[256, 256], critic_hidden_sizes=[256, 256]),
            learn=dict(
                batch_size=256,
                learning_rate_policy=3e-4,
                learning_rate_q=1e-3,
                learning_rate_alpha=1e-3,
                update_per_collect=64,
                learning_starts=5000,
                target_theta=0.005,
                alpha=0.2,
                auto_alpha=True,
            ),
            collect=dict(n_sample=64),
            eval=dict(eval_freq=10_000),
            other=dict(log_freq=5000, replay_buffer=dict(replay_buffer_size=1_000_000)),
        ),
    )
)

create_config = EasyDict(
    dict(
        env=dict(type="gymnasium"),
        env_manager=dict(type="sync"),
        policy=dict(type="sac"),
        replay_buffer=dict(type="replay"),
    )
)
