"""Logging a run: one packed allreduce of episode sums and learner statistics, then one TensorBoard record.

Keys: ``rollout/ep_rew_mean``, ``rollout/ep_len_mean``, ``rollout/episodes``, ``train/<name>``,
``train/learning_rate`` (``train/learning_rate_<x>`` per ``<x>_optimizer``), ``train/epsilon`` (DQN),
``time/fps``, ``time/env_steps``, ``time/train_iters`` (and ``sync/weight_drift`` under a weight-averaging
algorithm); the actor-learner learners add theirs (:mod:`~ding_dist.entry.learner_loop`).

Example::

    run.log(env_step_delta=1024, wall_start=t0, steps_at_start=0)  # every rank, at the same env step
"""

from __future__ import annotations

import time
from typing import Any

from ding_dist.sync import weight_drift
from ding_dist.worker import reduce_log

__all__ = ["LogMixin"]


class LogMixin:
    """Metric records of a run (part of ``RunSetup``)."""

    def log(self, env_step_delta: int, wall_start: float, steps_at_start: int, global_delta: int | None = None) -> None:
        """One packed allreduce: episode sums across ranks and learner statistics averaged.

        ``env_step_delta``: this rank's env steps since the last record; ``global_delta``: all ranks' (default
        ``env_step_delta * world``: every rank collected as many; under rollout preemption they differ).
        """
        returns, lengths = self.collector.pop_episodes()
        sums = {
            "episodes": len(returns),
            "ep_return_sum": sum(returns),
            "ep_length_sum": sum(lengths),
            "env_steps": env_step_delta,
        }
        out = reduce_log(sums, self.learner.pop_stats())
        expected = env_step_delta * self.world if global_delta is None else global_delta
        if int(out.pop("env_steps")) != expected:
            raise RuntimeError("ranks collected different numbers of env steps; their control flow diverged")
        self.writer.scalars(self.common_values(out, wall_start, steps_at_start), step=self.counters.env_steps)

    def common_values(self, out: dict[str, Any], wall_start: float, steps_at_start: int) -> dict[str, Any]:
        """The record shared by every mode, from ``reduce_log``'s output (its episode sums are taken out)."""
        episodes = int(out.pop("episodes"))
        ret_sum, len_sum = out.pop("ep_return_sum"), out.pop("ep_length_sum")
        self.counters.episodes += episodes
        c = self.counters
        values = dict(out)
        if episodes:
            values.update({"rollout/ep_rew_mean": ret_sum / episodes, "rollout/ep_len_mean": len_sum / episodes})
        elapsed = max(time.perf_counter() - wall_start, 1e-9)
        values.update(
            {
                "rollout/episodes": c.episodes,
                "time/fps": (c.env_steps - steps_at_start) / elapsed,
                "time/env_steps": c.env_steps,
                "time/train_iters": self.policy.train_iter,
            }
        )
        values.update(self.schedule_values())
        averaging = self._weight_averaging_models()
        if averaging:  # ranks' weights differ between averagings by design: report how far apart they are
            values["sync/weight_drift"] = max(weight_drift(m) for m in averaging)
        return values

    def schedule_values(self) -> dict[str, float]:
        """The policy's current learning rate(s) and, for DQN, exploration epsilon (the same on every rank).

        ``train/learning_rate`` for an optimizer attribute named ``optimizer``, ``train/learning_rate_<x>``
        for one named ``<x>_optimizer`` (SAC: actor, critic, alpha); ``train/epsilon`` at the current env step.
        """
        from ding_dist.policy.dqn import DQNPolicy, epsilon_schedule

        values: dict[str, float] = {}
        for name, obj in sorted(vars(self.policy).items()):
            groups = getattr(obj, "param_groups", None)
            if isinstance(groups, list) and groups and isinstance(groups[0], dict) and "lr" in groups[0]:
                suffix = "" if name == "optimizer" else "_" + name.removesuffix("_optimizer")
                values[f"train/learning_rate{suffix}"] = float(groups[0]["lr"])
        if isinstance(self.policy, DQNPolicy):
            e = self.policy.cfg.other.eps
            values["train/epsilon"] = epsilon_schedule(e.type, e.start, e.end, e.decay, self.counters.env_steps)
        return values
