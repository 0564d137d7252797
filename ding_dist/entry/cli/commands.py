"""The ``ding-dist`` commands: train (and resume), eval (with its video and GIF recordings), config show, ckpt
convert, and
:func:`main`, which parses the arguments and runs one of them (plot: :mod:`ding_dist.entry.cli.plot`).

Every call the CLI makes into the training side (``ding_dist.entry.pipeline``, ``experiment``, ``roles``,
``services.run_folder``) is in this module, imported where it is used (they import torch), except
``PEER_FAILURE``, which the failure summary of :mod:`ding_dist.entry.cli.local_launch` reads.

Under any launcher (torchrun, or ``srun`` with SLURM variables) ``ding-dist train`` only runs its own rank;
without one, ``--nproc N`` > 1 or ``--max-restarts K`` > 0 starts the ranks through
:mod:`ding_dist.entry.cli.local_launch`. Bad input ends with one line ``ding-dist: error: ...`` on stderr and
exit code 2, before any process is started.

Example:
    >>> from ding_dist.entry.cli import main
    >>> main(["config", "show", "cartpole_dqn"])  # doctest: +SKIP
    0
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

from ding_dist.config import ConfigError, read_config
from ding_dist.config.presets import find_config
from ding_dist.entry.cli.errors import (
    ERROR_FILE_ENV,
    EXIT_SIGINT,
    EXIT_SIGTERM,
    EXIT_SIGUSR1,
    EXIT_USAGE,
    PROG,
    UsageError,
    error_line,
    first_line,
    no_room,
    record_for_launcher,
    refuse_unwritable,
)
from ding_dist.entry.cli.local_launch import launch_local
from ding_dist.entry.cli.parser import build_parser
from ding_dist.utils.exp_lock import ExperimentInUseError
from ding_dist.utils.fileio import shown_path
from ding_dist.utils.install import install_hint
from ding_dist.utils.logging import TRACK_ENV, get_logger

__all__ = ["main", "run", "resolve_checkpoint"]

DEBUG_ENV = "DING_DIST_DEBUG"
TIMEOUT_ENV = "DING_DIST_TIMEOUT"
SHARE_STORE_ENV = "TORCH_DISABLE_SHARE_RDZV_TCP_STORE"


def _check_config(path: str) -> Path:
    """The config file ``path`` names (a shipped config by name: ``ding-dist train cartpole_ppo``); a missing one is
    one line. It is read when it is compiled, once per process (``_check_compiles``)."""
    p = find_config(path)
    if not p.is_file() or p.suffix not in (".py", ".json"):
        read_config(p)  # raises the loader's one line: missing, a folder, not a Python file
    return p.resolve()


def _under_launcher() -> bool:
    """True when torchrun or SLURM variables say this process is one rank of a larger world, or a process
    group already runs (e.g. ``ding_dist.launch`` called the CLI's ``main`` in each rank)."""
    from ding_dist.comm import is_fake, resolve_launch_settings

    if not is_fake():
        return True
    try:
        return not resolve_launch_settings().is_fake
    except ValueError as e:  # e.g. RANK set without MASTER_ADDR
        raise UsageError(f"launcher environment is incomplete: {e}") from None


def resolve_checkpoint(path: str | os.PathLike) -> Path:
    """A checkpoint file as given, or the newest complete checkpoint in a folder (or its ``ckpt/``).

    Example:
        >>> import tempfile
        >>> resolve_checkpoint(tempfile.mkdtemp())  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ding_dist.entry.cli.errors.UsageError: no complete checkpoint in ...
    """
    from ding_dist.utils.checkpoint import CheckpointManager  # imports torch: not on the --help path

    p = Path(path)
    if p.is_file():
        return p
    if p.is_dir():
        folder = p / "ckpt" if (p / "ckpt").is_dir() else p
        latest = CheckpointManager(folder).latest()
        if latest is None:
            raise UsageError(f"no complete checkpoint in {str(folder)!r}")
        return latest
    raise UsageError(f"checkpoint {str(p)!r} does not exist")


def _print_rank0(text: str) -> None:
    from ding_dist.comm import get_rank

    if get_rank() == 0:
        print(text, flush=True)


# ----------------------------------------------------------------------------------------- train
@contextmanager
def _env_set(values: dict[str, str]) -> Iterator[None]:
    """Set environment variables (inherited by the ranks a launcher starts) and restore them afterwards."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, old in saved.items():
            if old is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = old


def _child_argv(args: argparse.Namespace, config: Path, exp_dir: Path) -> list[str]:
    # The experiment folder as the user gave it (the ranks share the launcher's working folder, restarted ones too),
    # so every rank shows it as given; the one folder chosen by the launcher, so no rank picks another.
    argv = ["train", str(config), "--exp-dir", str(exp_dir), "--health-timeout", repr(args.health_timeout)]
    if args.seed is not None:
        argv += ["--seed", str(args.seed)]
    if args.overrides:
        argv += ["--set", *args.overrides]
    if args.max_env_steps is not None:
        argv += ["--max-env-steps", str(args.max_env_steps)]
    if args.resume is not None:
        argv += ["--resume", str(args.resume)]
    if args.timeout is not None:
        argv += ["--timeout", repr(args.timeout)]
    if args.debug:
        argv += ["--debug"]
    return argv


def _summary(result: dict[str, Any], exp_dir: str | None) -> str:
    def num(key: str) -> str:
        value = result.get(key)
        return f"{value:.2f}" if isinstance(value, (int, float)) else str(value)

    folder = result.get("exp_dir") or exp_dir
    where = f"; result: {shown_path(Path(folder) / 'result.json')}" if folder else ""
    return (
        f"trained {result.get('env_steps')} env steps ({result.get('train_iters')} train iters, "
        f"world size {result.get('world_size')}) in {num('wall_time_s')} s; "
        f"eval return best {num('best_eval_return')}, last {num('last_eval_return')}{where}"
    )


_TRIED: set[tuple] = set()  # configs whose env and policy were tried; ranks forked from the launcher inherit it


def _check_compiles(config: Path, args: argparse.Namespace) -> Any:
    """Compile the config with its overrides (once per process: a config file is a program every process runs,
    and may ask which rank it is), check its sizes and try its env and policy, so bad input is one error line
    before any process starts; a rank forked from the launcher that tried them skips the trial."""
    key = (str(config), config.read_bytes(), args.seed, tuple(args.overrides))
    if key in _TRIED:
        return _compile(config, args)
    cfg = _compile_and_try(config, args)
    _TRIED.add(key)
    return cfg


def _compile(config: Path, args: argparse.Namespace) -> Any:
    """The config compiled with ``args``' seed and overrides (those it has); a bad one is one line."""
    from ding_dist.entry.experiment import load_config

    try:
        return load_config(
            str(config), seed=getattr(args, "seed", None), overrides=tuple(getattr(args, "overrides", ()))
        )
    except ConfigError:
        raise
    except (ValueError, KeyError, TypeError) as e:  # e.g. an unknown policy type, a negative size
        raise UsageError(f"config {str(config)!r}: {first_line(e)}") from e


def _compile_and_try(config: Path, args: argparse.Namespace) -> Any:
    import torch

    from ding_dist.envs import make_env

    # One thread: OpenMP's worker threads do not survive a fork, and ranks forked from a launcher that had
    # started them hang in their first parallel op. The run sets its own threads (default_threads).
    torch.set_num_threads(1)
    cfg = _compile(config, args)
    env = cfg.env
    _check_sample_groups(cfg, 1)
    what = f"entry_point {env.get('entry_point')!r}" if env.get("entry_point") else f"env.id {env.get('id')!r}"
    try:
        made = make_env(
            env.get("id"),
            entry_point=env.get("entry_point"),
            env_kwargs=env.get("env_kwargs"),
            max_episode_steps=env.get("max_episode_steps"),
        )
    except Exception as e:  # unknown id, missing module, bad env_kwargs: the env's own message says which
        if getattr(args, "algo", None) is not None:  # --algo/--env: no config file of the user's to name
            raise UsageError(f"--env {env.get('id')!r}: {first_line(e)}") from e
        raise UsageError(f"config {str(config)!r}: {what} cannot be made: {first_line(e)}") from e
    try:  # the policy on this env's spaces (on CPU): e.g. DQN on a Box action space is one line, not a traceback
        from ding_dist.entry.experiment import build_policy
        from ding_dist.policy.base import acting_only

        with acting_only():  # no optimizers: they import torch._dynamo (1.5 s) in a process that never trains
            policy = build_policy(cfg, made.observation_space, made.action_space, device="cpu")
        if cfg.actor_learner.get("inference") and getattr(policy, "recurrent", False):
            raise ValueError(
                f"actor_learner.inference=1 serves feed-forward policies; {cfg.create_config.policy.type!r} is "
                "recurrent (its state lives in each actor's envs): set actor_learner.inference=0"
            )
    except ValueError as e:
        raise UsageError(f"config {str(config)!r}: {first_line(e)} (env {env.get('id')!r})") from e
    finally:
        made.close()
    return cfg


_STOP_CODES = {"SIGINT": EXIT_SIGINT, "SIGTERM": EXIT_SIGTERM, "SIGUSR1": EXIT_SIGUSR1}  # 128 + the signal
_REQUEUED = (EXIT_SIGTERM, EXIT_SIGUSR1)  # a scheduler's stops (Ctrl-C is the user's: not requeued)
REQUEUE_ENV = "SLURM_RESTART_COUNT"  # SLURM sets it in a requeued job


def _requeue(code: int) -> int:
    """``--requeue``: after a stop by signal, ``scontrol requeue $SLURM_JOB_ID`` (the launcher, once); the code."""
    if code not in _REQUEUED:
        return code
    job = os.environ.get("SLURM_JOB_ID")
    if not job:
        print(f"{PROG}: --requeue: no SLURM_JOB_ID (not a SLURM job), so nothing is requeued", file=sys.stderr)
        return code
    try:
        done = subprocess.run(["scontrol", "requeue", job], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        print(f"{PROG}: --requeue: scontrol requeue {job} failed: {e}", file=sys.stderr)
        return code
    if done.returncode != 0:
        print(f"{PROG}: --requeue: scontrol requeue {job} failed: {done.stderr.strip()}", file=sys.stderr)
        return code
    print(f"{PROG}: requeued SLURM job {job}; it resumes from its checkpoint", file=sys.stderr)
    return code


def _run_rank(args: argparse.Namespace, cfg: Any) -> int:
    """This process's rank of the job (a world of one without a launcher), on the config compiled once."""
    from ding_dist.comm import DistContext, debug_enabled, set_debug
    from ding_dist.entry import pipeline
    from ding_dist.entry.cli.agent import die_with_agent

    die_with_agent()  # under torchrun: a killed agent leaves no orphan (this rank stops as if preempted)
    was_debug = debug_enabled()
    if args.debug:
        set_debug(True)
    try:
        with DistContext():
            result = pipeline.train(
                cfg,
                exp_dir=args.exp_dir,
                max_env_steps=args.max_env_steps,
                resume=args.resume,
                health_timeout=args.health_timeout,
            )
            _print_rank0(_summary(result, args.exp_dir))
            stopped = result.get("stopped_by")
            if stopped in _STOP_CODES:  # a preempted run: its step is checkpointed; the shell sees the signal's code
                _print_rank0(f"{PROG}: stopped by {stopped} at env step {result['env_steps']}, checkpointed")
    finally:
        set_debug(was_debug)
    return _STOP_CODES.get(stopped, 0)


def _run_recorded_rank(args: argparse.Namespace, cfg: Any) -> int:
    """``_run_rank`` under torchrun's ``record``: an uncaught exception reaches the launcher's summary."""
    from torch.distributed.elastic.multiprocessing.errors import record

    return record(_run_rank)(args, cfg)


def _resume_config(exp_dir: str) -> str:
    """``train --resume EXP_DIR`` without CONFIG: the run's saved config as data (its newest ``.json``, after
    resumes), which runs no code; a run folder's ``config.py`` runs only when the user names it."""
    from ding_dist.entry.services.run_folder import run_config

    if not Path(exp_dir).is_dir():
        raise UsageError(f"--resume {exp_dir!r} is not an experiment folder")
    found = run_config(exp_dir)
    if found is None:
        raise UsageError(f"--resume {exp_dir!r} has no saved config.json: {_name_the_config(exp_dir, 'resume')}")
    return str(found)


def _continues_past_stop_value(args: argparse.Namespace, cfg: Any, state: dict) -> bool:
    """``--resume RUN --max-env-steps N`` with N above the steps of a run that reached ``env.stop_value``: the run
    continues to N, so ``env.stop_value=None`` joins the overrides (unless ``--set`` gives one); True (after one line
    on stdout) when it was added and the config must be compiled again."""
    from ding_dist.entry.services.run_folder import reached_stop_value

    stop, steps = cfg.env.get("stop_value"), (state.get("counters") or {}).get("env_steps", 0)
    given = any(o.split("=", 1)[0].strip() == "env.stop_value" for o in args.overrides)
    if args.max_env_steps is None or args.max_env_steps <= steps or given or not reached_stop_value(state, stop):
        return False
    args.overrides = [*args.overrides, "env.stop_value=None"]
    if os.environ.get("RANK", "0") == "0":
        print(f"{PROG}: run {args.resume!r} reached env.stop_value={stop:g} at env step {steps}; it continues to "
              f"--max-env-steps {args.max_env_steps} with env.stop_value=None (--set env.stop_value=V stops it at V "
              "instead)", flush=True)  # fmt: skip
    return True


def _name_the_config(folder: str | os.PathLike, command: str) -> str:
    """What to do when a run folder holds no config as data: name a CONFIG (which runs as code)."""
    from ding_dist.entry.services.run_folder import find_run_config, old_run_config

    old = find_run_config(folder, find=old_run_config)
    if old is None:
        return "give CONFIG"
    how = f"ding-dist train {old} --resume {folder}" if command == "resume" else f"ding-dist eval {old} --ckpt {folder}"
    return (f"give CONFIG; its config.py (written by an older ding_dist) is Python and runs as code, so it is read "
            f"only when you name it, if you trust it: {how}")  # fmt: skip


def _resume_is_done(args: argparse.Namespace, cfg: Any, state: dict) -> bool:
    """A resume keeps the run's ``--max-env-steps`` unless given again; True (after one line on stdout) when
    the run already reached it or ``env.stop_value``, so no iteration is run."""
    from ding_dist.entry.experiment import restart_count
    from ding_dist.entry.services.run_folder import done_message

    if args.max_env_steps is None:
        args.max_env_steps = state.get("max_env_steps")
    done = done_message(args.resume, state, cfg.env.get("stop_value"), args.max_env_steps)
    if done is None or restart_count() > 0:
        return False
    if os.environ.get("RANK", "0") == "0":
        print(f"{PROG}: {done}", flush=True)
    return True


def _check_config_or_name(args: argparse.Namespace) -> None:
    """Exactly one of: CONFIG, or ``--algo`` with ``--env`` (or ``--resume``, which gave CONFIG); else one line."""
    by_name = [f for f, v in (("--algo", args.algo), ("--env", args.env)) if v is not None]
    if args.config is not None and by_name:
        raise UsageError(f"give CONFIG ({args.config!r}) or {' and '.join(by_name)}, not both: --algo ALGO --env "
                         "ENV_ID trains without a config file")  # fmt: skip
    if len(by_name) == 1:
        other = "--env ENV_ID" if by_name == ["--algo"] else "--algo ALGO"
        raise UsageError(f"{by_name[0]} needs {other} too (e.g. --algo ppo --env Pendulum-v1)")
    if args.config is None and not by_name:
        raise UsageError(
            "give a CONFIG file, or --algo ALGO --env ENV_ID (e.g. --algo ppo --env Pendulum-v1), or --resume EXP_DIR"
        )


def _train(args: argparse.Namespace) -> int:
    from ding_dist.entry import pipeline
    from ding_dist.utils.checkpoint import CheckpointManager, check_finite_weights, load_checkpoint

    if getattr(args, "requeue", False):
        if args.exp_dir is None and args.resume is None:
            raise UsageError("--requeue needs --exp-dir: the requeued job resumes from that folder")
        restarts = os.environ.get(REQUEUE_ENV, "0")
        if args.resume is None and restarts not in ("", "0") and pipeline.holds_run(args.exp_dir):
            args.resume, args.exp_dir = args.exp_dir, None
            print(f"{PROG}: requeued job ({REQUEUE_ENV}={restarts}): resuming {args.resume}", file=sys.stderr)
    if args.resume is not None and args.config is None and args.algo is None and args.env is None:
        args.config = _resume_config(args.resume)  # the run's own saved config
    _check_config_or_name(args)
    if args.algo is not None:
        from ding_dist.config.presets import preset_config

        args.config = str(preset_config(args.algo, args.env))
    config = _check_config(args.config)
    resumed = None
    if args.resume is not None:
        if not Path(args.resume).is_dir():
            raise UsageError(f"--resume {args.resume!r} is not an experiment folder")
        ckpts = CheckpointManager(Path(args.resume) / "ckpt")
        newest = ckpts.latest()
        if newest is None:
            raise UsageError(f"--resume {args.resume!r}: no complete checkpoint in its ckpt/ folder"
                             if ckpts.directory.is_dir() else f"--resume {args.resume!r} holds no checkpoint (no "
                             "ckpt/ folder: the run stopped before its first one); start it again")  # fmt: skip
        resumed = load_checkpoint(newest)
        check_finite_weights(resumed, newest)  # one line now, not a failure at the first updates of every rank
    if args.nproc is None:
        args.nproc = 1 if resumed is None or _under_launcher() else _resumed_world(args, resumed)
    if args.exp_dir is not None and Path(args.exp_dir).exists() and not Path(args.exp_dir).is_dir():
        raise UsageError(f"--exp-dir {args.exp_dir!r} exists and is not a folder")
    if args.nnodes is not None and args.exp_dir is None and args.resume is None:
        raise UsageError("--nnodes needs --exp-dir: the experiment folder every node of the job shares")
    if (args.exp_dir is not None and args.resume is None and not _under_launcher() and pipeline.holds_run(args.exp_dir)
            and not _elastic_job_folder(args)):  # fmt: skip
        raise UsageError(
            f"--exp-dir {args.exp_dir!r} already holds a run: add --resume {args.exp_dir} to continue it, "
            "or choose another folder"
        )
    asked_nproc = args.nproc
    args.nproc = _actor_learner_nproc(args)
    cfg = _check_compiles(config, args)
    if not _under_launcher():  # a folder no rank can write: one line now, not a traceback from every rank
        if args.exp_dir is None and args.resume is None:  # chosen (and said) once, here: every rank gets it
            args.exp_dir, args.exp_dir_chosen = str(pipeline.default_exp_dir(cfg.exp_name)), True
        _check_writable(args.exp_dir or args.resume, args)
    if args.resume is not None and _continues_past_stop_value(args, cfg, resumed):
        cfg = _compile(config, args)
    if args.resume is not None and _resume_is_done(args, cfg, resumed):
        return 0
    if cfg.actor_learner.actors and args.actors is None:  # the roles come from the config file
        al = cfg.actor_learner
        both, inference = al.actors + al.learners, al.get("inference", 0)
        if args.nproc not in (1, both, both + inference):  # --nproc may leave out the inference rank
            raise UsageError(
                f"--nproc {args.nproc} does not match the config's actor_learner.actors={al.actors} "
                f"+ actor_learner.learners={al.learners}" + (" + actor_learner.inference=1" if inference else "")
            )
        args.nproc = both + inference
    env = {TIMEOUT_ENV: repr(args.timeout)} if args.timeout is not None else {}
    if args.debug:
        env[DEBUG_ENV] = "1"
    if getattr(args, "track", False):
        env[TRACK_ENV] = _check_wandb()
    with _env_set(env | _restart_env(args.max_restarts)):
        if _under_launcher():
            if (asked_nproc or 1) > 1 or args.max_restarts:
                print(f"{PROG}: already under a launcher, ignoring --nproc and --max-restarts", file=sys.stderr)
            if os.environ.get(ERROR_FILE_ENV):
                return _run_recorded_rank(args, cfg)
            return _run_rank(args, cfg)
        if args.nnodes is not None:  # this node's part of an elastic multi-node job
            from ding_dist.entry.cli.elastic_launch import launch_elastic

            exp_dir = Path(args.exp_dir or args.resume)
            code = launch_elastic(args, cfg, args.nproc, exp_dir.resolve(), _child_argv(args, config, exp_dir))
        elif args.nproc > 1 or args.max_restarts > 0:
            _check_local_world(cfg, args.nproc)
            exp_dir = Path(args.exp_dir or args.resume)
            code = launch_local(args.nproc, args.max_restarts, _child_argv(args, config, exp_dir), main)
        else:
            code = _run_rank(args, cfg)
    return _requeue(code) if getattr(args, "requeue", False) else code


def _elastic_job_folder(args: argparse.Namespace) -> bool:
    """``--nnodes``: True when ``--exp-dir`` holds the run of this very job (its id in the folder), which a node
    that joins, or a job started again with the same id, continues."""
    from ding_dist.entry.cli.elastic_launch import job_id_for
    from ding_dist.entry.experiment import JOB_FILE

    if args.nnodes is None:
        return False
    folder = Path(args.exp_dir)
    try:
        return (folder / JOB_FILE).read_text(encoding="utf-8").strip() == job_id_for(args, folder.resolve())
    except OSError:
        return False


def _check_writable(folder: str | os.PathLike, args: argparse.Namespace) -> None:
    """Raise ``UsageError`` unless the experiment folder can be created and written."""
    what = "the experiment folder" if getattr(args, "exp_dir_chosen", False) else "--exp-dir" if args.exp_dir else (
        "--resume")  # fmt: skip
    refuse_unwritable(folder, what, folder=True)


def _resumed_world(args: argparse.Namespace, state: dict) -> int:
    """``train --resume`` without ``--nproc``: the world size the checkpoint was written by, and its roles (an
    actor-learner run resumes with its actors and learners unless ``--actors`` says otherwise)."""
    roles = state.get("roles")
    if roles and args.actors is None and args.learners is None:
        args.actors, args.learners = int(roles["actors"]), int(roles["learners"])
        print(f"{PROG}: resuming with {args.actors} actor(s) and {args.learners} learner(s), as the run was trained "
              "(--actors/--learners change it)", file=sys.stderr)  # fmt: skip
        return 1
    world = 1 if roles else int(state.get("world_size") or 1)
    if world > 1:
        print(f"{PROG}: resuming on {world} processes, as the run was trained (--nproc changes it)", file=sys.stderr)
    return world


def _check_wandb() -> str:
    """``--track``: the value of ``DING_DIST_TRACK`` once wandb is importable, else a one-line error."""
    import importlib.util

    try:
        found = importlib.util.find_spec("wandb") is not None
    except (ImportError, ValueError):  # e.g. a broken or half-installed package
        found = False
    if not found:
        raise UsageError(f"--track needs the wandb package: {install_hint('wandb')}")
    return "1"


def _check_sample_groups(cfg: Any, parts: int) -> None:
    """``env.sample_groups`` must divide each rank's collector envs (``collector_env_num / parts``): one line."""
    from ding_dist.envs.grouped import sample_groups_error

    envs = cfg.env.get("collector_env_num")
    if isinstance(envs, int) and envs % parts == 0:
        error = sample_groups_error(cfg.env.get("sample_groups", 1), envs // parts)
        if error:
            raise UsageError(error)


def _check_local_world(cfg: Any, nproc: int) -> None:
    """Before starting ``nproc`` local processes: refuse global sizes they cannot share evenly (the learners of
    an actor-learner run), and warn once when they outnumber the CPU cores."""
    from ding_dist.config.split import split_errors

    al = cfg.actor_learner
    errors = split_errors(cfg, al.learners, "--learners") if al.actors else split_errors(cfg, nproc)
    if errors:
        raise UsageError("; ".join(errors))
    _check_sample_groups(cfg, al.learners if al.actors else nproc)
    from ding_dist.entry.experiment import cpu_cores

    cores = cpu_cores()
    if nproc > cores:
        print(
            f"{PROG}: warning: {nproc} processes on {cores} CPU core(s): they will share cores and run slower "
            f"than --nproc {cores}",
            file=sys.stderr,
        )


def _actor_learner_nproc(args: argparse.Namespace) -> int:
    """``--actors N --learners M``: add their config keys to the overrides; return the processes to start."""
    if args.actors is None:
        if args.learners is not None:
            raise UsageError("--learners needs --actors (the actor-learner mode); for data-parallel use --nproc")
        return args.nproc
    learners = 1 if args.learners is None else args.learners
    if args.actors < learners:
        raise UsageError(f"--actors {args.actors} < --learners {learners}: every learner needs at least one actor")
    if args.nproc not in (1, args.actors + learners):
        raise UsageError(f"--nproc {args.nproc} does not match --actors {args.actors} + --learners {learners}")
    total = args.actors + learners
    args.overrides = [*args.overrides, f"actor_learner.actors={args.actors}", f"actor_learner.learners={learners}"]
    args.actors = args.learners = None  # from now on in the overrides, which every rank gets
    return total


def _restart_env(max_restarts: int) -> dict[str, str]:
    """Torchrun reuses one TCP store for every restart of the workers by default, so a restarted rank can
    read the gloo addresses the dead generation left there and fail to connect. With store sharing off,
    each generation's rank 0 serves a fresh store on a new port."""
    if max_restarts > 0 and SHARE_STORE_ENV not in os.environ:
        return {SHARE_STORE_ENV: "1"}
    return {}


# ------------------------------------------------------------------------------------------ eval
def _eval_config(args: argparse.Namespace) -> Path:
    """``eval``'s CONFIG: as given, else the saved config (as data) of the run ``--ckpt`` belongs to."""
    if args.config is not None:
        return _check_config(args.config)
    from ding_dist.entry.services.run_folder import find_run_config

    resolve_checkpoint(args.ckpt)  # a missing checkpoint is reported as such
    found = find_run_config(args.ckpt)  # the run's config as data: nothing of a copied folder runs
    if found is None:
        raise UsageError(f"--ckpt {args.ckpt!r} is not in a run folder with a saved config.json: "
                         f"{_name_the_config(args.ckpt, 'eval')}")  # fmt: skip
    return _check_config(str(found))


def _eval(args: argparse.Namespace) -> int:
    config = _eval_config(args)
    ckpt = resolve_checkpoint(args.ckpt)
    if getattr(args, "gif", None) and Path(args.gif).suffix.lower() != ".gif":
        raise UsageError(f"--gif must end in .gif, got {args.gif!r}")
    if args.video and Path(args.video).suffix.lower() != ".mp4":
        raise UsageError(f"--video must end in .mp4, got {args.video!r}")
    for flag, out in (("--video", args.video), ("--gif", getattr(args, "gif", None))):
        if out:
            refuse_unwritable(out, flag)  # before the evaluation and the rendering
    from ding_dist.comm import DistContext
    from ding_dist.entry import pipeline

    cfg = _compile(config, args)  # once: the evaluation and the recordings share it
    with DistContext():
        out = pipeline.evaluate(cfg, str(ckpt), episodes=args.episodes, seed=args.seed)
        if args.video:
            out["videos"] = [str(p) for p in _record_video(cfg, ckpt, args)]
        if getattr(args, "gif", None):
            out["gifs"] = [str(p) for p in _record_video(cfg, ckpt, args, gif=True)]
        if args.json:
            _print_rank0(json.dumps(_eval_record(out, ckpt, args.seed)))
        else:
            _print_rank0(
                f"checkpoint {ckpt}: mean_return {out['mean_return']:.3f} +/- {out['std_return']:.3f} "
                f"over {len(out.get('returns', [])) or args.episodes} episodes (seed {args.seed})"
            )
    return 0


def _record_video(cfg: Any, ckpt: Path, args: argparse.Namespace, gif: bool = False) -> list[Path]:
    """``eval --video OUT.mp4`` (or ``--gif OUT.gif`` with ``gif``): the checkpoint's greedy episodes, one
    unless ``--episodes`` was given, back to back in the one file named (:mod:`ding_dist.entry.cli.video`)."""
    from ding_dist.entry.cli.video import record_episodes, record_gif
    from ding_dist.entry.experiment import build_policy
    from ding_dist.envs import make_env
    from ding_dist.utils.checkpoint import load_checkpoint

    probe = make_env(cfg.env.get("id"), entry_point=cfg.env.get("entry_point"), env_kwargs=cfg.env.get("env_kwargs"))
    try:
        policy = build_policy(cfg, probe.observation_space, probe.action_space, device="cpu")
    finally:
        probe.close()
    policy.load_state_dict(load_checkpoint(ckpt)["policy"])
    episodes = args.episodes if getattr(args, "episodes_given", False) else 1
    try:
        if gif:
            paths = [record_gif(cfg, policy, args.gif, episodes=episodes, seed=args.seed)]
        else:
            paths = [record_episodes(cfg, policy, args.video, episodes=episodes, seed=args.seed)]
    except ValueError as e:
        raise UsageError(str(e)) from None
    if not args.json:
        seeds = f"seed {args.seed}" if episodes == 1 else f"seeds {args.seed}..{args.seed + episodes - 1}"
        _print_rank0(f"wrote {paths[0]} ({episodes} episode{'s' * (episodes > 1)}, {seeds})")
    return paths


def _eval_record(out: dict[str, Any], ckpt: Path, seed: int) -> dict[str, Any]:
    """``eval --json``: the summary and one ``{"return", "length"}`` per episode."""
    episodes = [{"return": float(r), "length": int(n)} for r, n in zip(out["returns"], out["lengths"])]
    return {
        "checkpoint": str(ckpt),
        "seed": seed,
        "videos": out.get("videos", []),
        "gifs": out.get("gifs", []),
        "mean_return": float(out["mean_return"]),
        "std_return": float(out["std_return"]),
        "episodes": episodes,
    }


def _plot(args: argparse.Namespace) -> int:
    from ding_dist.entry.cli.plot import plot_command

    return plot_command(args)


# ---------------------------------------------------------------------------------------- config
def _config_show(args: argparse.Namespace) -> int:
    """``ding-dist config show CONFIG``: the resolved config, a row per key (ding_dist/config/describe.py)."""
    from ding_dist.config.describe import describe, format_rows, markdown_table
    from ding_dist.entry.roles import actor_learner_default_config
    from ding_dist.envs import env_default_config
    from ding_dist.policy import get_policy_cls

    cfg = _compile(_check_config(args.config), args)
    policy_type = cfg.create_config.policy.type
    schema = {
        "exp_name": "default_experiment",
        "seed": 0,
        "env": env_default_config(),
        "policy": get_policy_cls(policy_type).default_config(),
        "actor_learner": actor_learner_default_config(),
    }
    rows = describe(cfg, schema, policy_type)
    print(markdown_table(rows, values=True) if args.markdown else format_rows(rows))
    return 0


def _ckpt_convert(args: argparse.Namespace) -> int:
    """``ckpt convert FILE``: the checkpoint rewritten as plain tensors and values (:func:`convert_checkpoint`)."""
    from ding_dist.utils.checkpoint import checkpoint_is_current, convert_checkpoint, load_checkpoint

    if checkpoint_is_current(args.file):  # nothing to rewrite: no copy, no .orig
        print(f"{PROG}: {shown_path(args.file)} already loads without running code (the current format): "
              "nothing to convert, nothing written")  # fmt: skip
        return 0
    written = convert_checkpoint(args.file, args.out)
    load_checkpoint(written)  # proof: it loads without running code now
    kept = f", the original kept as {written.name}.orig" if args.out is None else ""
    print(f"{PROG}: wrote {shown_path(written)}: it loads without running code{kept}")
    return 0


# ------------------------------------------------------------------------------------------ main
def main(argv: Sequence[str] | None = None) -> int:
    """Run ``ding-dist`` with ``argv`` (default ``sys.argv[1:]``) and return the exit code.

    Example:
        >>> main(["train", "missing_config.py"])  # doctest: +SKIP
        ding-dist: error: config file 'missing_config.py' does not exist
        2
    """
    try:
        return _main(argv)
    except KeyboardInterrupt:  # Ctrl-C while the arguments parse or torch is imported: one line too
        print(f"{PROG}: interrupted (SIGINT)", file=sys.stderr)
        return EXIT_SIGINT


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    from ding_dist.utils.checkpoint import CheckpointError  # torch, imported once the arguments parse

    get_logger("ding_dist")  # rank-aware INFO lines on stderr for the library's loggers
    if args.command == "resume":  # ding-dist resume EXP_DIR: train --resume EXP_DIR
        args.command = "train"
        args.algo = args.env = args.exp_dir = None
    commands = {"train": _train, "eval": _eval, "plot": _plot, "config": _config_show, "ckpt": _ckpt_convert}
    try:
        return commands[args.command](args)
    except (UsageError, ConfigError, CheckpointError, ExperimentInUseError) as e:
        record_for_launcher(e)
        error_line(" ".join(str(e).split()))
        return EXIT_USAGE
    except KeyboardInterrupt:  # Ctrl-C before the training loop (start-up) or after it: nothing to checkpoint
        if "RANK" not in os.environ:  # a rank leaves it to its launcher, which says it once for all of them
            print(f"{PROG}: interrupted (SIGINT)", file=sys.stderr)
        return EXIT_SIGINT
    except Exception as e:  # a full disk, quota or file-size limit (an OSError, maybe wrapped): one line, exit 2
        message = no_room(e)
        if message is None:
            raise
        record_for_launcher(e)
        error_line(message)
        return EXIT_USAGE
    except SystemExit as e:
        if e.code in _STOP_CODES.values():  # the pipeline's stop handlers: envs and writers are closed by now
            name = next(n for n, code in _STOP_CODES.items() if code == e.code)
            print(f"{PROG}: stopped by {name}", file=sys.stderr)
            return int(e.code)
        raise


def run() -> NoReturn:
    """The ``ding-dist`` command: :func:`main` on ``sys.argv``, then a quick exit.

    A process that imported torch spends 0.5-1 s tearing its modules down after the last line; a run is
    finished by then (envs, writers, process group closed, result written), so once no non-daemon thread
    is left the exit skips that teardown: atexit handlers run, stdout and stderr are flushed, then
    ``os._exit``. Every rank, and the launcher around them, ends that much sooner.

    Example (the console script ``ding-dist`` is this function)::

        python -m ding_dist.entry.cli config show configs/cartpole_dqn_config.py
    """
    code = main()
    others = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]
    if any(t.is_alive() for t in others):
        sys.exit(code)  # the interpreter joins them (e.g. an executor's idle workers) as usual
    import atexit

    atexit._run_exitfuncs()  # logging's flush, multiprocessing's cleanup, wandb, ...
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
