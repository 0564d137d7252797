"""The experiment: reading and compiling a config, choosing its folder, and building its parts.

Shared by every training mode (data-parallel, actor-learner) and by ``evaluate``. The config is compiled
against the defaults of its env, its policy and the ``actor_learner`` section (:mod:`~ding_dist.entry.roles`).

Example::

    cfg = load_config("configs/cartpole_dqn_config.py", overrides=["policy.learn.batch_size=128"])
    exp_dir = default_exp_dir(cfg.exp_name)  # runs/cartpole_dqn, or a timestamped folder if that one holds a run
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import gymnasium as gym
import torch
from easydict import EasyDict

from ding_dist.comm import resolve_device
from ding_dist.config import compile_config, read_config, translate_if_ding
from ding_dist.entry.roles import actor_learner_default_config, check_actor_learner_config
from ding_dist.envs import env_default_config
from ding_dist.policy import Policy, get_policy_cls
from ding_dist.policy.base import check_sync_config

__all__ = [
    "ConfigArg",
    "RESTART_ENV",
    "build_policy",
    "default_exp_dir",
    "env_manager",
    "holds_run",
    "load_config",
    "read_any",
    "restart_count",
]

logger = logging.getLogger(__name__)

ConfigArg = str | os.PathLike | tuple[Mapping, Mapping]

#: Set by torchrun's elastic agent in the workers it starts: 0 at first, then 1, 2, ... after restarts.
RESTART_ENV = "TORCHELASTIC_RESTART_COUNT"


def read_any(config: ConfigArg) -> tuple[EasyDict, EasyDict]:
    """``(main_config, create_config)`` of a config file path or of such a tuple.

    Example::

        main, create = read_any("configs/cartpole_dqn_config.py")
    """
    if isinstance(config, (str, os.PathLike)):
        return read_config(config)
    if isinstance(config, tuple) and len(config) == 2:
        main, create = config
        return EasyDict(main), EasyDict(create or {})
    raise TypeError(f"config must be a path to a Python config file or (main_config, create_config), got {config!r}")


def load_config(config: ConfigArg, *, seed: int | None = None, overrides: Sequence[str] = ()) -> EasyDict:
    """Read and compile a config against the defaults of its env and policy (global, not per-rank, sizes).

    Example::

        cfg = load_config("configs/cartpole_dqn_config.py", overrides=["policy.learn.batch_size=128"])
    """
    main, create = read_any(config)
    main, create, overrides = translate_if_ding(main, create, overrides, config)  # DI-engine files: ding_dialect.py
    policy_type = (create.get("policy") or {}).get("type")
    if policy_type is None:
        raise ValueError("create_config.policy.type is missing; set it to one of the registered policies")
    policy_cls = get_policy_cls(policy_type)
    defaults = {
        "env": env_default_config(),
        "policy": policy_cls.default_config(),
        "actor_learner": actor_learner_default_config(),
    }
    cfg = compile_config(main, create, defaults=defaults, seed=seed, overrides=overrides)
    check_sync_config(cfg.policy.sync)
    check_actor_learner_config(cfg.actor_learner)
    return cfg


def holds_run(folder: str | os.PathLike) -> bool:
    """True when ``folder`` already holds a training run (a checkpoint or a result.json).

    Example::

        holds_run("runs/cartpole_dqn")
    """
    folder = Path(folder)
    return (folder / "result.json").exists() or any((folder / "ckpt").glob("ckpt_*.pt"))


def default_exp_dir(exp_name: str) -> Path:
    """``runs/<exp_name>``, or ``runs/<exp_name>_<yymmdd_HHMMSS>`` when that folder already holds a run.

    Example::

        default_exp_dir("cartpole_dqn")  # Path("runs/cartpole_dqn") the first time
    """
    base = Path("runs") / exp_name
    if not holds_run(base):
        return base
    stamped = base.with_name(f"{base.name}_{time.strftime('%y%m%d_%H%M%S')}")
    logger.info("%s already holds a run; this one goes to %s (resume=%s continues the old one)", base, stamped, base)
    return stamped


def restart_count() -> int:
    """How many times torchrun's elastic agent has restarted this job's workers (0 outside torchrun).

    Example::

        restart_count()  # 0 in a plain process; 1 in the workers of the first restart
    """
    raw = os.environ.get(RESTART_ENV, "0") or "0"
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"environment variable {RESTART_ENV} must be an integer, got {raw!r}") from None


def env_manager(cfg: EasyDict) -> str:
    """``create_config.env_manager.type`` (``sync`` when unset)."""
    return ((cfg.create_config.get("env_manager") or {}).get("type")) or "sync"


def cpu_cores() -> int:
    """CPU cores this process may run on (its affinity where the OS has one)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def default_threads(obs_space: gym.Space | None = None) -> None:
    """Torch threads of this process: ``OMP_NUM_THREADS`` when set (torchrun sets 1), else one, or for
    image observations (a convolutional encoder) the CPU cores shared by this machine's processes.

    RL networks on vectors are small: extra intra-op threads only add synchronization, and on a busy machine
    they spin against other processes (measured: a 1-process CartPole PPO run 9x slower with 2 threads on a
    loaded 2-core machine). A Nature-CNN's convolutions do use them (Pong PPO on 2 cores, 1 process: +46-54 %
    env steps/s with 2 threads, docs/benchmarks.md section 8).
    """
    asked = os.environ.get("OMP_NUM_THREADS", "")
    if asked.isdigit() and int(asked) >= 1:
        threads = int(asked)
    elif obs_space is not None and len(getattr(obs_space, "shape", None) or ()) == 3:
        threads = max(1, cpu_cores() // max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1"))))
    else:
        threads = 1
    if torch.get_num_threads() != threads:  # also a rank forked from a launcher that imported torch earlier
        if threads > 1 and not asked:
            logger.info(f"using {threads} torch threads for a convolutional network (OMP_NUM_THREADS changes it)")
        torch.set_num_threads(threads)


def build_policy(
    cfg: EasyDict, obs_space: gym.Space, action_space: gym.Space, device: str | torch.device | None = None
) -> Policy:
    """The config's policy on ``device`` (default ``policy.device``), with the run seed's initial parameters.

    Example::

        policy = build_policy(cfg, venv.single_observation_space, venv.single_action_space)
    """
    policy_cls = get_policy_cls(cfg.create_config.policy.type)
    # Same seed on every rank: identical initial parameters (the sync engine also broadcasts rank 0's).
    torch.manual_seed(cfg.seed)
    device = resolve_device(cfg.policy.get("device", "auto") if device is None else device)
    if device.type == "cuda":  # the rank's GPU becomes its current one (ranks on the CPU never touch CUDA)
        torch.cuda.set_device(device)
    return policy_cls(cfg.policy, obs_space, action_space, device)
