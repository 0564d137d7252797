"""close_vec_env ends an AsyncVectorEnv whose step an exception interrupted half-way."""

from __future__ import annotations

import threading

import gymnasium as gym
import numpy as np

from ding_dist.envs import close_vec_env


def _half_answered_step() -> gym.vector.AsyncVectorEnv:
    """The state SIGTERM leaves inside ``step_wait`` after worker 0 answered and before worker 1 did."""
    venv = gym.vector.AsyncVectorEnv([lambda: gym.make("CartPole-v1")] * 2)
    venv.reset(seed=0)
    venv.step_async(np.zeros(2, dtype=np.int64))
    venv.parent_pipes[0].recv()  # worker 0's answer is taken; gymnasium still waits for both
    return venv


def _closes_within(close, venv, seconds: float) -> bool:
    done = threading.Event()
    threading.Thread(target=lambda: (close(venv), done.set()), daemon=True).start()
    return done.wait(seconds)


def test_close_vec_env_terminates_workers_of_a_half_answered_step():
    venv = _half_answered_step()
    assert _closes_within(close_vec_env, venv, 15)
    assert [p.is_alive() for p in venv.processes] == [False, False]
