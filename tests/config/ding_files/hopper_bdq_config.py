"""DI-engine's dizoo/mujoco/config/hopper_bdq_config.py: its keys and values, unchanged."""

from easydict import EasyDict

hopper_bdq_config = dict(
    exp_name="hopper_bdq_seed0",
    env=dict(
        env_id="Hopper-v3",
        norm_reward=dict(
            use_norm=False,
        ),
        collector_env_num=8,
        evaluator_env_num=8,
        n_evaluator_episode=8,
        stop_value=1000000,
        action_bins_per_branch=4,
    ),
    policy=dict(
        cuda=False,
        priority=False,
        discount_factor=0.99,
        nstep=3,
        model=dict(
            obs_shape=11,
            num_branches=3,
            action_bins_per_branch=4,
            encoder_hidden_size_list=[256, 256, 128],
        ),
        learn=dict(
            ignore_done=False,
            batch_size=512,
            learning_rate=0.0003,
            target_update_freq=500,
            update_per_collect=20,
        ),
        collect=dict(
            n_sample=256,
            unroll_len=1,
        ),
        eval=dict(
            evaluator=dict(
                eval_freq=1000,
            ),
        ),
        other=dict(
            eps=dict(
                type="exp",
                start=1,
                end=0.05,
                decay=100000,
            ),
            replay_buffer=dict(
                replay_buffer_size=1000000,
            ),
        ),
    ),
)
hopper_bdq_config = EasyDict(hopper_bdq_config)
main_config = hopper_bdq_config

hopper_bdq_create_config = dict(
    env=dict(
        type="mujoco",
        import_names=["dizoo.mujoco.envs.mujoco_env"],
    ),
    env_manager=dict(
        type="subprocess",
    ),
    policy=dict(
        type="bdq",
    ),
)
hopper_bdq_create_config = EasyDict(hopper_bdq_create_config)
create_config = hopper_bdq_create_config
