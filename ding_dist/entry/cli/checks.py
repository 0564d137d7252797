"""The CLI's checks of its input, each one line and exit code 2 before any process starts: the config (found, compiled
with its overrides, its env and policy tried), the checkpoint, the folders, the flags that go together, the world size.

Example:
    >>> from ding_dist.entry.cli.checks import check_config_or_name
    >>> import argparse
    >>> check_config_or_name(argparse.Namespace(config=None, algo="ppo", env=None))
    Traceback (most recent call last):
    ...
    ding_dist.entry.cli.errors.UsageError: --algo needs --env ENV_ID too (e.g. --algo ppo --env Pendulum-v1)
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from ding_dist.config import ConfigError, read_config
from ding_dist.config.presets import find_config
from ding_dist.entry.cli.errors import (
    PROG,
    UsageError,
    first_line,
    refuse_unwritable,
)
from ding_dist.utils.install import install_hint

__all__ = ["ConfigTrials", "check_compiles", "check_config", "check_config_or_name", "check_local_world",
           "check_sample_groups", "check_wandb", "check_writable", "compile_config", "name_the_config",
           "resolve_checkpoint", "under_launcher"]  # fmt: skip


def check_config(path: str) -> Path:
    """The config file ``path`` names (a shipped config by name: ``ding-dist train cartpole_ppo``); a missing one is
    one line. It is read when it is compiled, once per process (``check_compiles``)."""
    p = find_config(path)
    if not p.is_file() or p.suffix not in (".py", ".json"):
        read_config(p)  # raises the loader's one line: missing, a folder, not a Python file
    return p.resolve()


def under_launcher() -> bool:
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


def check_config_or_name(args: argparse.Namespace) -> None:
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


def name_the_config(folder: str | os.PathLike, command: str) -> str:
    """What to do when a run folder holds no config as data: name a CONFIG (which runs as code)."""
    from ding_dist.entry.services.run_folder import find_run_config, old_run_config

    old = find_run_config(folder, find=old_run_config)
    if old is None:
        return "give CONFIG"
    how = f"ding-dist train {old} --resume {folder}" if command == "resume" else f"ding-dist eval {old} --ckpt {folder}"
    return (f"give CONFIG; its config.py (written by an older ding_dist) is Python and runs as code, so it is read "
            f"only when you name it, if you trust it: {how}")  # fmt: skip


def compile_config(config: Path, args: argparse.Namespace) -> Any:
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


class ConfigTrials:
    """The configs this process compiled and whose env and policy it tried, by file, contents, seed and overrides.

    A config file is a program every process runs (and may ask which rank it is), so :meth:`check` compiles it in
    every process; the env and policy are tried once: a rank forked from the launcher inherits the launcher's
    trials (this object, in the forked memory) and skips its own.

    Example:
        >>> trials = ConfigTrials()
        >>> trials.tried
        set()
    """

    def __init__(self) -> None:
        self.tried: set[tuple] = set()

    def check(self, config: Path, args: argparse.Namespace) -> Any:
        """Compile the config with its overrides, check its sizes and try its env and policy (unless this process
        tried them), so bad input is one error line before any process starts."""
        key = (str(config), config.read_bytes(), args.seed, tuple(args.overrides))
        if key in self.tried:
            return compile_config(config, args)
        cfg = _compile_and_try(config, args)
        self.tried.add(key)
        return cfg


check_compiles = ConfigTrials().check  # the CLI's one record of the configs it tried (the launcher's ranks fork it)


def _compile_and_try(config: Path, args: argparse.Namespace) -> Any:
    import torch

    from ding_dist.envs import make_env

    # One thread: OpenMP's worker threads do not survive a fork, and ranks forked from a launcher that had
    # started them hang in their first parallel op. The run sets its own threads (default_threads).
    torch.set_num_threads(1)
    cfg = compile_config(config, args)
    env = cfg.env
    check_sample_groups(cfg, 1)
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
        from ding_dist.entry.factories import build_policy
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


def check_sample_groups(cfg: Any, parts: int) -> None:
    """``env.sample_groups`` must divide each rank's collector envs (``collector_env_num / parts``): one line."""
    from ding_dist.envs.grouped import sample_groups_error

    envs = cfg.env.get("collector_env_num")
    if isinstance(envs, int) and envs % parts == 0:
        error = sample_groups_error(cfg.env.get("sample_groups", 1), envs // parts)
        if error:
            raise UsageError(error)


def check_local_world(cfg: Any, nproc: int) -> None:
    """Before starting ``nproc`` local processes: refuse global sizes they cannot share evenly (the learners of
    an actor-learner run), and warn once when they outnumber the CPU cores."""
    from ding_dist.config.split import split_errors

    al = cfg.actor_learner
    errors = split_errors(cfg, al.learners, "--learners") if al.actors else split_errors(cfg, nproc)
    if errors:
        raise UsageError("; ".join(errors))
    check_sample_groups(cfg, al.learners if al.actors else nproc)
    from ding_dist.entry.threads import cpu_cores

    cores = cpu_cores()
    if nproc > cores:
        print(
            f"{PROG}: warning: {nproc} processes on {cores} CPU core(s): they will share cores and run slower "
            f"than --nproc {cores}",
            file=sys.stderr,
        )


def check_writable(folder: str | os.PathLike, args: argparse.Namespace) -> None:
    """Raise ``UsageError`` unless the experiment folder can be created and written."""
    what = "the experiment folder" if getattr(args, "exp_dir_chosen", False) else "--exp-dir" if args.exp_dir else (
        "--resume")  # fmt: skip
    refuse_unwritable(folder, what, folder=True)


def check_wandb() -> str:
    """``--track``: the value of ``DING_DIST_TRACK`` once wandb is importable, else a one-line error."""
    import importlib.util

    try:
        found = importlib.util.find_spec("wandb") is not None
    except (ImportError, ValueError):  # e.g. a broken or half-installed package
        found = False
    if not found:
        raise UsageError(f"--track needs the wandb package: {install_hint('wandb')}")
    return "1"
