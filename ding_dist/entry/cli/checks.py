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
import math
import os
import sys
from pathlib import Path
from typing import Any, NamedTuple

from ding_dist.config import CompiledConfig, ConfigError, load_config, read_config
from ding_dist.config.presets import find_config
from ding_dist.entry.cli.errors import (
    PROG,
    UsageError,
    first_line,
    refuse_unwritable,
)
from ding_dist.utils.install import install_hint

__all__ = ["check_config", "check_config_or_name", "check_cuda_overrides", "check_local_world", "check_sample_groups",
           "check_wandb", "check_writable", "checked_config", "name_the_config", "resolve_checkpoint", "under_launcher",
           "CheckpointChoice", "choose_checkpoint"]  # fmt: skip


def check_config(path: str) -> Path:
    """The config file ``path`` names (a shipped config by name: ``ding-dist train cartpole_ppo``); a missing one is
    one line. It is read when it is compiled, once per process (:func:`checked_config`)."""
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


WHICH = ("best", "last")  # eval's --which
_TORCH_MAGIC = (b"PK\x03\x04", b"\x80")  # torch.save's zip archive; the older plain pickle
_CHECKPOINT_SUFFIXES = (".pt", ".pth", ".ckpt", ".bin", ".tar")  # named as a checkpoint: truncated, not another kind
_RUN_FILES = {"config.json": "a run's config", "config.py": "a run's config", "result.json": "a run's result",
              "metrics.jsonl": "a run's metrics log"}  # fmt: skip


class CheckpointChoice(NamedTuple):
    """:func:`choose_checkpoint`'s answer: the file, which one it is (``"best"``, ``"last"``; None: a file was
    given) and why it was chosen (what ``ding-dist eval`` prints; None for a file given)."""

    path: Path
    which: str | None
    why: str | None


def _not_a_checkpoint(p: Path) -> str | None:
    """What ``p`` is when it cannot be a checkpoint (it does not begin as a ``torch.save`` file does and is not
    named as one), else None; a file named as a checkpoint that does not load is truncated or corrupt instead."""
    if p.suffix.lower() in _CHECKPOINT_SUFFIXES:
        return None
    try:
        with open(p, "rb") as f:
            head = f.read(4)
    except OSError:
        return None  # loading it says why
    if head.startswith(_TORCH_MAGIC):
        return None
    return _RUN_FILES.get(p.name) or (f"a {p.suffix} file" if p.suffix else "not a file torch.save wrote")


def _step_and_return(counters: Any, key: str) -> tuple[str, str | None]:
    """``("env step N", "R")`` from a checkpoint's counters: its env step and evaluation return ``key``
    (``best_eval``, ``last_eval``; None when it records none)."""
    counters = counters if isinstance(counters, dict) else {}
    step, value = counters.get("env_steps"), counters.get(key)
    at = f"env step {step}" if isinstance(step, int) else "an unknown env step"
    finite = isinstance(value, (int, float)) and math.isfinite(value)
    return at, str(round(float(value), 3)) if finite else None


def _newest(folder: Path) -> tuple[Path, dict] | None:
    """The newest numbered checkpoint of ``folder`` that loads, and its state (unusable ones skipped, said)."""
    import logging

    from ding_dist.utils.checkpoint import CheckpointError, CheckpointManager, load_checkpoint

    for path in reversed(CheckpointManager(folder).checkpoints()):
        try:
            return path, load_checkpoint(path)
        except CheckpointError as e:
            logging.getLogger(__name__).warning("skipping unusable checkpoint: %s", e)
    return None


def choose_checkpoint(path: str | os.PathLike, which: str | None = None) -> CheckpointChoice:
    """The checkpoint ``--ckpt path --which which`` names, and why.

    A file is taken as given (``which`` must then be None: there is nothing to choose); one that cannot be a
    checkpoint (a run's ``config.json``, any file that is not a ``torch.save`` one and not named ``*.pt``) is one
    line saying so. A folder (a run, or its ``ckpt/``): ``which="best"`` its ``best.pt`` (the weights of its best
    evaluation), ``"last"`` its newest complete numbered checkpoint; ``None`` the best where the run has one, else
    the newest.

    Example:
        >>> import tempfile
        >>> choose_checkpoint(tempfile.mkdtemp())  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ding_dist.entry.cli.errors.UsageError: no complete checkpoint in ...
    """
    from ding_dist.entry.services.checkpointing import BEST_FILE  # torch: not on the --help path
    from ding_dist.utils.checkpoint import CheckpointError, load_checkpoint

    if which is not None and which not in WHICH:
        raise UsageError(f"--which must be one of {', '.join(WHICH)}, got {which!r}")
    p = Path(path)
    if p.is_file():
        if which is not None:
            raise UsageError(f"--which {which} chooses among a run's checkpoints, and --ckpt {str(p)!r} is a file: "
                             "give the run folder (or its ckpt/) to choose, or leave --which out")  # fmt: skip
        what = _not_a_checkpoint(p)
        if what is not None:
            raise UsageError(f"{str(p)!r} is not a checkpoint file ({what}); give the run folder or a ckpt/*.pt file")
        return CheckpointChoice(p, None, None)
    if not p.is_dir():
        raise UsageError(f"checkpoint {str(p)!r} does not exist")
    folder = p / "ckpt" if (p / "ckpt").is_dir() else p
    best = folder / BEST_FILE
    unusable = ""
    if which != "last" and best.is_file():
        try:
            state = load_checkpoint(best)
        except CheckpointError as e:
            if which == "best":
                raise
            unusable = f"; {best} does not load ({first_line(e)})"
        else:
            at, value = _step_and_return(state.get("counters"), "best_eval")
            return CheckpointChoice(best, "best", f"best: eval return {value} at {at}; --which last for the newest")
    if which == "best":
        raise UsageError(f"--which best: {str(folder)!r} holds no {BEST_FILE} (a run writes it when an evaluation "
                         "beats its best return so far); --which last for its newest checkpoint")  # fmt: skip
    found = _newest(folder)
    if found is None:
        raise UsageError(f"no complete checkpoint in {str(folder)!r}")
    latest, state = found
    if which == "last":
        note = "; --which best for the best" if best.is_file() else ""
    else:
        note = unusable or f"; no {BEST_FILE} in {str(folder)!r}"
    at, value = _step_and_return(state.get("counters"), "last_eval")
    evaluated = f"latest eval return {value}" if value is not None else "no evaluation recorded"
    return CheckpointChoice(latest, "last", f"newest: {at}, {evaluated}{note}")


