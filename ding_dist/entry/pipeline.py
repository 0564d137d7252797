"""Training pipelines: collect -> learn -> log -> evaluate -> checkpoint, on one process or many.

The public API (:func:`train`, :func:`serial_pipeline`, :func:`serial_pipeline_onpolicy`, :func:`evaluate`,
:func:`load_config`, :func:`default_exp_dir`, :func:`holds_run`); the parts live in one module each:

- :mod:`~ding_dist.entry.experiment`: config, experiment folder, building the policy;
- :mod:`~ding_dist.entry.run_setup`: a run's setup and state (envs, policy, workers, writer), shared by
  every mode, with :mod:`~ding_dist.entry.resume`, :mod:`~ding_dist.entry.checkpoints`,
  :mod:`~ding_dist.entry.logs`, :mod:`~ding_dist.entry.evaluation` and :mod:`~ding_dist.entry.failures`;
- the loops: :mod:`~ding_dist.entry.data_parallel` (every rank collects and learns; the default), and the
  actor-learner mode (``actor_learner.actors > 0``, ``ding-dist train --actors N --learners M``):
  :mod:`~ding_dist.entry.roles`, :mod:`~ding_dist.entry.actor_loop`, :mod:`~ding_dist.entry.learner_loop`.

The pipelines run on whatever process group the caller set up (the fake link when there is none); they
never initialize or destroy it. Failures (docs/reliability.md): a collective that fails because a peer
died or hung is re-raised as ``DeadRankError`` naming the missing rank(s) when a health check can tell;
SIGTERM becomes ``SystemExit(143)`` so envs and writers close; under torchrun with restarts
(``TORCHELASTIC_RESTART_COUNT > 0``) the run continues from the newest complete checkpoint of its
experiment folder.

Example::

    from ding_dist.entry import train
    result = train("configs/cartpole_ppo_config.py", seed=0, max_env_steps=50_000)
    result["best_eval_return"]
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from ding_dist.comm import get_rank, get_world_size
from ding_dist.comm import resolve_device as resolve_device  # noqa: F401 (callers of the former single module)
from ding_dist.comm.heartbeat import heartbeat_scope
from ding_dist.entry.data_parallel import DEBUG_CHECK_EVERY as DEBUG_CHECK_EVERY  # noqa: F401 (as above)
from ding_dist.entry.data_parallel import DataParallelRun
from ding_dist.entry.evaluation import evaluate
from ding_dist.entry.experiment import RESTART_ENV as RESTART_ENV  # noqa: F401 (as above)
from ding_dist.entry.experiment import ConfigArg, default_exp_dir, holds_run, load_config, read_any
from ding_dist.entry.experiment import restart_count as restart_count  # noqa: F401 (as above)
from ding_dist.entry.failures import DEFAULT_HEALTH_TIMEOUT_S, sigterm_exits
from ding_dist.entry.failures import EXIT_SIGTERM as EXIT_SIGTERM  # noqa: F401 (as above)
from ding_dist.entry.failures import PEER_FAILURE as PEER_FAILURE  # noqa: F401 (as above)
from ding_dist.entry.roles import Roles
from ding_dist.policy import get_policy_cls

__all__ = [
    "default_exp_dir",
    "holds_run",
    "train",
    "serial_pipeline",
    "serial_pipeline_onpolicy",
    "evaluate",
    "load_config",
]

#: The data-parallel run (its ``run`` is the loop); the actor-learner roles: ``actor_loop``, ``learner_loop``.
_Run = DataParallelRun


# ------------------------------------------------------------------------------------------ public API
def _run_class(config: ConfigArg, run_options: dict[str, Any]) -> type:
    """The class that runs this rank: ``_Run`` (data-parallel) or this rank's actor-learner role."""
    cfg = load_config(config, seed=run_options.get("seed"), overrides=run_options.get("overrides", ()))
    roles = Roles.from_config(cfg.actor_learner, get_world_size())
    if roles is None:
        return _Run
    from ding_dist.entry.actor_loop import ActorRun
    from ding_dist.entry.learner_loop import LearnerRun

    return LearnerRun if roles.is_learner(get_rank()) else ActorRun


