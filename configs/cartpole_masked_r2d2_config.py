"""R2D2 (Kapturowski et al. 2019) on CartPole-v1 with the velocities masked, to a greedy evaluation of 475.

The env (:mod:`ding_dist.envs.masked`) observes the cart position and the pole angle only: a memoryless DQN stays
far below 500 (see docs/results/learning_parity.md), the LSTM recovers the velocities from the history.

Train: ``ding-dist train configs/cartpole_masked_r2d2_config.py`` (one process; ``--actors 1 --learners 1`` for an actor
and a learner). An LSTM Q-network (an MLP encoder, an LSTM, a dueling head) acts with its recurrent state carried
across steps and reset at episode ends; the replay stores sequences of ``seq_len`` steps (``burnin`` of them to
rebuild the state without gradient, consecutive sequences sharing ``overlap`` steps), each with the recurrent
state at its start, sampled by priority ``0.9 max|d| + 0.1 mean|d|``; targets are 5-step double-DQN returns with
value rescaling. Smaller sequences than the paper's 80/40/40 (Atari): CartPole's episodes start short.
"""

from easydict import EasyDict

main_config = EasyDict(
    dict(
        exp_name="cartpole_masked_r2d2",
        env=dict(
            id="ding_dist.envs.masked:MaskedCartPole-v1",
            collector_env_num=8,
            evaluator_env_num=5,
            n_evaluator_episode=5,
            stop_value=475,
        ),
        policy=dict(
            discount_factor=0.99,
            nstep=5,
            priority=True,
            priority_IS_weight=True,
            sequence=dict(seq_len=20, burnin=4, overlap=10),
            model=dict(hidden_sizes=[64], lstm_size=64, dueling=True),
            learn=dict(
                batch_size=32,
                learning_rate=1e-3,
                update_per_collect=8,
                learning_starts=1000,
                target_update_freq=200,
                double=True,
                loss="mse",
                grad_clip_norm=10.0,
            ),
            collect=dict(n_sample=64),
            eval=dict(eval_freq=2000),
            other=dict(
                eps=dict(type="linear", start=1.0, end=0.04, decay=8000),
                replay_buffer=dict(type="sequence", replay_buffer_size=50000, alpha=0.6, beta=0.4, anneal_step=20000),
            ),
        ),
    )
)

create_config = EasyDict(
    dict(
        env=dict(type="gymnasium"),
        env_manager=dict(type="sync"),
        policy=dict(type="r2d2"),
        replay_buffer=dict(type="replay"),
    )
)