def resolve_checkpoint(path: str | os.PathLike, which: str | None = None) -> Path:
    """The checkpoint file ``--ckpt path --which which`` names (:func:`choose_checkpoint`): a file as given, or a
    run folder's (or its ``ckpt/``'s) ``best.pt`` or newest complete numbered checkpoint.

    Example:
        >>> import tempfile
        >>> resolve_checkpoint(tempfile.mkdtemp(), which="last")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ding_dist.entry.cli.errors.UsageError: no complete checkpoint in ...
    """
    return choose_checkpoint(path, which).path


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


def check_cuda_overrides(overrides: Any) -> None:
    """``--set policy.device=cuda`` (any ``device`` or ``*_device`` key given a CUDA device) on a machine without
    CUDA: one line saying there is none and what works, before the config is compiled.

    Example:
        >>> check_cuda_overrides(["policy.device=cpu", "policy.learn.batch_size=64"])  # nothing asks for CUDA
    """
    from ding_dist.config import parse_override

    for override in overrides:
        try:
            keys, value = parse_override(override)
        except Exception:  # a malformed override: compiling the config says so
            continue
        key = ".".join(keys)
        if not (keys[-1] == "device" or keys[-1].endswith("_device")) or not str(value).lower().startswith("cuda"):
            continue
        import torch  # device_count asks NVML first: ranks forked from this launcher can still use CUDA

        if not (torch.backends.cuda.is_built() and torch.cuda.device_count() > 0):
            raise UsageError(f"--set {override}: this machine has no CUDA (torch sees no CUDA device); use {key}=cpu, "
                             f"or {key}=auto (the rank's GPU where there is one, else the CPU)")  # fmt: skip


def checked_config(config: Path, args: argparse.Namespace, *, try_parts: bool = False) -> CompiledConfig:
    """The CLI's config: ``config`` compiled by :func:`~ding_dist.config.load_config` with ``args``' seed and
    overrides (those it has); a bad one is one line.

    ``try_parts``: also make its env and build its policy (on CPU), so a config that cannot run is one line before any
    process starts. A config file is a program every process runs (and may ask which rank it is), so each process
    compiles it; the trial runs once: a rank forked from the launcher inherits the launcher's record and skips it.
    """
    seed, overrides = getattr(args, "seed", None), tuple(getattr(args, "overrides", ()))
    check_cuda_overrides(overrides)
    key = (str(config), config.read_bytes(), seed, overrides) if try_parts else None
    trial = key is not None and key not in _TRIED
    if trial:
        import torch

        # One thread: OpenMP's worker threads do not survive a fork, and ranks forked from a launcher that had
        # started them hang in their first parallel op. The run sets its own threads (default_threads).
        torch.set_num_threads(1)
    try:
        cfg = load_config(str(config), seed=seed, overrides=overrides)
    except ConfigError:
        raise
    except (ValueError, KeyError, TypeError) as e:  # e.g. an unknown policy type, a negative size
        raise UsageError(f"config {str(config)!r}: {first_line(e)}") from e
    if trial:
        _try_parts(cfg, config, args)
        _TRIED.add(key)
    return cfg


#: The configs (file, contents, seed, overrides) whose env and policy this process tried, or the launcher it was
#: forked from.
_TRIED: set[tuple] = set()


def _try_parts(cfg: CompiledConfig, config: Path, args: argparse.Namespace) -> None:
    from ding_dist.envs import make_env

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
    members = max(1, int((cfg.get("pbt") or {}).get("population", 1)))  # a population: each member's ranks
    errors = split_errors(cfg, al.learners, "--learners") if al.actors else split_errors(cfg, max(1, nproc // members))
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