def _run_pipeline(config: ConfigArg, **run_options: Any) -> dict[str, Any]:
    with sigterm_exits(), heartbeat_scope():  # a frozen rank is found in seconds (docs/reliability.md)
        return _run_class(config, run_options)(config, **run_options).run()


def serial_pipeline(
    config: ConfigArg,
    *,
    seed: int | None = None,
    overrides: Sequence[str] = (),
    exp_dir: str | os.PathLike | None = None,
    max_env_steps: int | None = None,
    resume: str | os.PathLike | None = None,
    health_timeout: float = DEFAULT_HEALTH_TIMEOUT_S,
) -> dict[str, Any]:
    """Off-policy training (DQN, SAC): collect into a per-rank replay buffer, learn from sampled batches.

    Arguments as :func:`train`. Example::

        result = serial_pipeline("configs/cartpole_dqn_config.py", seed=0, max_env_steps=20_000)
    """
    options = dict(seed=seed, overrides=overrides, exp_dir=exp_dir, max_env_steps=max_env_steps, resume=resume)
    return _run_pipeline(config, on_policy=False, health_timeout=health_timeout, **options)


def serial_pipeline_onpolicy(
    config: ConfigArg,
    *,
    seed: int | None = None,
    overrides: Sequence[str] = (),
    exp_dir: str | os.PathLike | None = None,
    max_env_steps: int | None = None,
    resume: str | os.PathLike | None = None,
    health_timeout: float = DEFAULT_HEALTH_TIMEOUT_S,
) -> dict[str, Any]:
    """On-policy training (PPO): collect a fresh rollout each iteration and learn on it.

    Arguments as :func:`train`. Example::

        result = serial_pipeline_onpolicy("configs/cartpole_ppo_config.py", seed=0, max_env_steps=50_000)
    """
    options = dict(seed=seed, overrides=overrides, exp_dir=exp_dir, max_env_steps=max_env_steps, resume=resume)
    return _run_pipeline(config, on_policy=True, health_timeout=health_timeout, **options)


def train(
    config: ConfigArg,
    *,
    seed: int | None = None,
    overrides: Sequence[str] = (),
    exp_dir: str | os.PathLike | None = None,
    max_env_steps: int | None = None,
    resume: str | os.PathLike | None = None,
    health_timeout: float = DEFAULT_HEALTH_TIMEOUT_S,
) -> dict[str, Any]:
    """Train the policy a config names, with the pipeline its kind needs; returns the result dict.

    ``config``: path of a Python config file or a ``(main_config, create_config)`` tuple. ``seed``:
    run seed (None: the config's ``seed``, else 0). ``overrides``: ``"key.path=value"`` strings.
    ``exp_dir``: experiment folder (default ``runs/<exp_name>``; with ``resume`` set, that folder).
    ``max_env_steps``: stop after this many global env steps. ``resume``: an experiment folder whose
    newest checkpoint to continue from (in workers restarted by torchrun, ``TORCHELASTIC_RESTART_COUNT > 0``,
    the newest complete checkpoint of ``exp_dir`` wins when there is one). ``health_timeout``: seconds
    the health checks before each evaluation and checkpoint wait for every rank before raising
    ``DeadRankError``. While it runs in the main thread, SIGTERM raises ``SystemExit(143)``. The result
    (also in ``<exp_dir>/result.json``) has ``env_steps, train_iters, episodes, best_eval_return,
    last_eval_return, eval_history, world_size, wall_time_s, stopped_by, exp_dir``.

    Example::

        result = train("configs/cartpole_dqn_config.py", seed=1, overrides=["env.collector_env_num=4"])
    """
    main, create = read_any(config)
    policy_cls = get_policy_cls((create.get("policy") or {}).get("type"))
    options = dict(seed=seed, overrides=overrides, exp_dir=exp_dir, max_env_steps=max_env_steps, resume=resume)
    return _run_pipeline((main, create), on_policy=policy_cls.on_policy, health_timeout=health_timeout, **options)
