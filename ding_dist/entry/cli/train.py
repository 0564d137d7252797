"""``ding-dist train`` (and ``resume``, and ``--requeue`` under SLURM): the checks of its flags, the run it resumes,
then one rank here, or the ranks through the local or elastic launcher.

Example:
    >>> from ding_dist.entry.cli import main
    >>> main(["train", "cartpole_dqn", "--max-env-steps", "1000"])  # doctest: +SKIP
    0
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ding_dist.entry.cli.checks import (
    check_config,
    check_config_or_name,
    check_local_world,
    check_wandb,
    check_writable,
    checked_config,
    name_the_config,
    under_launcher,
)
from ding_dist.entry.cli.errors import (
    ERROR_FILE_ENV,
    EXIT_SIGTERM,
    EXIT_SIGUSR1,
    PROG,
    UsageError,
)
from ding_dist.entry.cli.launching import (
    DEBUG_ENV,
    TIMEOUT_ENV,
    child_argv,
    env_set,
    restart_env,
    run_rank,
    run_recorded_rank,
)
from ding_dist.entry.cli.local_launch import launch_local
from ding_dist.utils.logging import TRACK_ENV

__all__ = ["REQUEUE_ENV", "train_command"]

REQUEUE_ENV = "SLURM_RESTART_COUNT"  # SLURM sets it in a requeued job


_REQUEUED = (EXIT_SIGTERM, EXIT_SIGUSR1)  # a scheduler's stops (Ctrl-C is the user's: not requeued)


def train_command(args: argparse.Namespace, entry: Callable[[list[str]], int]) -> int:
    """``ding-dist train`` (``resume`` comes here as ``train --resume``); ``entry`` is what a forked local rank runs
    with its argv (the CLI's ``main``). Returns the exit code."""
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
    check_config_or_name(args)
    if args.algo is not None:
        from ding_dist.config.presets import preset_config

        args.config = str(preset_config(args.algo, args.env))
    config = check_config(args.config)
    resumed = None
    if args.resume is not None:
        _check_run_folder(args.resume)
        ckpts = CheckpointManager(_checkpoint_folder(args.resume))
        newest = ckpts.latest()
        if newest is None:
            raise UsageError(f"--resume {args.resume!r}: no complete checkpoint in its ckpt/ folder"
                             if ckpts.directory.is_dir() else f"--resume {args.resume!r} holds no checkpoint (no "
                             "ckpt/ folder: the run stopped before its first one); start it again")  # fmt: skip
        resumed = load_checkpoint(newest)
        check_finite_weights(resumed, newest)  # one line now, not a failure at the first updates of every rank
    auto = _auto_mode(args)
    if args.nproc is None:
        args.nproc = 1 if resumed is None or under_launcher() else _resumed_world(args, resumed)
    if args.exp_dir is not None and Path(args.exp_dir).exists() and not Path(args.exp_dir).is_dir():
        raise UsageError(f"--exp-dir {args.exp_dir!r} exists and is not a folder")
    if args.nnodes is not None and args.exp_dir is None and args.resume is None:
        raise UsageError("--nnodes needs --exp-dir: the experiment folder every node of the job shares")
    if (args.exp_dir is not None and args.resume is None and not under_launcher() and pipeline.holds_run(args.exp_dir)
            and not _elastic_job_folder(args)):  # fmt: skip
        raise UsageError(
            f"--exp-dir {args.exp_dir!r} already holds a run: add --resume {args.exp_dir} to continue it, "
            "or choose another folder"
        )
    asked_nproc = args.nproc
    args.nproc = _actor_learner_nproc(args)
    if getattr(args, "population", None) is not None:  # an override, which every rank gets
        args.overrides = [*args.overrides, f"pbt.population={args.population}"]
        args.population = None
    if getattr(args, "checkpoint_minutes", None) is not None:  # an override, which every rank gets
        args.overrides = [*args.overrides, f"policy.other.checkpoint.every_minutes={args.checkpoint_minutes!r}"]
        args.checkpoint_minutes = None
    cfg = checked_config(config, args, try_parts=True)
    if not under_launcher() and args.nnodes is None:  # a population's members share the processes evenly
        from ding_dist.config.pbt import population_error

        error = population_error(int(cfg.pbt.population), args.nproc)
        if error is not None:
            raise UsageError(error)
    choose = not under_launcher() and args.exp_dir is None and args.resume is None  # the default folder, chosen here
    if not under_launcher():  # a folder no rank can write: one line now, not a traceback from every rank
        args.exp_dir_chosen = choose
        check_writable(Path("runs") / cfg.exp_name if choose else args.exp_dir or args.resume, args)
    if args.resume is not None and _continues_past_stop_value(args, cfg, resumed):
        cfg = checked_config(config, args)
    if args.resume is not None and _resume_is_done(args, cfg, resumed):
        return 0
    if auto:
        cfg = _train_in_fastest_mode(args, config, cfg)
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
        env[TRACK_ENV] = check_wandb()
    local = not under_launcher() and args.nnodes is None and (args.nproc > 1 or args.max_restarts > 0)
    if local:
        check_local_world(cfg, args.nproc)
    if not choose:
        return _launch(args, cfg, config, env, asked_nproc, local, entry)
    from ding_dist.entry.exp_folder import release_claim

    args.exp_dir = _claim_default_folder(cfg)  # after every check: a refused run names and creates no folder
    try:
        return _launch(args, cfg, config, env, asked_nproc, local, entry)
    finally:
        release_claim(args.exp_dir)  # when no rank took it: the claim, and the folder if left empty


def _launch(args: argparse.Namespace, cfg: Any, config: Path, env: dict[str, str], asked_nproc: int | None,
            local: bool, entry: Callable[[list[str]], int]) -> int:  # fmt: skip
    """Run the checked command: this rank (under a launcher or alone), or the ranks of a local or elastic job."""
    with env_set(env | restart_env(args.max_restarts)):
        if under_launcher():
            if (asked_nproc or 1) > 1 or args.max_restarts:
                print(f"{PROG}: already under a launcher, ignoring --nproc and --max-restarts", file=sys.stderr)
            if os.environ.get(ERROR_FILE_ENV):
                return run_recorded_rank(args, cfg)
            return run_rank(args, cfg)
        if args.nnodes is not None:  # this node's part of an elastic multi-node job
            from ding_dist.entry.cli.elastic_launch import launch_elastic

            exp_dir = Path(args.exp_dir or args.resume)
            code = launch_elastic(args, cfg, args.nproc, exp_dir.resolve(), child_argv(args, config, exp_dir))
        elif local:
            exp_dir = Path(args.exp_dir or args.resume)
            code = launch_local(args.nproc, args.max_restarts, child_argv(args, config, exp_dir), entry)
        else:
            code = run_rank(args, cfg)
    return _requeue(code) if getattr(args, "requeue", False) else code


def _auto_mode(args: argparse.Namespace) -> bool:
    """True for ``--nproc auto`` (then ``args.nproc`` is 1 until the probe decides), after refusing what it cannot
    go with; ``--probe-seconds`` without it is refused too."""
    seconds = getattr(args, "probe_seconds", None)
    if args.nproc != "auto":
        if seconds is not None:
            raise UsageError(f"--probe-seconds {seconds:g} needs --nproc auto")
        return False
    for flag, given in (("--resume", args.resume), ("--actors", args.actors), ("--learners", args.learners),
                        ("--population", getattr(args, "population", None)), ("--nnodes", args.nnodes)):  # fmt: skip
        if given is not None:
            raise UsageError(f"--nproc auto cannot go with {flag}: it picks the processes and roles of a new run "
                             "on this machine; give --nproc N instead")  # fmt: skip
    args.nproc = 1
    if under_launcher():  # the launcher's world it is
        if os.environ.get("RANK", "0") == "0":
            print(f"{PROG}: already under a launcher, ignoring --nproc auto", file=sys.stderr)
        return False
    return True


def _train_in_fastest_mode(args: argparse.Namespace, config: Path, cfg: Any) -> Any:
    """``--nproc auto``: probe the ways to run (:mod:`~ding_dist.entry.cli.auto_mode`), set ``args`` for the
    fastest, and return the config compiled for it."""
    from ding_dist.entry.cli.auto_mode import DEFAULT_PROBE_SECONDS, choose_mode
    from ding_dist.entry.threads import cpu_cores

    if cfg.actor_learner.actors:
        raise UsageError(f"--nproc auto: the config sets actor_learner.actors={cfg.actor_learner.actors}, so its "
                         "roles are fixed; give --nproc N, or leave actor_learner.actors at 0")  # fmt: skip
    seconds = args.probe_seconds if args.probe_seconds is not None else DEFAULT_PROBE_SECONDS
    chosen = choose_mode(config, cfg, args, cpu_cores(), seconds)
    if chosen.actors:
        args.actors, args.learners = chosen.actors, chosen.processes - chosen.actors
        args.nproc = _actor_learner_nproc(args)
        return checked_config(config, args)
    args.nproc = chosen.processes
    return cfg


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


def _claim_default_folder(cfg: Any) -> str:
    """The new run's default folder (``runs/<exp_name>``, else with its seed and time), claimed for the ranks this
    command starts; its log line names ``ding-dist resume`` to continue the run that took ``runs/<exp_name>``."""
    from ding_dist.entry.exp_folder import default_exp_dir

    try:
        return str(default_exp_dir(cfg.exp_name, cfg.seed, resume_hint="ding-dist resume {folder}"))
    except OSError as e:
        where = f" at {e.filename!r}" if e.filename else ""
        raise UsageError(f"the experiment folder of {cfg.exp_name!r} cannot be created under 'runs' "
                         f"({e.strerror or e}{where}); give --exp-dir") from e  # fmt: skip


def _check_run_folder(exp_dir: str) -> None:
    """``--resume EXP_DIR``: one line unless it is a folder a run wrote (a config, ``tb/`` or ``ckpt/`` in it)."""
    from ding_dist.entry.exp_folder import is_run_folder

    folder = Path(exp_dir)
    if not folder.exists():
        raise UsageError(f"--resume {exp_dir!r} is not an experiment folder: it does not exist")
    if not folder.is_dir():
        raise UsageError(f"--resume {exp_dir!r} is not an experiment folder: it is a file")
    if not is_run_folder(folder):
        raise UsageError(f"--resume {exp_dir!r} is not a run folder (no config.json, no ckpt/): resume continues a "
                         "folder that ding-dist train wrote")  # fmt: skip


def _checkpoint_folder(exp_dir: str) -> Path:
    """The ``ckpt/`` folder a resume of ``exp_dir`` continues from: its own, or for a population its first member's
    (every member checkpoints at the same env steps)."""
    member = Path(exp_dir) / "member0" / "ckpt"
    return member if member.is_dir() else Path(exp_dir) / "ckpt"


def _resume_config(exp_dir: str) -> str:
    """``train --resume EXP_DIR`` without CONFIG: the run's saved config as data (its newest ``.json``, after
    resumes), which runs no code; a run folder's ``config.py`` runs only when the user names it."""
    from ding_dist.entry.services.run_folder import run_config

    _check_run_folder(exp_dir)
    found = run_config(exp_dir)
    if found is None:
        raise UsageError(f"--resume {exp_dir!r} has no saved config.json: {name_the_config(exp_dir, 'resume')}")
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


def _resume_is_done(args: argparse.Namespace, cfg: Any, state: dict) -> bool:
    """A resume keeps the run's ``--max-env-steps`` unless given again; True (after one line on stdout) when
    the run already reached it or ``env.stop_value``, so no iteration is run."""
    from ding_dist.entry.services.run_folder import done_message
    from ding_dist.entry.torchrun_job import restart_count

    if args.max_env_steps is None:
        args.max_env_steps = state.get("max_env_steps")
    done = done_message(args.resume, state, cfg.env.get("stop_value"), args.max_env_steps)
    if done is None or restart_count() > 0:
        return False
    if os.environ.get("RANK", "0") == "0":
        print(f"{PROG}: {done}", flush=True)
    return True


def _elastic_job_folder(args: argparse.Namespace) -> bool:
    """``--nnodes``: True when ``--exp-dir`` holds the run of this very job (its id in the folder), which a node
    that joins, or a job started again with the same id, continues."""
    from ding_dist.entry.cli.elastic_launch import job_id_for
    from ding_dist.entry.torchrun_job import JOB_FILE

    if args.nnodes is None:
        return False
    folder = Path(args.exp_dir)
    try:
        return (folder / JOB_FILE).read_text(encoding="utf-8").strip() == job_id_for(args, folder.resolve())
    except OSError:
        return False


def _resumed_world(args: argparse.Namespace, state: dict) -> int:
    """``train --resume`` without ``--nproc``: the world size the checkpoint was written by, and its roles (an
    actor-learner run resumes with its actors and learners unless ``--actors`` says otherwise)."""
    roles = state.get("roles")
    if roles and args.actors is None and args.learners is None:
        args.actors, args.learners = int(roles["actors"]), int(roles["learners"])
        print(f"{PROG}: resuming with {args.actors} actor(s) and {args.learners} learner(s), as the run was trained "
              "(--actors/--learners change it)", file=sys.stderr)  # fmt: skip
        return 1
    world = 1 if roles else int(state.get("world_size") or 1) * int((state.get("pbt") or {}).get("population", 1))
    if world > 1:
        print(f"{PROG}: resuming on {world} processes, as the run was trained (--nproc changes it)", file=sys.stderr)
    return world


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
