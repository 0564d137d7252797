"""Training pipelines: compile the config once, open the experiment, run the loop this rank's role needs.

The public API (:func:`train`, :func:`serial_pipeline`, :func:`serial_pipeline_onpolicy`, :func:`evaluate`,
:func:`load_config`, :func:`default_exp_dir`, :func:`holds_run`). The path of a run, top to bottom:

- :func:`~ding_dist.config.load_config`: the config compiled, once per process (a compiled config passes as it is);
- :class:`~ding_dist.entry.experiment.Experiment`: that config, its folder and lock, its roles;
- one loop of :mod:`ding_dist.entry.loops`: data-parallel (every rank collects and learns; the default), or an
  actor or a learner of the actor-learner mode (``actor_learner.actors > 0``, ``ding-dist train --actors N
  --learners M``); each composes the services of :mod:`ding_dist.entry.services` it uses (checkpointing with
  resume, metrics, evaluation, the guarded context of failures).

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

import logging
import os
from collections.abc import Sequence
from typing import Any

from ding_dist.comm.heartbeat import heartbeat_running, heartbeat_scope
from ding_dist.config import ConfigSource, load_config
from ding_dist.entry.exp_folder import default_exp_dir, holds_run
from ding_dist.entry.experiment import DEFAULT_HEALTH_TIMEOUT_S, Experiment
from ding_dist.entry.services.evaluation import evaluate
from ding_dist.entry.services.failures import sigterm_exits
from ding_dist.entry.services.summary import run_summary
from ding_dist.policy import get_policy_cls
from ding_dist.utils.logging import get_logger

__all__ = [
    "default_exp_dir",
    "evaluate",
    "holds_run",
    "load_config",
    "loop_for",
    "serial_pipeline",
    "serial_pipeline_onpolicy",
    "train",
]

logger = logging.getLogger(__name__)


def _show_logs() -> None:
    """A script that set up no logging sees the run's INFO lines on rank 0 (evaluations, folder, summary), as the CLI
    shows them; one that configured ``logging`` keeps its own handlers."""
    if not logging.getLogger("ding_dist").handlers and not logging.getLogger().handlers:
        get_logger("ding_dist")


def loop_for(exp: Experiment) -> type:
    """The loop this rank runs: :class:`DataParallelLoop`, or its role's in an actor-learner run (learner, actor,
    inference).

    Example::

        loop_for(exp)(exp).run()
    """
    if exp.roles is None and (exp.cfg.get("pbt") or {}).get("population", 1) > 1:  # a population of members
        from ding_dist.entry.loops.pbt import PopulationLoop

        return PopulationLoop
    if exp.roles is None:  # each loop imported when a rank runs it: the others are not needed
        from ding_dist.entry.loops.data_parallel import DataParallelLoop

        return DataParallelLoop
    if exp.roles.is_inference(exp.rank):
        from ding_dist.entry.loops.inference_loop import InferenceLoop

        return InferenceLoop
    if exp.roles.is_learner(exp.rank):
        from ding_dist.entry.loops.learner_loop import LearnerLoop

        return LearnerLoop
    from ding_dist.entry.loops.actor import ActorLoop

    return ActorLoop


def train(
    config: ConfigSource,
    *,
    seed: int | None = None,
    overrides: Sequence[str] = (),
    exp_dir: str | os.PathLike | None = None,
    max_env_steps: int | None = None,
    resume: str | os.PathLike | None = None,
    health_timeout: float = DEFAULT_HEALTH_TIMEOUT_S,
    on_policy: bool | None = None,
    log_summary: bool = True,
) -> dict[str, Any]:
    """Train the policy a config names, with the loop its mode and this rank's role need; returns the result.

    ``config``: a config file's path or a shipped config's name, a ``(main_config, create_config)`` tuple, or a
    config :func:`load_config` compiled (then ``seed`` and ``overrides`` were given to it, and it is not compiled
    again). ``seed``: run seed (None:
    the config's ``seed``, else 0). ``overrides``: ``"key.path=value"`` strings. ``exp_dir``: experiment folder
    (default ``runs/<exp_name>``; with ``resume`` set, that folder). ``max_env_steps``: stop after this many global
    env steps. ``resume``: an experiment folder whose newest checkpoint to continue from (in workers restarted by
    torchrun, ``TORCHELASTIC_RESTART_COUNT > 0``, the newest complete checkpoint of ``exp_dir`` wins when there is
    one). ``health_timeout``: seconds the health checks before each evaluation and checkpoint wait for every rank
    before raising ``DeadRankError``. ``on_policy``: when given, the policy must be of that kind (the
    ``serial_pipeline*`` functions say which they run). ``log_summary``: log the run's closing lines (what it
    trained, why it stopped, its checkpoints, the commands to run next) on rank 0; a script that configured no
    logging gets the library's INFO lines on stderr. While it runs in the main thread, SIGTERM raises
    ``SystemExit(143)``. The result (also in ``<exp_dir>/result.json``) has ``env_steps, train_iters, episodes,
    best_eval_return, last_eval_return, eval_history, world_size, wall_time_s, segment_wall_time_s, stopped_by,
    exp_dir, checkpoint`` (``checkpoint``: the ``last`` and ``best`` files written).

    Example::

        result = train("configs/cartpole_dqn_config.py", seed=1, overrides=["env.collector_env_num=4"])
    """
    _show_logs()
    cfg = load_config(config, seed=seed, overrides=overrides)  # compiled once per process: a compiled one passes
    policy_type = cfg.create_config.policy.type
    if on_policy is not None and get_policy_cls(policy_type).on_policy != on_policy:
        want = "serial_pipeline" if on_policy else "serial_pipeline_onpolicy"
        raise ValueError(f"policy type {policy_type!r} needs {want}; train() picks it")
    with sigterm_exits(), heartbeat_scope():  # a frozen rank is found in seconds (docs/reliability.md)
        with Experiment.open(
            cfg, exp_dir=exp_dir, resume=resume, max_env_steps=max_env_steps, health_timeout=health_timeout
        ) as exp:
            loop = loop_for(exp)(exp)  # imports, envs, networks, resume: judged with the heartbeat's start-up grace
            heartbeat_running()
            result = loop.run()
    if log_summary and exp.rank == 0:
        for line in run_summary(result):
            logger.info("%s", line)
    return result


def serial_pipeline(
    config: ConfigSource,
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
    return train(config, on_policy=False, health_timeout=health_timeout, **options)


def serial_pipeline_onpolicy(
    config: ConfigSource,
    *,
    seed: int | None = None,
    overrides: Sequence[str] = (),
    exp_dir: str | os.PathLike | None = None,
    max_env_steps: int | None = None,
    resume: str | os.PathLike | None = None,
    health_timeout: float = DEFAULT_HEALTH_TIMEOUT_S,
) -> dict[str, Any]:
    """On-policy training (PPO, IMPALA): collect a fresh rollout each iteration and learn on it.

    Arguments as :func:`train`. Example::

        result = serial_pipeline_onpolicy("configs/cartpole_ppo_config.py", seed=0, max_env_steps=50_000)
    """
    options = dict(seed=seed, overrides=overrides, exp_dir=exp_dir, max_env_steps=max_env_steps, resume=resume)
    return train(config, on_policy=True, health_timeout=health_timeout, **options)
