"""A CartPole DQN config for DI-engine's DDP mode (multi_gpu, cuda), in its dialect, written for ding_dist's tests.

DI-engine starts such a file with ``python -m torch.distributed.launch --nproc_per_node=2 FILE`` and needs
GPUs; ``ding-dist train FILE --nproc 2`` runs it on CPU as well.
"""

from easydict import EasyDict

ddp_config = dict(
    exp_name="ding_cartpole_dqn_ddp",
    env=dict(collector_env_num=4, evaluator_env_num=4, n_evaluator_episode=4, stop_value=195),
    policy=dict(
        multi_gpu=True,
        cuda=True,
        model=dict(obs_shape=4, action_shape=2, encoder_hidden_size_list=[64, 64], dueling=True),
        nstep=3,
        discount_factor=0.99,
        learn=dict(update_per_collect=8, batch_size=64, learning_rate=0.002, target_update_freq=50),
        collect=dict(n_sample=16),
        eval=dict(evaluator=dict(eval_freq=60)),
        other=dict(
            eps=dict(type="exp", start=0.95, end=0.05, decay=1500),
            replay_buffer=dict(replay_buffer_size=20000),
        ),
    ),
)
ddp_config = EasyDict(ddp_config)
main_config = ddp_config

ddp_create_config = EasyDict(
    dict(
        env=dict(type="cartpole", import_names=["dizoo.classic_control.cartpole.envs.cartpole_env"]),
        env_manager=dict(type="subprocess"),
        policy=dict(type="dqn"),
    )
)
create_config = ddp_create_config

if __name__ == "__main__":  # DI-engine's way; ding-dist never executes this block
    from ding.entry import serial_pipeline
    from ding.utils import DDPContext

    with DDPContext():
        serial_pipeline((main_config, create_config), seed=0)
