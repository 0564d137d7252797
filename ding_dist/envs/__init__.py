"""Environment creation: gymnasium (vector) envs with per-rank seeds and an old-gym adapter."""

from ding_dist.envs.env import (
    ENV_MANAGERS,
    OldGymAdapter,
    close_vec_env,
    ensure_gymnasium,
    env_seeds,
    make_env,
    make_vec_env,
    reset_one,
)
from ding_dist.envs.restarting import EnvCrashError, RestartingVectorEnv

__all__ = [
    "ENV_MANAGERS",
    "EnvCrashError",
    "OldGymAdapter",
    "RestartingVectorEnv",
    "close_vec_env",
    "ensure_gymnasium",
    "env_seeds",
    "make_env",
    "make_vec_env",
    "reset_one",
]
