"""Evaluation: greedy episodes on rank 0 during a run (the stop decision shared with the ranks that learn), and
:func:`evaluate`, a checkpoint's greedy evaluation on this process alone.

Example::

    evaluation = Evaluation(evaluator, counters, metrics, health_timeout=60.0)
    stop = evaluation()                                   # every rank that learns, at the same env step
    evaluate("configs/cartpole_dqn_config.py", "runs/cartpole_dqn", episodes=10)["mean_return"]
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ding_dist.comm import health_check
from ding_dist.config import ConfigSource, is_compiled, load_config
from ding_dist.entry.factories import build_policy, env_manager
from ding_dist.entry.services.checkpointing import BEST_FILE, load_policy_state
from ding_dist.entry.services.counters import Counters
from ding_dist.entry.services.metrics import Metrics
from ding_dist.envs import env_seeds, make_vec_env
from ding_dist.utils import CheckpointManager, load_checkpoint
from ding_dist.worker import Evaluator

__all__ = ["Evaluation", "evaluate"]

logger = logging.getLogger(__name__)


class Evaluation:
    """Evaluating during a run: a health check of ``group`` (rank 0 evaluates alone: first make sure everyone is
    alive), rank 0's greedy episodes, the result shared and recorded in the counters and metrics. ``on_best`` is
    called (on every rank, after the counters) when an evaluation beats the best return so far: the loops save the
    best checkpoint there."""

    def __init__(
        self,
        evaluator: Evaluator,
        counters: Counters,
        metrics: Metrics,
        *,
        health_timeout: float,
        group: Any = None,
        on_best: Callable[[], Any] | None = None,
    ) -> None:
        self.evaluator, self.counters, self.metrics = evaluator, counters, metrics
        self.health_timeout, self.group, self.on_best = health_timeout, group, on_best

    def __call__(self) -> bool:
        """Evaluate now; True when ``env.stop_value`` is reached."""
        health_check(self.health_timeout, group=self.group)
        mean, stop = self.evaluator.evaluate_and_share(group=self.group)
        c = self.counters
        improved = mean > c.best_eval  # the same on every rank: the mean was shared
        c.last_eval, c.best_eval = mean, max(c.best_eval, mean)
        c.eval_history.append((c.env_steps, mean))
        values = {"eval/mean_reward": mean, "eval/best_reward": c.best_eval}
        details = self.evaluator.last_result  # rank 0, the one that writes the logs
        if details and details.get("lengths"):
            lengths = details["lengths"]
            values["eval/std_reward"] = details["std_return"]
            values["eval/mean_ep_length"] = sum(lengths) / len(lengths)
        self.metrics.record(values)
        logger.info("env step %d: eval mean return %.2f (best %.2f)", c.env_steps, mean, c.best_eval)
        if improved and self.on_best is not None:
            self.on_best()
        return stop

    def at_end(self, stopped_by: str) -> str:
        """The last evaluation, unless the run stopped at its stop value or the last env step was evaluated;
        returns what stopped the run (``"stop_value"`` when this evaluation reaches it)."""
        c = self.counters
        if stopped_by != "stop_value" and (not c.eval_history or c.eval_history[-1][0] != c.env_steps):
            if self():
                return "stop_value"
        return stopped_by


def evaluate(
    config: ConfigSource,
    ckpt: str | os.PathLike,
    *,
    episodes: int = 10,
    seed: int = 0,
    replay: Callable[[Any, dict[str, Any]], Any] | None = None,
) -> dict[str, Any]:
    """Greedy evaluation of a checkpoint: a file, or an experiment folder's ``ckpt/best.pt`` (the policy of its best
    evaluation) where it has one, else its newest complete checkpoint (the one evaluated is logged).

    Runs on this process only (no collectives). Returns ``mean_return``, ``std_return``, and per episode, in
    their planned order, ``returns``, ``lengths`` and ``seeds`` (each one's reset seed), and ``checkpoint``.
    ``replay(policy, result)``, when given, is called after the episodes with the policy that played them (the
    checkpoint loaded, on its device) and the result: ``ding-dist eval --video`` plays the evaluated episodes again
    from their seeds with it, so the recording shows what was evaluated. With it, an envpool config is evaluated
    on the sync env manager (envpool cannot start an episode from a seed of its own). Example::

        evaluate("configs/cartpole_dqn_config.py", "runs/cartpole_dqn", episodes=10)["mean_return"]
    """
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    cfg = load_config(config) if is_compiled(config) else load_config(config, seed=seed)  # compiled once
    path = Path(ckpt)
    if path.is_dir():
        folder = path / "ckpt" if (path / "ckpt").is_dir() else path
        found = folder / BEST_FILE if (folder / BEST_FILE).is_file() else CheckpointManager(folder).latest()
        if found is None:
            raise FileNotFoundError(f"no loadable checkpoint in {str(folder)!r}")
        logger.info("evaluating %s", found)
        path = found
    state = load_checkpoint(path)
    manager = env_manager(cfg)
    if replay is not None and manager == "envpool":
        logger.info("evaluating on the sync env manager: envpool cannot play an episode again from its seed")
        manager = "sync"
    venv = make_vec_env(cfg.env, min(cfg.env.evaluator_env_num, episodes), manager, restarting=True)
    try:
        policy = build_policy(cfg, venv.single_observation_space, venv.single_action_space)
        load_policy_state(policy, state, path, cfg.create_config.policy.type)  # one line when it does not fit
        evaluator = Evaluator(venv, policy, episodes, env_seeds(seed, 0, "evaluator", venv.num_envs))
        result = evaluator.evaluate()
    finally:
        venv.close()
    result["checkpoint"] = str(path)
    if replay is not None:
        replay(policy, result)
    return result
