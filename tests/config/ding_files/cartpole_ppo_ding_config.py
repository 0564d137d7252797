"""A CartPole PPO config in DI-engine's dialect (DI-engine's keys and layout), written for ding_dist's tests."""

from easydict import EasyDict

ppo_config = dict(
    exp_name="ding_cartpole_ppo",
    env=dict(collector_env_num=8, evaluator_env_num=4, n_evaluator_episode=4, stop_value=195),
    policy=dict(
        cuda=False,
        action_space="discrete",
        model=dict(
            obs_shape=4,
            action_shape=2,
            action_space="discrete",
            encoder_hidden_size_list=[64, 64],
            actor_head_hidden_size=64,
            critic_head_hidden_size=64,
        ),
        learn=dict(
            epoch_per_collect=4,
            batch_size=128,
            learning_rate=0.002,
            value_weight=0.5,
            entropy_weight=0.005,
            clip_ratio=0.2,
            learner=dict(hook=dict(save_ckpt_after_iter=20)),
        ),
        collect=dict(n_sample=512, unroll_len=1, discount_factor=0.99, gae_lambda=0.95),
        eval=dict(evaluator=dict(eval_freq=4)),
    ),
)
ppo_config = EasyDict(ppo_config)
main_config = ppo_config

ppo_create_config = EasyDict(
    dict(
        env=dict(type="cartpole", import_names=["dizoo.classic_control.cartpole.envs.cartpole_env"]),
        env_manager=dict(type="base"),
        policy=dict(type="ppo"),
    )
)
create_config = ppo_create_config

if __name__ == "__main__":  # how DI-engine runs it; ding-dist never executes this block
    from ding.entry import serial_pipeline_onpolicy

    serial_pipeline_onpolicy((main_config, create_config), seed=0)
