"""Training pipelines: collect -> learn -> log -> evaluate -> checkpoint, on one process or many.

The pipelines run on whatever process group the caller set up (the fake link when there is none);
they never initialize or destroy it. With N ranks, each rank steps its own envs with its own seeds,
keeps its own replay buffer, and learns on ``batch_size / N`` samples per update; the sync engine
averages the gradients, so every rank applies the same update.

Every decision that changes the control flow (learn or not, evaluate, checkpoint, stop) is taken
from global counters that each rank computes identically (each rank collects the same number of
steps per iteration), so all ranks enter the same collectives in the same order. Collectives per
iteration: none, except one packed allreduce per log call, one broadcast per evaluation and one
object allgather per checkpoint (RNG states of all ranks).

Example::

    from ding_dist.entry import train
    result = train("configs/cartpole_ppo_config.py", seed=0, max_env_steps=50_000)
    result["best_eval_return"]
"""

from __future__ import annotations

import logging
import math
import os
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from easydict import EasyDict

from ding_dist.comm import allgather_object, get_local_rank, get_rank, get_world_size, to_ddp_config
from ding_dist.config import compile_config, read_config, save_config
from ding_dist.data.replay import ReplayBuffer
from ding_dist.envs import env_default_config, env_seeds, make_vec_env
from ding_dist.policy import Policy, get_policy_cls
from ding_dist.utils import (
    CheckpointManager,
    MetricWriter,
    atomic_write_json,
    capture_rng_state,
    load_checkpoint,
    progress_bar,
    restore_rng_state,
    save_checkpoint,
)
from ding_dist.worker import Collector, Evaluator, Learner, reduce_log

__all__ = ["train", "serial_pipeline", "serial_pipeline_onpolicy", "evaluate", "load_config"]

logger = logging.getLogger(__name__)

ConfigArg = str | os.PathLike | tuple[Mapping, Mapping]


# --------------------------------------------------------------------------------------------- config
def _read(config: ConfigArg) -> tuple[EasyDict, EasyDict]:
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
    main, create = _read(config)
    policy_type = (create.get("policy") or {}).get("type")
    if policy_type is None:
        raise ValueError("create_config.policy.type is missing; set it to one of the registered policies")
    policy_cls = get_policy_cls(policy_type)
    defaults = {"env": env_default_config(), "policy": policy_cls.default_config()}
    return compile_config(main, create, defaults=defaults, seed=seed, overrides=overrides)


