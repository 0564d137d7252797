"""A run's metric records: the TensorBoard/JSON-lines writer of the ranks that learn and the values every loop
logs.

Keys every loop writes (:meth:`Metrics.common_values`): ``rollout/ep_rew_mean``, ``rollout/ep_len_mean``,
``rollout/episodes``, ``time/fps``, ``time/env_steps``, ``time/train_iters``, ``time/wall_time_s`` (seconds of
training over the run's segments, the clock of ``result.json``'s ``wall_time_s``: pauses before a resume left out),
``train/learning_rate``
(``train/learning_rate_<x>`` per ``<x>_optimizer``), ``train/epsilon`` (DQN) and ``sync/weight_drift`` under a
weight-averaging algorithm; the loops add their own (``train/<name>`` of the learner's statistics, the
actor-learner view of :mod:`~ding_dist.entry.loops.learner_loop`).

Example::

    metrics = Metrics(exp, policy, counters, resumed=False)
    metrics.record(metrics.common_values(out, wall_start, steps_at_start))   # rank 0 writes it
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ding_dist.entry.experiment import Experiment
from ding_dist.entry.services.counters import Counters
from ding_dist.sync import DistributedModel, weight_drift
from ding_dist.utils import MetricWriter

__all__ = ["Metrics", "finish_replay_values", "replay_values", "weight_averaging_models"]


def replay_values(buffer: Any) -> tuple[dict[str, float], float]:
    """A learner's replay for the logs, as sums over learners (``reduce_log``) and one value to take the max of:
    ``replay/size`` (transitions stored), and for prioritized shards the sums behind ``replay/priority_mean`` (each
    stored transition's priority ``|delta| + eps``; ``alpha`` 0: all 1) and ``replay/sample_age`` (the
    mean age of the transitions drawn since the last record, in transitions its shard stored after it: its
    actor's env steps), with the largest stored priority (``replay/priority_max``; 0 without priorities).
    :func:`finish_replay_values` turns the reduced sums into the logged means.

    Example::

        sums, top = replay_values(learner_loop.buffer)   # {"replay/size": 4096.0, ...}, 1.7
    """
    shards = list(getattr(buffer, "shards", {0: buffer}).values()) if buffer is not None else []
    out = {"replay/size": float(sum(len(b) for b in shards))}
    prioritized = [b for b in shards if hasattr(b, "tree") and hasattr(b, "pop_sample_age")]
    if not prioritized:
        return out, 0.0
    p_sum, p_count, p_max, age_sum, age_count = 0.0, 0, 0.0, 0.0, 0
    for b in prioritized:
        leaves = np.asarray(b.tree.state_dict()["leaves"])[: b.capacity]
        stored = leaves[leaves > 0]
        raw = stored ** (1.0 / b.alpha) if b.alpha > 0 else np.ones_like(stored)
        p_sum, p_count = p_sum + float(raw.sum()), p_count + len(raw)
        p_max = max(p_max, float(raw.max(initial=0.0)))
        total, n = b.pop_sample_age()
        age_sum, age_count = age_sum + total, age_count + n
    out.update({"replay/priority_sum": p_sum, "replay/priority_count": float(p_count),
                "replay/sample_age_sum": age_sum, "replay/sample_age_count": float(age_count)})  # fmt: skip
    return out, p_max


def finish_replay_values(out: dict[str, float]) -> None:
    """Replace the reduced sums of :func:`replay_values` by their means (in place; a mean of nothing, e.g. no draw
    before ``learning_starts``, is left out)."""
    for name in ("priority", "sample_age"):
        total, count = out.pop(f"replay/{name}_sum", None), out.pop(f"replay/{name}_count", 0.0)
        if count:
            out["replay/priority_mean" if name == "priority" else "replay/sample_age"] = total / count


def weight_averaging_models(policy: Any) -> list[DistributedModel]:
    """The policy's distributed networks whose algorithm lets ranks' weights differ between averagings
    (decentralized, async, local SGD): evaluation and checkpoints then use rank 0's weights.

    Example::

        if weight_averaging_models(policy): ...  # the ranks' networks may differ
    """
    return [m for m in vars(policy).values() if isinstance(m, DistributedModel) and m.averages_weights]


class Metrics:
    """The writer of a run (``<exp_dir>/tb``; only rank 0's writes files) and its shared values.

    Records up to the checkpoint a run ``resumed`` from belong to the restored state; later ones are dropped. A
    restart that found no checkpoint starts over, so the failed attempt's records go too. The resolved config
    goes to TensorBoard once per start (text and hparams); ``--track`` starts W&B there.
    """

    def __init__(self, exp: Experiment, policy: Any, counters: Counters, resumed: bool) -> None:
        self.policy, self.counters = policy, counters
        purge = counters.env_steps + 1 if resumed else (0 if exp.continues else None)
        self.writer = MetricWriter(exp.exp_dir / "tb", purge_step=purge, config=exp.cfg, enabled=exp.rank == 0)
        self.averaging = weight_averaging_models(policy)

    def record(self, values: dict[str, Any]) -> None:
        """One record at the run's current env step."""
        self.writer.scalars(values, step=self.counters.env_steps)

    def common_values(self, out: dict[str, Any], wall_start: float, steps_at_start: int) -> dict[str, Any]:
        """The record shared by every loop, from ``reduce_log``'s output (its episode sums are taken out and
        counted)."""
        episodes = int(out.pop("episodes"))
        ret_sum, len_sum = out.pop("ep_return_sum"), out.pop("ep_length_sum")
        c = self.counters
        c.episodes += episodes
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
                "time/wall_time_s": c.wall_time_s + (time.perf_counter() - wall_start),
            }
        )
        values.update(self.schedule_values())
        if self.averaging:  # ranks' weights differ between averagings by design: report how far apart they are
            values["sync/weight_drift"] = max(weight_drift(m) for m in self.averaging)
        return values

    def schedule_values(self) -> dict[str, float]:
        """The policy's current learning rate(s) and, for DQN, exploration epsilon (the same on every rank).

        ``train/learning_rate`` for an optimizer attribute named ``optimizer``, ``train/learning_rate_<x>``
        for one named ``<x>_optimizer`` (SAC: actor, critic, alpha); the policy's own schedules at the current env
        step (``Policy.schedule_values``: DQN's ``train/epsilon``).
        """
        values: dict[str, float] = {}
        for name, obj in sorted(vars(self.policy).items()):
            groups = getattr(obj, "param_groups", None)
            if isinstance(groups, list) and groups and isinstance(groups[0], dict) and "lr" in groups[0]:
                suffix = "" if name == "optimizer" else "_" + name.removesuffix("_optimizer")
                values[f"train/learning_rate{suffix}"] = float(groups[0]["lr"])
        values.update(self.policy.schedule_values(self.counters.env_steps))
        return values

    def close(self) -> None:
        self.writer.close()
