"""Population-based training over the ranks of one job: ``pbt.population`` members, each an ordinary data-parallel
run on its own ranks, meeting only at the exploit steps.

A world of W ranks holds K members of W / K consecutive ranks each (member ``i``: ranks ``i * W/K ..``). Each member
runs :class:`~ding_dist.entry.loops.data_parallel.DataParallelLoop` on its member group: gradients, log reductions,
evaluations, checkpoints and health checks stay inside it, and it writes into ``<exp_dir>/member<i>/`` from its first
rank (TensorBoard, ``metrics.jsonl``, ``ckpt/``, ``config.json``, ``result.json``). Its seed is the run's plus
``i``, its starting hyperparameters are drawn from ``pbt.hyperparams``, and ``--max-env-steps`` is each member's
budget. Every ``pbt.interval`` env steps (the same iteration on every member: they run the same sizes) each member
is scored by an evaluation at that step, the scores are gathered over the world, and the bottom of the population
copies the state and hyperparameters of a top member, then perturbs the hyperparameters
(:mod:`ding_dist.worker.pbt`). World rank 0 writes ``<exp_dir>/lineage.jsonl`` (one row per member per round). The
population stops together: at its step budget, at a stop signal (agreed over the world every iteration), or at an
exploit step where a member's score reaches ``env.stop_value``. At the end the best member (highest last evaluation)
is copied to ``<exp_dir>/ckpt/best.pt`` and ``<exp_dir>/result.json`` names it.

Example::

    with Experiment.open(load_config("cartpole_ppo_pbt"), max_env_steps=20_000) as exp:   # world of 2 or 4 ranks
        result = PopulationLoop(exp).run()
        result["best_member"], result["members"][0]["hyperparams"]
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

from ding_dist.comm import allgather_object, get_group, health_check
from ding_dist.config.pbt import parse_hyperparams, population_error
from ding_dist.entry.experiment import Experiment
from ding_dist.entry.loops.data_parallel import DataParallelLoop
from ding_dist.entry.services.checkpointing import BEST_FILE
from ding_dist.entry.services.run_folder import save_run_config
from ding_dist.utils import atomic_write_json, load_checkpoint
from ding_dist.utils.fileio import atomic_write_text
from ding_dist.worker.pbt import copy_member_states, explore, initial_values, round_rng, select_exploits

__all__ = ["LINEAGE_FILE", "PopulationLoop", "member_dir"]

logger = logging.getLogger(__name__)

#: The population's history in its experiment folder: one JSON line per member per exploit round.
LINEAGE_FILE = "lineage.jsonl"


def member_dir(exp_dir: str | os.PathLike, member: int) -> Path:
    """The folder member ``member`` of a population writes (``<exp_dir>/member<i>``).

    Example:
        >>> member_dir("runs/x", 2).as_posix()
        'runs/x/member2'
    """
    return Path(exp_dir) / f"member{member}"


def _get(section: Any, key: str) -> Any:
    for part in key.split("."):
        section = section[part]
    return section


def _set(section: Any, key: str, value: Any) -> None:
    *path, name = key.split(".")
    for part in path:
        section = section[part]
    section[name] = value


def _rank_score(value: Any) -> float:
    return float("-inf") if value is None or value != value else float(value)


class PopulationLoop:
    """This rank's member of a population of an :class:`~ding_dist.entry.experiment.Experiment` (its ``pbt``
    section): the member's data-parallel loop in the constructor, with the exploit step as its ``on_iteration``; the
    population's end in :meth:`run`."""

    def __init__(self, exp: Experiment) -> None:
        self.exp, self.pbt = exp, exp.cfg.pbt
        k, world = int(self.pbt.population), exp.world
        error = population_error(k, world)
        if error is not None:
            raise ValueError(error)
        self.size = size = world // k
        self.member, self.leads = exp.rank // size, [i * size for i in range(k)]
        self.specs = parse_hyperparams(self.pbt.hyperparams or {})
        self.stop_value = exp.cfg.env.stop_value
        health_check(exp.health_timeout)  # every rank came up (this also creates the world's side group)
        group = get_group(size)  # every rank creates every member's group, in the same order
        start = {key: _get(exp.cfg.policy, key) for key in self.specs}
        self.values = initial_values(self.specs, k, int(self.pbt.seed), start)
        self.round, self.rows = 0, []
        cfg = copy.deepcopy(exp.cfg)
        cfg.seed = int(exp.cfg.seed or 0) + self.member
        cfg.env.stop_value = None  # the population decides its stop at the exploit steps
        ckpt = cfg.policy.other.checkpoint  # every member checkpoints at the same env steps: it resumes as one
        ckpt.freq, ckpt.every_minutes = int(ckpt.freq or self.pbt.interval), 0
        for key, value in self.values[self.member].items():
            _set(cfg.policy, key, value)
        folder = member_dir(exp.exp_dir, self.member)
        folder.mkdir(parents=True, exist_ok=True)
        resume = None if exp.resume is None else member_dir(exp.resume, self.member)
        if exp.rank == 0:
            save_run_config(exp.cfg, exp.exp_dir, continuing=exp.resume is not None or exp.continues)
        mexp = dataclasses.replace(exp, cfg=cfg, exp_dir=folder, rank=exp.rank % size, world=size, resume=resume)
        self.loop = DataParallelLoop(mexp, group, on_iteration=self.exploit_step, stop_group=(None, world))
        self._resume()
        self._keep_state()
        logger.info("population of %d member(s) x %d rank(s), exploit every %d env steps; start: %s", k, size,
                    self.pbt.interval, self.values)  # fmt: skip

    # --- resuming ------------------------------------------------------------------------------------
    def _resume(self) -> None:
        """A resumed member takes its round and hyperparameters from its checkpoint; every rank learns every
        member's (one allgather over the world), and rank 0 keeps the lineage up to that round."""
        path = self.loop.ckpt.path
        saved = load_checkpoint(path).get("pbt") if path is not None else None
        mine = (saved["round"], saved["hyperparams"]) if saved else None
        every = allgather_object(mine)
        if all(every[lead] is None for lead in self.leads):
            return
        if any(every[lead] is None for lead in self.leads):
            raise ValueError("some members of the population resume from a checkpoint and some do not: resume "
                             "every member from its folder's checkpoints")  # fmt: skip
        rounds = {every[lead][0] for lead in self.leads}
        if len(rounds) != 1:
            raise ValueError(f"the members' checkpoints are of different exploit rounds {sorted(rounds)}: resume "
                             "from checkpoints of one step")  # fmt: skip
        self.round = rounds.pop()
        self.values = [dict(every[lead][1]) for lead in self.leads]
        self.loop.policy.set_hyperparams(self.values[self.member])
        lineage = Path(self.exp.resume or self.exp.exp_dir) / LINEAGE_FILE
        if self.exp.rank == 0 and lineage.is_file():
            rows = [json.loads(line) for line in lineage.read_text(encoding="utf-8").splitlines() if line.strip()]
            self.rows = [row for row in rows if row["round"] <= self.round]

    def _keep_state(self) -> None:
        """What the member's checkpoints hold of the population (its round and hyperparameters)."""
        self.loop.ckpt.extra["pbt"] = {"member": self.member, "round": self.round, "population": len(self.leads),
                                       "hyperparams": dict(self.values[self.member])}  # fmt: skip

    # --- the exploit step ----------------------------------------------------------------------------
    def exploit_step(self, before: int) -> bool:
        """Every rank, after each iteration: at a multiple of ``pbt.interval`` env steps, score, gather, copy and
        perturb (world-wide); True when the population stops (a score reached ``env.stop_value``)."""
        loop, c, interval = self.loop, self.loop.counters, int(self.pbt.interval)
        if c.env_steps // interval <= before // interval:
            return False
        if not c.eval_history or c.eval_history[-1][0] != c.env_steps:
            loop.evaluate()  # the member's score at this step (its own stop value is off)
        self.round += 1
        gathered = allgather_object(c.last_eval)
        scores = [gathered[lead] for lead in self.leads]
        stop = self.stop_value is not None and max(_rank_score(s) for s in scores) >= self.stop_value
        last = self.exp.max_env_steps is not None and c.env_steps >= self.exp.max_env_steps
        rng = round_rng(int(self.pbt.seed), self.round)
        plan = {} if stop or last else select_exploits(scores, float(self.pbt.quantile), rng)
        new = {loser: explore(self.values[winner], self.specs, rng) for loser, winner in sorted(plan.items())}
        copy_member_states(loop.policy, plan, self.member, self.leads)
        rows = []
        for i in range(len(self.leads)):
            rows.append({"round": self.round, "env_step": c.env_steps, "member": i, "score": scores[i],
                         "copied_from": plan.get(i), "old_hyperparams": self.values[i],
                         "new_hyperparams": new.get(i, self.values[i]), "scores": scores})  # fmt: skip
            self.values[i] = dict(new.get(i, self.values[i]))
        if self.member in plan:
            loop.policy.set_hyperparams(self.values[self.member])
            logger.info("env step %d: member %d (score %s) copies member %d (score %s); hyperparameters %s",
                           c.env_steps, self.member, scores[self.member], plan[self.member],
                           scores[plan[self.member]], self.values[self.member])  # fmt: skip
        values = {"pbt/round": self.round, "pbt/copied": float(self.member in plan)}
        values.update({f"pbt/{key}": value for key, value in self.values[self.member].items()})
        loop.metrics.record(values)
        self._keep_state()
        if self.exp.rank == 0:
            self.rows += rows
            self._write_lineage()
        return stop

    def _write_lineage(self) -> None:
        text = "".join(json.dumps(row) + "\n" for row in self.rows)
        atomic_write_text(self.exp.exp_dir / LINEAGE_FILE, text)

    # --- the loop ------------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        """Train this rank's member, then the population's result (the same on every rank; world rank 0 writes
        ``result.json`` and ``ckpt/best.pt``)."""
        mine = self.loop.run()
        gathered = allgather_object(mine if self.exp.rank % self.size == 0 else None)
        members = [gathered[lead] for lead in self.leads]
        best = max(range(len(members)), key=lambda i: (_rank_score(members[i]["last_eval_return"]), -i))
        chosen = members[best]
        exp = self.exp
        best_path = exp.exp_dir / "ckpt" / BEST_FILE
        summary = [
            {
                "member": i,
                "exp_dir": m["exp_dir"],
                "last_eval_return": m["last_eval_return"],
                "best_eval_return": m["best_eval_return"],
                "hyperparams": self.values[i],
                "checkpoint": m["checkpoint"],
            }
            for i, m in enumerate(members)
        ]
        result = {
            **chosen,
            "world_size": exp.world,
            "exp_dir": str(exp.exp_dir),
            "population": len(members),
            "best_member": best,
            "rounds": self.round,
            "lineage": str(exp.exp_dir / LINEAGE_FILE),
            "members": summary,
            "checkpoint": {"last": chosen["checkpoint"]["last"], "best": str(best_path)},
        }
        if exp.rank == 0:
            best_path.parent.mkdir(parents=True, exist_ok=True)
            tmp = best_path.with_suffix(".tmp")
            shutil.copyfile(chosen["checkpoint"]["last"], tmp)
            os.replace(tmp, best_path)
            atomic_write_json(exp.exp_dir / "result.json", result)
            if not self.rows:
                self._write_lineage()
        logger.info("population: best member %d (last eval return %s), copied to %s", best,
                    chosen["last_eval_return"], best_path)  # fmt: skip
        return result