def _device(cfg_policy: Mapping) -> torch.device:
    device = torch.device(cfg_policy.device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", get_local_rank())
    return device


def _env_manager(cfg: EasyDict) -> str:
    return ((cfg.create_config.get("env_manager") or {}).get("type")) or "sync"


def _seed_all(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def _build_policy(cfg: EasyDict, venv: gym.vector.VectorEnv) -> Policy:
    policy_cls = get_policy_cls(cfg.create_config.policy.type)
    # Same seed on every rank: identical initial parameters (the sync engine also broadcasts rank 0's).
    torch.manual_seed(cfg.seed)
    return policy_cls(cfg.policy, venv.single_observation_space, venv.single_action_space, _device(cfg.policy))


# -------------------------------------------------------------------------------------------- the run
@dataclass
class _Counters:
    env_steps: int = 0  # global: sum over ranks
    episodes: int = 0  # global: sum over ranks
    best_eval: float = -math.inf
    last_eval: float | None = None
    eval_history: list = field(default_factory=list)  # [(env_steps, mean_return)]


class _Run:
    """One training run's setup and state (config, envs, policy, workers, writer, checkpoints)."""

    def __init__(
        self,
        config: ConfigArg,
        *,
        on_policy: bool,
        seed: int | None,
        overrides: Sequence[str],
        exp_dir: str | os.PathLike | None,
        max_env_steps: int | None,
        resume: str | os.PathLike | None,
    ) -> None:
        self.rank, self.world = get_rank(), get_world_size()
        global_cfg = load_config(config, seed=seed, overrides=overrides)
        policy_cls = get_policy_cls(global_cfg.create_config.policy.type)
        if policy_cls.on_policy != on_policy:
            want = "serial_pipeline_onpolicy" if policy_cls.on_policy else "serial_pipeline"
            raise ValueError(f"policy type {global_cfg.create_config.policy.type!r} needs {want}; train() picks it")
        if max_env_steps is not None and max_env_steps < 1:
            raise ValueError(f"max_env_steps must be >= 1 or None, got {max_env_steps}")
        self.cfg = cfg = to_ddp_config(global_cfg)  # per-rank batch_size and n_sample
        self.max_env_steps = max_env_steps
        if max_env_steps is None and cfg.env.stop_value is None:
            logger.warning("neither max_env_steps nor env.stop_value is set: training runs until interrupted")

        self.exp_dir = Path(exp_dir or resume or Path("runs") / cfg.exp_name)
        if self.rank == 0:
            self.exp_dir.mkdir(parents=True, exist_ok=True)
            save_config(global_cfg, self.exp_dir / "config.py")
        self.ckpt = CheckpointManager(self.exp_dir / "ckpt", keep_last=cfg.policy.other.checkpoint.keep_last)
        self.counters = _Counters()
        state = self._load_resume_state(resume)
        env_seed = cfg.seed + (self.counters.env_steps if state else 0)  # fresh episodes after a resume

        manager = _env_manager(cfg)
        venv = make_vec_env(cfg.env, cfg.env.collector_env_num, manager)
        self.policy = _build_policy(cfg, venv)
        _seed_all(cfg.seed + 1000 * self.rank)  # exploration differs across ranks
        self.collector = Collector(venv, self.policy, env_seeds(env_seed, self.rank, "collector", venv.num_envs))
        eval_venv = make_vec_env(cfg.env, cfg.env.evaluator_env_num, manager) if self.rank == 0 else None
        eval_seeds = env_seeds(env_seed, self.rank, "evaluator", cfg.env.evaluator_env_num)
        self.evaluator = Evaluator(eval_venv, self.policy, cfg.env.n_evaluator_episode, eval_seeds, cfg.env.stop_value)
        self.learner = Learner(self.policy)
        self.buffer = self._make_buffer(venv) if not on_policy else None
        if state is not None:
            self._restore(state)
        # Records up to the checkpoint's step belong to the restored state; later ones are dropped.
        purge = self.counters.env_steps + 1 if state else None
        self.writer = MetricWriter(self.exp_dir / "tb", purge_step=purge)

    # --- setup helpers ---------------------------------------------------------------------------
    def _make_buffer(self, venv: gym.vector.VectorEnv) -> ReplayBuffer:
        p = self.cfg.policy
        obs_space, act_space = venv.single_observation_space, venv.single_action_space
        discrete = isinstance(act_space, gym.spaces.Discrete)
        capacity = math.ceil(p.other.replay_buffer.replay_buffer_size / self.world)  # global size
        return ReplayBuffer(
            capacity,
            obs_space.shape,
            action_shape=() if discrete else act_space.shape,
            action_dtype=np.int64 if discrete else np.float32,
            num_envs=venv.num_envs,
            n_step=p.get("nstep", 1),
            gamma=p.discount_factor,
            seed=self.cfg.seed + 1000 * self.rank,
        )

    def _replay_path(self, exp_dir: Path) -> Path:
        return exp_dir / "ckpt" / f"replay_rank{self.rank}.pt"

    def _load_resume_state(self, resume: str | os.PathLike | None) -> dict | None:
        self._resume_dir = None if resume is None else Path(resume)
        if resume is None:
            return None
        state = CheckpointManager(Path(resume) / "ckpt").load_latest()
        if state is None:
            raise FileNotFoundError(f"resume={str(resume)!r}: no loadable checkpoint in {Path(resume) / 'ckpt'}")
        c = state["counters"]
        self.counters = _Counters(c["env_steps"], c["episodes"], c["best_eval"], c["last_eval"], c["eval_history"])
        return state

    def _restore(self, state: dict) -> None:
        self.policy.load_state_dict(state["policy"])
        same_world = len(state["rng"]) == self.world
        if same_world:
            restore_rng_state(state["rng"][self.rank])
        else:
            logger.warning(
                "checkpoint was written by %d ranks, running %d: RNGs and replay buffers start fresh",
                len(state["rng"]),
                self.world,
            )
        replay_file = self._replay_path(self._resume_dir)
        if self.buffer is not None and same_world and replay_file.is_file():
            saved = load_checkpoint(replay_file)
            if saved["env_steps"] == self.counters.env_steps:
                self.buffer.load_state_dict(saved["buffer"])
            else:
                logger.warning(
                    "replay buffer file is from env step %d, not %d: starting empty",
                    saved["env_steps"],
                    self.counters.env_steps,
                )
        logger.info("resumed at env step %d, train iter %d", self.counters.env_steps, self.policy.train_iter)

    # --- periodic work ---------------------------------------------------------------------------
    def log(self, env_step_delta: int, wall_start: float, steps_at_start: int) -> None:
        """One packed allreduce: episode sums across ranks and learner statistics averaged."""
        returns, lengths = self.collector.pop_episodes()
        sums = {
            "episodes": len(returns),
            "ep_return_sum": sum(returns),
            "ep_length_sum": sum(lengths),
            "env_steps": env_step_delta,
        }
        out = reduce_log(sums, self.learner.pop_stats())
        if int(out.pop("env_steps")) != env_step_delta * self.world:
            raise RuntimeError("ranks collected different numbers of env steps; their control flow diverged")
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
        self.writer.scalars(values, step=c.env_steps)

    def evaluate(self) -> bool:
        mean, stop = self.evaluator.evaluate_and_share()
        c = self.counters
        c.last_eval, c.best_eval = mean, max(c.best_eval, mean)
        c.eval_history.append((c.env_steps, mean))
        self.writer.scalars({"eval/mean_reward": mean, "eval/best_reward": c.best_eval}, step=c.env_steps)
        logger.info("env step %d: eval mean return %.2f (best %.2f)", c.env_steps, mean, c.best_eval)
        return stop

    def checkpoint(self) -> None:
        rng_states = allgather_object(capture_rng_state())  # every rank's RNG, so resume restores each
        c = self.counters
        if self.buffer is not None and self.cfg.policy.other.replay_buffer.get("save_in_checkpoint", False):
            replay_state = {"env_steps": c.env_steps, "buffer": self.buffer.state_dict()}
            save_checkpoint(replay_state, self._replay_path(self.exp_dir))
        if self.rank == 0:
            state = {
                "policy": self.policy.state_dict(),
                "counters": {
                    "env_steps": c.env_steps,
                    "episodes": c.episodes,
                    "best_eval": c.best_eval,
                    "last_eval": c.last_eval,
                    "eval_history": c.eval_history,
                },
                "rng": rng_states,
                "world_size": self.world,
            }
            self.ckpt.save(state, c.env_steps)

    def close(self) -> None:
        self.writer.close()
        self.collector.close()
        self.evaluator.close()

    # --- the loop ------------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        cfg, c = self.cfg, self.counters
        p = cfg.policy
        wall_start, steps_at_start = time.perf_counter(), c.env_steps
        n_vec = max(1, math.ceil(p.collect.n_sample / self.collector.num_envs))
        local_per_iter = n_vec * self.collector.num_envs
        global_per_iter = local_per_iter * self.world
        eval_freq, log_freq, ckpt_freq = p.eval.eval_freq, p.other.log_freq, p.other.checkpoint.freq
        learning_starts = p.learn.get("learning_starts", 0)
        logger.info(
            "%s: %d rank(s) x %d envs, %d global env steps per iteration, exp dir %s",
            cfg.exp_name,
            self.world,
            self.collector.num_envs,
            global_per_iter,
            self.exp_dir,
        )

        bar = progress_bar(self.max_env_steps, desc="env steps", initial=c.env_steps)
        stopped_by, log_pending = "max_env_steps", 0
        try:
            while self.max_env_steps is None or c.env_steps < self.max_env_steps:
                rollout = self.collector.collect(n_vec, c.env_steps)
                before, c.env_steps = c.env_steps, c.env_steps + global_per_iter
                log_pending += local_per_iter
                if self.buffer is None:
                    self.learner.train_rollout(rollout)
                else:
                    self.buffer.extend(rollout)
                    if c.env_steps >= learning_starts:
                        self.learner.train_replay(self.buffer, p.learn.update_per_collect, p.learn.batch_size)

                def crossed(freq: int, before: int = before) -> bool:
                    return freq > 0 and c.env_steps // freq > before // freq

                if crossed(log_freq):
                    self.log(log_pending, wall_start, steps_at_start)
                    log_pending = 0
                stop = crossed(eval_freq) and self.evaluate()
                if crossed(ckpt_freq):
                    self.checkpoint()
                bar.update(global_per_iter)
                fps = (c.env_steps - steps_at_start) / max(time.perf_counter() - wall_start, 1e-9)
                bar.set_postfix(fps=f"{fps:.0f}", eval=f"{c.last_eval:.1f}" if c.last_eval is not None else "-")
                if stop:
                    stopped_by = "stop_value"
                    break
            if stopped_by != "stop_value":
                if log_pending:
                    self.log(log_pending, wall_start, steps_at_start)
                if not c.eval_history or c.eval_history[-1][0] != c.env_steps:
                    if self.evaluate():
                        stopped_by = "stop_value"
            self.checkpoint()
        finally:
            bar.close()
            self.close()

        result = {
            "env_steps": c.env_steps,
            "train_iters": self.policy.train_iter,
            "episodes": c.episodes,
            "best_eval_return": c.best_eval,
            "last_eval_return": c.last_eval,
            "eval_history": c.eval_history,
            "world_size": self.world,
            "wall_time_s": time.perf_counter() - wall_start,
            "stopped_by": stopped_by,
            "exp_dir": str(self.exp_dir),
        }
        if self.rank == 0:
            atomic_write_json(self.exp_dir / "result.json", result)
        return result


# ------------------------------------------------------------------------------------------ public API
def serial_pipeline(
    config: ConfigArg,
    *,
    seed: int | None = None,
    overrides: Sequence[str] = (),
    exp_dir: str | os.PathLike | None = None,
    max_env_steps: int | None = None,
    resume: str | os.PathLike | None = None,
) -> dict[str, Any]:
    """Off-policy training (DQN, SAC): collect into a per-rank replay buffer, learn from sampled batches.

    Arguments as :func:`train`. Example::

        result = serial_pipeline("configs/cartpole_dqn_config.py", seed=0, max_env_steps=20_000)
    """
    run = _Run(
        config,
        on_policy=False,
        seed=seed,
        overrides=overrides,
        exp_dir=exp_dir,
        max_env_steps=max_env_steps,
        resume=resume,
    )
    return run.run()


def serial_pipeline_onpolicy(
    config: ConfigArg,
    *,
    seed: int | None = None,
    overrides: Sequence[str] = (),
    exp_dir: str | os.PathLike | None = None,
    max_env_steps: int | None = None,
    resume: str | os.PathLike | None = None,
) -> dict[str, Any]:
    """On-policy training (PPO): collect a fresh rollout each iteration and learn on it.

    Arguments as :func:`train`. Example::

        result = serial_pipeline_onpolicy("configs/cartpole_ppo_config.py", seed=0, max_env_steps=50_000)
    """
    run = _Run(
        config,
        on_policy=True,
        seed=seed,
        overrides=overrides,
        exp_dir=exp_dir,
        max_env_steps=max_env_steps,
        resume=resume,
    )
    return run.run()


def train(
    config: ConfigArg,
    *,
    seed: int | None = None,
    overrides: Sequence[str] = (),
    exp_dir: str | os.PathLike | None = None,
    max_env_steps: int | None = None,
    resume: str | os.PathLike | None = None,
) -> dict[str, Any]:
    """Train the policy a config names, with the pipeline its kind needs; returns the result dict.

    ``config``: path of a Python config file or a ``(main_config, create_config)`` tuple. ``seed``:
    run seed (None: the config's ``seed``, else 0). ``overrides``: ``"key.path=value"`` strings.
    ``exp_dir``: experiment folder (default ``runs/<exp_name>``; with ``resume`` set, that folder).
    ``max_env_steps``: stop after this many global env steps. ``resume``: an experiment folder whose
    newest checkpoint to continue from. The result (also in ``<exp_dir>/result.json``) has
    ``env_steps, train_iters, episodes, best_eval_return, last_eval_return, eval_history,
    world_size, wall_time_s, stopped_by, exp_dir``.

    Example::

        result = train("configs/cartpole_dqn_config.py", seed=1, overrides=["env.collector_env_num=4"])
    """
    main, create = _read(config)
    policy_cls = get_policy_cls((create.get("policy") or {}).get("type"))
    pipeline = serial_pipeline_onpolicy if policy_cls.on_policy else serial_pipeline
    return pipeline(
        (main, create),
        seed=seed,
        overrides=overrides,
        exp_dir=exp_dir,
        max_env_steps=max_env_steps,
        resume=resume,
    )


def evaluate(config: ConfigArg, ckpt: str | os.PathLike, *, episodes: int = 10, seed: int = 0) -> dict[str, Any]:
    """Greedy evaluation of a checkpoint (a ``ckpt_*.pt`` file or an experiment folder: its newest one).

    Runs on this process only (no collectives). Returns ``mean_return``, ``std_return``, ``returns``,
    ``lengths``. Example::

        evaluate("configs/cartpole_dqn_config.py", "runs/cartpole_dqn", episodes=10)["mean_return"]
    """
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    cfg = load_config(config, seed=seed)
    path = Path(ckpt)
    if path.is_dir():
        folder = path / "ckpt" if (path / "ckpt").is_dir() else path
        found = CheckpointManager(folder).latest()
        if found is None:
            raise FileNotFoundError(f"no loadable checkpoint in {str(folder)!r}")
        path = found
    state = load_checkpoint(path)
    venv = make_vec_env(cfg.env, min(cfg.env.evaluator_env_num, episodes), _env_manager(cfg))
    try:
        policy = _build_policy(cfg, venv)
        policy.load_state_dict(state["policy"])
        evaluator = Evaluator(venv, policy, episodes, env_seeds(seed, 0, "evaluator", venv.num_envs))
        result = evaluator.evaluate()
    finally:
        venv.close()
    result["checkpoint"] = str(path)
    return result
