"""Training pipelines: collect -> learn -> log -> evaluate -> checkpoint, on one process or many.

The pipelines run on whatever process group the caller set up (the fake link when there is none);
they never initialize or destroy it. With N ranks, each rank steps its own envs with its own seeds,
keeps its own replay buffer, and learns on ``batch_size / N`` samples per update; the sync engine
averages the gradients, so every rank applies the same update.

Every decision that changes the control flow (learn or not, evaluate, checkpoint, stop) is taken
from global counters that each rank computes identically (each rank collects the same number of
steps per iteration), so all ranks enter the same collectives in the same order. Collectives per
iteration: none, except one packed allreduce per log call, one broadcast per evaluation and one
object allgather per checkpoint (RNG states of all ranks), each evaluation and checkpoint preceded by
a health check (a monitored barrier bounded by ``health_timeout``).

Failures (see docs/reliability.md): a collective that fails because a peer died or hung is diagnosed
with a health check and re-raised as ``DeadRankError`` naming the missing rank(s) when it can tell;
SIGTERM becomes ``SystemExit(143)`` so envs and writers close; under torchrun with restarts
(``TORCHELASTIC_RESTART_COUNT > 0``) the run continues from the newest complete checkpoint of its
experiment folder; in debug mode (``DING_DIST_DEBUG=1``) the trained networks are compared across
ranks every :data:`DEBUG_CHECK_EVERY` train iterations and at each checkpoint.

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
import re
import signal
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from easydict import EasyDict

import ding_dist.comm
from ding_dist.comm import (
    CollectiveMismatchError,
    DeadRankError,
    DesyncError,
    allgather_object,
    broadcast_object,
    check_consistency,
    debug_enabled,
    get_rank,
    get_world_size,
    health_check,
    resolve_device,
    to_ddp_config,
)
from ding_dist.config import compile_config, read_config, save_config
from ding_dist.data.replay import ReplayBuffer
from ding_dist.envs import env_default_config, env_seeds, make_vec_env
from ding_dist.policy import Policy, get_policy_cls
from ding_dist.policy.base import check_sync_config
from ding_dist.utils import (
    CheckpointError,
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

__all__ = [
    "default_exp_dir",
    "holds_run",
    "train",
    "serial_pipeline",
    "serial_pipeline_onpolicy",
    "evaluate",
    "load_config",
]

logger = logging.getLogger(__name__)

ConfigArg = str | os.PathLike | tuple[Mapping, Mapping]

#: In debug mode, the trained networks are compared across ranks every this many train iterations
#: (and at each checkpoint); a difference raises ``DesyncError`` naming the first differing tensor.
DEBUG_CHECK_EVERY = 100
#: Default bound (seconds) of the health checks before each evaluation and checkpoint.
DEFAULT_HEALTH_TIMEOUT_S = 60.0
#: Set by torchrun's elastic agent in the workers it starts: 0 at first, then 1, 2, ... after restarts.
RESTART_ENV = "TORCHELASTIC_RESTART_COUNT"
EXIT_SIGTERM = 128 + signal.SIGTERM  # 143, the shell's code for "terminated by SIGTERM"

# Error text of a collective that failed because a peer went away or stopped answering (gloo, nccl).
PEER_FAILURE = re.compile(
    r"Connection (reset|closed|refused)|Broken pipe|[Tt]imed out|timeout|Socket|gloo|NCCL|DistBackendError"
)
_COMM_DIR = Path(ding_dist.comm.__file__).resolve().parent


def _raised_in_comm(exc: BaseException) -> bool:
    """True when the exception passed through the collective layer (a collective failed, not local code)."""
    tb = exc.__traceback__
    while tb is not None:
        if Path(tb.tb_frame.f_code.co_filename).resolve().parent == _COMM_DIR:
            return True
        tb = tb.tb_next
    return False


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
    cfg = compile_config(main, create, defaults=defaults, seed=seed, overrides=overrides)
    check_sync_config(cfg.policy.sync)
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


@contextmanager
def _sigterm_exits() -> Iterator[None]:
    """While active, SIGTERM raises ``SystemExit(143)`` in the main thread, so ``finally`` blocks close envs,
    writers and the process group; a second SIGTERM during that cleanup is ignored (launchers SIGKILL
    after their grace period). Leaves a handler someone else installed alone."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous is not signal.SIG_DFL:
        yield
        return

    def on_sigterm(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise SystemExit(EXIT_SIGTERM)

    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _device(cfg_policy: Mapping) -> torch.device:
    """The policy's device: ``policy.device`` through the one function that decides devices."""
    return resolve_device(cfg_policy.get("device", "auto"))


def _env_manager(cfg: EasyDict) -> str:
    return ((cfg.create_config.get("env_manager") or {}).get("type")) or "sync"


def _default_threads() -> None:
    """One torch thread per process unless OMP_NUM_THREADS says otherwise (as torchrun does).

    RL networks are small: extra intra-op threads only add synchronization, and on a busy machine
    they spin against other processes (measured: a 1-process CartPole PPO run 9x slower with 2 threads
    on a loaded 2-core machine).
    """
    if "OMP_NUM_THREADS" not in os.environ and torch.get_num_threads() != 1:
        logger.info("using 1 torch thread per process (set OMP_NUM_THREADS to change it)")
        torch.set_num_threads(1)


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
    update_credit: int = 0  # off-policy: update_per_collect x env steps not yet turned into updates


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
        health_timeout: float = DEFAULT_HEALTH_TIMEOUT_S,
    ) -> None:
        self.rank, self.world = get_rank(), get_world_size()
        _default_threads()
        global_cfg = load_config(config, seed=seed, overrides=overrides)
        policy_cls = get_policy_cls(global_cfg.create_config.policy.type)
        if policy_cls.on_policy != on_policy:
            want = "serial_pipeline_onpolicy" if policy_cls.on_policy else "serial_pipeline"
            raise ValueError(f"policy type {global_cfg.create_config.policy.type!r} needs {want}; train() picks it")
        if max_env_steps is not None and max_env_steps < 1:
            raise ValueError(f"max_env_steps must be >= 1 or None, got {max_env_steps}")
        if isinstance(health_timeout, bool) or not isinstance(health_timeout, (int, float)) or not health_timeout > 0:
            raise ValueError(f"health_timeout must be a positive number of seconds, got {health_timeout!r}")
        self.health_timeout = float(health_timeout)
        self.cfg = cfg = to_ddp_config(global_cfg)  # per-rank batch_size and n_sample
        self.max_env_steps = max_env_steps
        if max_env_steps is None and cfg.env.stop_value is None:
            logger.warning("neither max_env_steps nor env.stop_value is set: training runs until interrupted")

        if exp_dir is None and resume is None:  # decided once, on rank 0: ranks must agree on the folder
            exp_dir = broadcast_object(default_exp_dir(cfg.exp_name) if self.rank == 0 else None)
        elif resume is None and restart_count() == 0 and holds_run(exp_dir):
            raise FileExistsError(
                f"exp_dir {str(exp_dir)!r} already holds a run (checkpoints or result.json): "
                "resume it, or choose another folder"
            )
        self.exp_dir = Path(exp_dir or resume)
        if self.rank == 0:
            self.exp_dir.mkdir(parents=True, exist_ok=True)
        # Every rank came up (this also creates the side group the later health checks use).
        health_check(self.health_timeout)
        self.ckpt = CheckpointManager(self.exp_dir / "ckpt", keep_last=cfg.policy.other.checkpoint.keep_last)
        self.counters = _Counters()
        self.restarts = restart_count()
        state = self._load_resume_state(resume)
        env_seed = cfg.seed + (self.counters.env_steps if state else 0)  # fresh episodes after a resume

        manager = _env_manager(cfg)
        self.collector = self.evaluator = None
        try:
            venv = make_vec_env(cfg.env, cfg.env.collector_env_num, manager)
            try:
                self.policy = _build_policy(cfg, venv)
            except BaseException:
                venv.close()
                raise
            _seed_all(cfg.seed + 1000 * self.rank)  # exploration differs across ranks
            self.collector = Collector(venv, self.policy, env_seeds(env_seed, self.rank, "collector", venv.num_envs))
            eval_venv = make_vec_env(cfg.env, cfg.env.evaluator_env_num, manager) if self.rank == 0 else None
            eval_seeds = env_seeds(env_seed, self.rank, "evaluator", cfg.env.evaluator_env_num)
            self.evaluator = Evaluator(
                eval_venv, self.policy, cfg.env.n_evaluator_episode, eval_seeds, cfg.env.stop_value
            )
            self.learner = Learner(self.policy)
            self.buffer = self._make_buffer(venv) if not on_policy else None
            if state is not None:
                self._restore(state)
        except BaseException:  # e.g. SIGTERM while the envs start: close what is open, no orphans
            self._close_envs()
            raise
        if self.rank == 0:  # after the checkpoint was found to fit: a failed resume leaves the folder as it was
            save_config(global_cfg, self.exp_dir / "config.py")
        self._replay_saved_at: int | None = None
        # Records up to the checkpoint's step belong to the restored state; later ones are dropped. A
        # restart that found no checkpoint starts over, so the failed attempt's records go too.
        purge = self.counters.env_steps + 1 if state else (0 if self.restarts else None)
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

    def _replay_path(self, ckpt_dir: Path, previous: bool = False) -> Path:
        return ckpt_dir / f"replay_rank{self.rank}{'.prev' if previous else ''}.pt"

    def _choose_checkpoint(self, resume: str | os.PathLike | None) -> tuple[str | None, str | None]:
        """(checkpoint to continue from or None, error or None); rank 0 decides for everyone."""
        if self.restarts > 0:
            newest = self.ckpt.latest()
            if newest is not None:
                logger.warning("restart %d: continuing from %s", self.restarts, newest)
                return str(newest), None
            if resume is None:
                logger.warning(
                    "restart %d: no complete checkpoint in %s, starting over", self.restarts, self.ckpt.directory
                )
                return None, None
        if resume is None:
            return None, None
        newest = CheckpointManager(Path(resume) / "ckpt").latest()
        if newest is None:
            return None, f"resume={str(resume)!r}: no loadable checkpoint in {Path(resume) / 'ckpt'}"
        return str(newest), None

    def _load_resume_state(self, resume: str | os.PathLike | None) -> dict | None:
        # Rank 0 picks one file and every rank loads that same file (no rank can see a different newest).
        choice = self._choose_checkpoint(resume) if self.rank == 0 else None
        path, error = broadcast_object(choice)
        if error is not None:
            raise FileNotFoundError(error)
        self._resume_path = None if path is None else Path(path)
        if self._resume_path is None:
            return None
        state = load_checkpoint(self._resume_path)
        try:
            c = state["counters"]
            self.counters = _Counters(
                c["env_steps"],
                c["episodes"],
                c["best_eval"],
                c["last_eval"],
                c["eval_history"],
                c.get("update_credit", 0),
            )
        except (KeyError, TypeError) as e:
            raise CheckpointError(
                f"checkpoint {path!r} has no training counters ({e!r}); not a pipeline checkpoint"
            ) from e
        return state

    def _restore(self, state: dict) -> None:
        try:
            self.policy.load_state_dict(state["policy"])
        except (KeyError, RuntimeError, ValueError, TypeError) as e:  # another policy, model size or optimizer
            why = " ".join(str(e).split()) or type(e).__name__
            why = why if len(why) <= 300 else why[:297] + "..."
            raise CheckpointError(
                f"checkpoint {str(self._resume_path)!r} does not fit this config's policy: {why}"
            ) from e
        same_world = len(state["rng"]) == self.world
        if same_world:
            restore_rng_state(state["rng"][self.rank])
        else:
            logger.warning(
                "checkpoint was written by %d ranks, running %d: RNGs and replay buffers start fresh",
                len(state["rng"]),
                self.world,
            )
        if self.buffer is not None and same_world:
            self._restore_replay()
        logger.info("resumed at env step %d, train iter %d", self.counters.env_steps, self.policy.train_iter)

    def _restore_replay(self) -> None:
        """Load this rank's replay file of the checkpoint's env step (the newest file or the previous one)."""
        ckpt_dir = self._resume_path.parent
        found = []
        for path in (self._replay_path(ckpt_dir), self._replay_path(ckpt_dir, previous=True)):
            if not path.is_file():
                continue
            try:
                saved = load_checkpoint(path)
            except CheckpointError as e:
                logger.warning("skipping unusable replay buffer file: %s", e)
                continue
            if saved.get("env_steps") == self.counters.env_steps:
                self.buffer.load_state_dict(saved["buffer"])
                logger.info("replay buffer restored from %s (%d transitions)", path, len(self.buffer))
                return
            found.append(f"{path.name} (env step {saved.get('env_steps')})")
        if found or self.cfg.policy.other.replay_buffer.get("save_in_checkpoint", False):
            logger.warning(
                "no replay buffer file of env step %d in %s (found: %s): the buffer starts empty",
                self.counters.env_steps,
                ckpt_dir,
                ", ".join(found) or "none",
            )

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
        health_check(self.health_timeout)  # rank 0 evaluates alone: first make sure everyone is alive
        mean, stop = self.evaluator.evaluate_and_share()
        c = self.counters
        c.last_eval, c.best_eval = mean, max(c.best_eval, mean)
        c.eval_history.append((c.env_steps, mean))
        self.writer.scalars({"eval/mean_reward": mean, "eval/best_reward": c.best_eval}, step=c.env_steps)
        logger.info("env step %d: eval mean return %.2f (best %.2f)", c.env_steps, mean, c.best_eval)
        return stop

    def checkpoint(self) -> None:
        """Health check, then each rank's replay file (if configured), then rank 0's checkpoint file.

        The RNG allgather sits between the two, so it doubles as a barrier: when ``ckpt_<step>.pt`` exists,
        every rank's replay file of that step is complete. A rank keeps its previous replay file as
        ``replay_rank<r>.prev.pt`` until the new one is written, so a crash in between still leaves the
        replay file that matches the newest complete checkpoint.
        """
        health_check(self.health_timeout)
        if debug_enabled():
            self.check_consistency()
        rng = capture_rng_state()
        c = self.counters
        if self.buffer is not None and self.cfg.policy.other.replay_buffer.get("save_in_checkpoint", False):
            current = self._replay_path(self.ckpt.directory)
            if current.is_file() and self._replay_saved_at != c.env_steps:  # a second save of a step replaces
                os.replace(current, self._replay_path(self.ckpt.directory, previous=True))
            save_checkpoint({"env_steps": c.env_steps, "buffer": self.buffer.state_dict()}, current)
            self._replay_saved_at = c.env_steps
        rng_states = allgather_object(rng)  # every rank's RNG, so resume restores each
        if self.rank == 0:
            state = {
                "policy": self.policy.state_dict(),
                "counters": {
                    "env_steps": c.env_steps,
                    "episodes": c.episodes,
                    "best_eval": c.best_eval,
                    "last_eval": c.last_eval,
                    "eval_history": c.eval_history,
                    "update_credit": c.update_credit,
                },
                "rng": rng_states,
                "world_size": self.world,
            }
            self.ckpt.save(state, c.env_steps)

    def _updates_due(self, env_steps: int, n_sample: int) -> int:
        """Updates for ``env_steps`` new global env steps: ``update_per_collect`` per ``n_sample`` steps,
        exact over the run (a remainder carries over), so the update-to-data ratio does not depend on how
        many ranks or envs round an iteration up."""
        c = self.counters
        c.update_credit += self.cfg.policy.learn.update_per_collect * env_steps
        due, c.update_credit = divmod(c.update_credit, n_sample)
        return due

    def check_consistency(self) -> None:
        """Raise ``DesyncError`` naming the first tensor of the policy's networks that differs across ranks."""
        tensors: dict[str, torch.Tensor] = {}
        for name in self.policy._state_attrs:
            obj = getattr(self.policy, name)
            if isinstance(obj, torch.nn.Module):
                tensors.update({f"{name}.{key}": value for key, value in obj.state_dict().items()})
            elif isinstance(obj, torch.Tensor):
                tensors[name] = obj
        check_consistency(tensors)

    def diagnose(self, exc: BaseException) -> Exception | None:
        """After a collective failed: the clearer error to raise instead (naming the missing rank when the
        health check can tell), or None when ``exc`` is not a failed collective."""
        if self.world == 1 or isinstance(exc, (DeadRankError, DesyncError, CollectiveMismatchError)):
            return None
        text = str(exc).strip()
        if not (isinstance(exc, RuntimeError) and _raised_in_comm(exc) and PEER_FAILURE.search(text)):
            return None  # a local error: the others wait for us, a health check would blame them
        first = (text.splitlines()[0] if text else type(exc).__name__).split(" This is typically caused")[0]
        where = f"rank {self.rank} of {self.world}: a collective failed at env step {self.counters.env_steps}"
        try:
            health_check(self.health_timeout)
        except DeadRankError as dead:
            if dead.ranks:
                return DeadRankError(f"{where}; rank(s) {dead.ranks} are dead or stuck ({first})", dead.ranks)
        except RuntimeError:
            pass
        else:
            return RuntimeError(
                f"{where} ({first}), yet every rank answered a health check afterwards: none died, so the ranks "
                "most likely called different collectives; rerun with --debug (DING_DIST_DEBUG=1) to see where"
            )
        return DeadRankError(
            f"{where} because a peer rank closed its connection or stopped answering (it died or was stopped; "
            f"the launcher's summary names it): {first}",
            [],
        )

    def _close_envs(self) -> None:
        for worker in (self.collector, self.evaluator):
            if worker is not None:
                try:
                    worker.close()
                except OSError as e:  # its env processes already exited (e.g. SIGTERM to the process group)
                    logger.info("closing the %s's envs: %s (their processes had exited)", type(worker).__name__, e)
                except Exception as e:  # keep closing the rest
                    logger.warning("closing the %s's envs failed: %s", type(worker).__name__, e)

    def close(self) -> None:
        self.writer.close()
        self._close_envs()

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
        n_sample_global = p.collect.n_sample * self.world  # to_ddp_config divided the global n_sample by N
        logger.info(
            "%s: %d rank(s) x %d envs, %d global env steps per iteration, policy on %s, exp dir %s",
            cfg.exp_name,
            self.world,
            self.collector.num_envs,
            global_per_iter,
            self.policy.device,
            self.exp_dir,
        )
        if self.buffer is not None and global_per_iter != n_sample_global:
            logger.info(
                "collect.n_sample=%d global env steps rounds up to %d per iteration (whole vector steps of %d envs "
                "x %d ranks); updates follow the env steps: update_per_collect=%d per %d env steps, exactly",
                n_sample_global,
                global_per_iter,
                self.collector.num_envs,
                self.world,
                p.learn.update_per_collect,
                n_sample_global,
            )

        bar = progress_bar(self.max_env_steps, desc="env steps", initial=c.env_steps)
        stopped_by, log_pending = "max_env_steps", 0
        debug = debug_enabled()
        try:
            while self.max_env_steps is None or c.env_steps < self.max_env_steps:
                rollout = self.collector.collect(n_vec, c.env_steps)
                before, c.env_steps = c.env_steps, c.env_steps + global_per_iter
                log_pending += local_per_iter
                iters_before = self.policy.train_iter
                if self.buffer is None:
                    self.learner.train_rollout(rollout)
                else:
                    self.buffer.extend(rollout)
                    if c.env_steps >= learning_starts:
                        n_updates = self._updates_due(global_per_iter, n_sample_global)
                        self.learner.train_replay(self.buffer, n_updates, p.learn.batch_size)
                if debug and self.policy.train_iter // DEBUG_CHECK_EVERY > iters_before // DEBUG_CHECK_EVERY:
                    self.check_consistency()

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
            if log_pending:  # whatever stopped the run, its last episodes and updates are logged
                self.log(log_pending, wall_start, steps_at_start)
            if stopped_by != "stop_value" and (not c.eval_history or c.eval_history[-1][0] != c.env_steps):
                if self.evaluate():
                    stopped_by = "stop_value"
            self.checkpoint()
        except Exception as exc:
            clearer = self.diagnose(exc)
            if clearer is None:
                raise
            raise clearer from exc
        except BaseException as exc:  # SIGTERM (SystemExit) or Ctrl-C: log where it stopped
            why = "SIGTERM" if isinstance(exc, SystemExit) and exc.code == EXIT_SIGTERM else type(exc).__name__
            logger.warning("stopping at env step %d (%s); newest checkpoint: %s", c.env_steps, why, self.ckpt.latest())
            raise
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
def _run_pipeline(config: ConfigArg, **run_options: Any) -> dict[str, Any]:
    with _sigterm_exits():
        return _Run(config, **run_options).run()


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
    main, create = _read(config)
    policy_cls = get_policy_cls((create.get("policy") or {}).get("type"))
    options = dict(seed=seed, overrides=overrides, exp_dir=exp_dir, max_env_steps=max_env_steps, resume=resume)
    return _run_pipeline((main, create), on_policy=policy_cls.on_policy, health_timeout=health_timeout, **options)


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
