"""The ``ding-dist`` command line: train, evaluate and plot.

::

    ding-dist train configs/cartpole_dqn_config.py                    # one process (fake link)
    ding-dist train configs/cartpole_dqn_config.py --nproc 2          # 2 local processes via torchrun
    torchrun --nproc_per_node 2 -m ding_dist.entry.cli train CONFIG   # same, launched by hand
    ding-dist eval configs/cartpole_dqn_config.py --ckpt runs/cartpole_dqn/ckpt
    ding-dist plot runs/cartpole_dqn --out curve.png
    ding-dist plot runs/dqn_s1 runs/dqn_s2 runs/dqn_s3 --smooth 3   # seeds: mean and 95% band

``--nproc N`` with N > 1 (or ``--max-restarts K`` with K > 0) hands the job to torch's own launcher
(``torch.distributed.run``, i.e. torchrun, with ``--standalone``), which starts N copies of
``ding-dist train`` without ``--nproc``; each copy finds torchrun's RANK/WORLD_SIZE and runs its rank.
``dist_init`` picks gloo on CPU and nccl on GPUs. Under any launcher (torchrun, or ``srun`` with SLURM
variables) ``ding-dist train`` only runs its own rank.

Reliability (docs/reliability.md): ``--timeout`` bounds every collective (``DING_DIST_TIMEOUT``),
``--health-timeout`` the health checks before each evaluation and checkpoint, ``--max-restarts`` lets
torchrun restart the ranks after a failure (training continues from the newest complete checkpoint),
``--debug`` checks every collective and compares the networks across ranks. When a rank fails, the job
ends with a summary naming the rank that failed first, how (exit code or signal) and its error's first
line. SIGINT ends with exit code 130, SIGTERM with 143, after every rank has stopped.

Bad input (missing files, bad ``--set`` syntax, bad or negative numbers, unknown config keys, env ids
that do not exist) ends with one line ``ding-dist: error: ...`` on stderr and exit code 2, before any
process is started.
"""

from __future__ import annotations

import argparse
import copy
import difflib
import json
import logging
import math
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from ding_dist.config import ConfigError, parse_override, read_config
from ding_dist.config.presets import find_config
from ding_dist.utils.exp_lock import ExperimentInUseError
from ding_dist.utils.fileio import shown_path
from ding_dist.utils.logging import TRACK_ENV, WANDB_HINT, get_logger

# load_curves and plot_curves (ding_dist.entry.plot) are importable from here too, see __getattr__
__all__ = ["build_parser", "main", "UsageError", "resolve_checkpoint"]

PROG = "ding-dist"
EXIT_USAGE = 2
EXIT_SIGINT = 128 + signal.SIGINT  # 130
EXIT_SIGTERM = 128 + signal.SIGTERM  # 143
DEBUG_ENV = "DING_DIST_DEBUG"
TIMEOUT_ENV = "DING_DIST_TIMEOUT"
# Torchrun's elastic agent sets this in the workers; a rank's exception is written there for the summary.
ERROR_FILE_ENV = "TORCHELASTIC_ERROR_FILE"
SHARE_STORE_ENV = "TORCH_DISABLE_SHARE_RDZV_TCP_STORE"
START_METHOD_ENV = "DING_DIST_START_METHOD"
EVAL_EPISODES = 10  # eval's --episodes default (the recording of --video/--gif defaults to 1 episode)
PLOT_KEYS = ("rollout/ep_rew_mean", "eval/mean_reward")


class UsageError(Exception):
    """Bad command-line input; reported as one line on stderr with exit code 2."""


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (no usage dump) and exit with code 2; an unknown flag
    gets the closest known one suggested."""

    def error(self, message: str) -> NoReturn:
        hint = _suggest_flag(self, message)
        self.exit(EXIT_USAGE, f"{PROG}: error: {message}{hint} (see '{self.prog} --help')\n")


def _option_strings(parser: argparse.ArgumentParser) -> set[str]:
    """Every ``--flag`` of ``parser`` and of its sub-commands."""
    found: set[str] = set()
    for action in parser._actions:
        found.update(o for o in action.option_strings if o.startswith("--"))
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found |= _option_strings(sub)
    return found


def _suggest_flag(parser: argparse.ArgumentParser, message: str) -> str:
    """``"; did you mean --nproc?"`` for ``"unrecognized arguments: --nprco 2"``, else ``""``."""
    if not message.startswith("unrecognized arguments:"):
        return ""
    known = sorted(_option_strings(parser))
    for token in message.split(":", 1)[1].split():
        if token.startswith("--"):
            close = difflib.get_close_matches(token.split("=", 1)[0], known, n=1, cutoff=0.6)
            if close:
                return f"; did you mean {close[0]}?"
    return ""


# --------------------------------------------------------------------------------- argument types
class _Given(argparse.Action):
    """Store the value and note that it was given: ``args.<dest>_given`` (eval's recordings default to 1
    episode, the evaluation to ``--episodes``' default)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:  # fmt: skip
        setattr(namespace, self.dest, values)
        setattr(namespace, f"{self.dest}_given", True)


def _int_at_least(low: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}, got {value}")
        return value

    return parse


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds > 0, got {text}")
    return value


def _seed(text: str) -> int:
    value = _int_at_least(0)(text)
    if value >= 2**32:
        raise argparse.ArgumentTypeError(f"must be < 2**32, got {value}")
    return value


def _override(text: str) -> str:
    try:
        parse_override(text)
    except ConfigError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


TRAIN_EXAMPLES = """examples:
  ding-dist train configs/cartpole_ppo_config.py             # one process (the fake link)
  ding-dist train cartpole_ppo --nproc 2                      # a shipped config by name, 2 local processes
  ding-dist train --algo ppo --env Pendulum-v1 --set policy.learn.batch_size=128
  ding-dist train configs/cartpole_impala_config.py --actors 2 --learners 1
  ding-dist train --resume runs/cartpole_ppo --max-env-steps 100000"""
RESUME_EXAMPLES = """examples:
  ding-dist resume runs/cartpole_ppo                          # on the run's own processes and roles
  ding-dist resume runs/cartpole_ppo --max-env-steps 200000 --nproc 2
  ding-dist resume runs/cartpole_ppo --set env.stop_value=None   # continue a run that solved its task"""
EVAL_EXAMPLES = """examples:
  ding-dist eval --ckpt runs/cartpole_ppo                     # the run's newest checkpoint, its own config
  ding-dist eval --ckpt runs/cartpole_ppo/ckpt/ckpt_000016384.pt --episodes 20 --json
  ding-dist eval --ckpt runs/cartpole_ppo --video cartpole.mp4   # one greedy episode as an MP4"""
PLOT_EXAMPLES = """examples:
  ding-dist plot runs/cartpole_ppo --out curve.png
  ding-dist plot runs/ppo_s0 runs/ppo_s1 runs/ppo_s2 --smooth 3    # seeds: their mean and a 95% band
  ding-dist plot runs --keys eval/mean_reward,train/loss --x wall_time"""
CONFIG_EXAMPLES = """examples:
  ding-dist config show configs/cartpole_dqn_config.py
  ding-dist config show my_ding_config.py --set policy.learn.batch_size=64 --markdown"""


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of ``ding-dist`` (sub-commands train, resume, eval, plot, config).

    Example:
        >>> args = build_parser().parse_args(["train", "cfg.py", "--nproc", "2", "--set", "seed=3"])
        >>> args.command, args.nproc, args.overrides
        ('train', 2, ['seed=3'])
    """
    parser = _Parser(prog=PROG, description="Train, evaluate and plot ding_dist RL runs.", allow_abbrev=False)
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="{train,resume,eval,plot,config}", parser_class=_Parser
    )

    # train's options, shared with resume (a parent parser)
    shared = _Parser(add_help=False, allow_abbrev=False)
    shared.add_argument(
        "--nproc",
        type=_int_at_least(1),
        default=None,
        help="local processes; > 1 starts them with torchrun (ignored when already under a launcher); default 1, "
        "with --resume the run's own world size and roles",
    )
    shared.add_argument(
        "--actors",
        metavar="N",
        type=_int_at_least(1),
        default=None,
        help="actor-learner mode: N processes that only collect (sets actor_learner.actors; the world is N + M)",
    )
    shared.add_argument(
        "--learners",
        metavar="M",
        type=_int_at_least(1),
        default=None,
        help="with --actors: M learner processes that synchronize gradients among themselves (default 1)",
    )
    shared.add_argument("--seed", type=_seed, default=None, help="random seed (default: the config's, else 0)")
    shared.add_argument(
        "--set",
        dest="overrides",
        metavar="KEY=VALUE",
        type=_override,
        nargs="+",
        action="extend",
        default=[],
        help="config overrides, e.g. --set policy.learn.batch_size=64 env.collector_env_num=4",
    )
    shared.add_argument(
        "--max-env-steps",
        type=_int_at_least(1),
        default=None,
        help="stop after N env steps",
    )
    shared.add_argument(
        "--timeout",
        metavar="SECONDS",
        type=_seconds,
        default=None,
        help="collective timeout of every rank: a rank that waits longer on a peer fails (sets DING_DIST_TIMEOUT; "
        "default: $DING_DIST_TIMEOUT or 1800)",
    )
    shared.add_argument(
        "--health-timeout",
        metavar="SECONDS",
        type=_seconds,
        default=60.0,
        help="bound of the health check of all ranks before each evaluation and checkpoint (default 60)",
    )
    shared.add_argument(
        "--max-restarts",
        metavar="K",
        type=_int_at_least(0),
        default=0,
        help="restart all ranks up to K times after a failure, continuing from the newest complete checkpoint "
        "(runs under torchrun, also with --nproc 1)",
    )
    shared.add_argument(
        "--debug",
        action="store_true",
        help="check every collective for mismatches across ranks and compare the networks every "
        "100 train iterations and at each checkpoint (sets DING_DIST_DEBUG=1; slower)",
    )
    shared.add_argument(
        "--track",
        action="store_true",
        help="also log to Weights & Biases (wandb.init with sync_tensorboard, on the logging rank; offline "
        "unless WANDB_MODE or WANDB_API_KEY is set; needs: pip install -e .[wandb])",
    )

    train = sub.add_parser(
        "train", parents=[shared], help="train from a config file", allow_abbrev=False, epilog=TRAIN_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    train.add_argument(
        "config",
        nargs="?",
        default=None,
        help="Python config file defining main_config (and create_config); with --resume: the run's saved one",
    )
    train.add_argument("--algo", default=None, help="train this policy (dqn, ppo, sac, ...) without a config file")
    train.add_argument("--env", default=None, help="with --algo: the gymnasium env id (tuned values for shipped envs)")
    train.add_argument("--exp-dir", default=None, help="experiment folder (default: runs/<exp_name>)")
    train.add_argument("--resume", metavar="EXP_DIR", default=None, help="continue the run saved in EXP_DIR")
    resume = sub.add_parser(
        "resume", parents=[shared], help="continue a run (train --resume EXP_DIR)", allow_abbrev=False,
        epilog=RESUME_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    resume.add_argument("resume", metavar="EXP_DIR", help="the run's experiment folder")
    resume.add_argument(
        "--config", default=None, help="another config file to continue with (default: the run's own saved one)"
    )

    ev = sub.add_parser(
        "eval", help="evaluate a checkpoint", allow_abbrev=False, epilog=EVAL_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    ev.add_argument(
        "config",
        nargs="?",
        default=None,
        help="the config file the checkpoint was trained with (default: the run's own saved config)",
    )
    ev.add_argument("--ckpt", required=True, help="checkpoint file, or a folder: its newest complete checkpoint")
    ev.add_argument(
        "--episodes",
        type=_int_at_least(1),
        default=EVAL_EPISODES,
        action=_Given,
        metavar="K",
        help=f"evaluation episodes (default {EVAL_EPISODES}); with --video/--gif also the episodes recorded, "
        "back to back in the one file (default: 1 recorded)",
    )
    ev.add_argument("--seed", type=_seed, default=0, help="evaluation seed (default 0)")
    ev.add_argument("--json", action="store_true", help="print one JSON object with every episode's return and length")
    ev.add_argument(
        "--video",
        metavar="OUT.mp4",
        default=None,
        help="also write OUT.mp4 (H.264): 1 greedy episode, or K back to back with --episodes K; "
        'needs the render extra: pip install -e ".[render]"',
    )
    ev.add_argument(
        "--gif",
        metavar="OUT.gif",
        default=None,
        help="also write OUT.gif (animated): 1 greedy episode, or K back to back with --episodes K; "
        'needs the render extra: pip install -e ".[render]"',
    )

    plot = sub.add_parser(
        "plot", help="learning-curve PNG from runs' logs", allow_abbrev=False, epilog=PLOT_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    plot.add_argument(
        "exp_dirs",
        nargs="+",
        metavar="EXP_DIR",
        help="one or more experiment folders, or folders of them (the runs one or two levels down)",
    )
    plot.add_argument("--out", default=None, help="PNG path (default: <first EXP_DIR>/learning_curve.png)")
    plot.add_argument(
        "--keys",
        metavar="KEY[,KEY]",
        default=None,
        help="logged metrics to plot, one panel each (default eval/mean_reward, else rollout/ep_rew_mean)",
    )
    plot.add_argument(
        "--smooth",
        metavar="W",
        type=_int_at_least(1),
        default=1,
        help="trailing moving average over the last W logged points of each run (default 1: none)",
    )
    plot.add_argument(
        "--x",
        choices=("env_steps", "wall_time"),
        default="env_steps",
        help="x axis: env steps (default) or wall time, seconds since the run's first record",
    )
    plot.add_argument(
        "--no-group",
        action="store_true",
        help="one line per run; by default runs that differ only in seed are one line: their mean and a 95%% "
        "confidence band (Student t over the seeds)",
    )

    config = sub.add_parser(
        "config", help="inspect a config file", allow_abbrev=False, epilog=CONFIG_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    config_sub = config.add_subparsers(dest="config_command", required=True, metavar="{show}", parser_class=_Parser)
    show = config_sub.add_parser(
        "show", help="every key of the resolved config: value, type, default, meaning", allow_abbrev=False
    )
    show.add_argument("config", help="Python config file defining main_config (and create_config)")
    show.add_argument("--set", dest="overrides", metavar="KEY=VALUE", type=_override, nargs="+", action="extend",
                      default=[], help="config overrides, as for train")  # fmt: skip
    show.add_argument("--markdown", action="store_true", help="a markdown table (key, default, meaning)")
    return parser


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("ding_dist")
    except Exception:  # not installed as a distribution (e.g. run from a source tree)
        return "unknown"


# --------------------------------------------------------------------------------------- helpers
def _check_config(path: str) -> Path:
    p = find_config(path)  # the file, or a shipped config by name: ding-dist train cartpole_ppo
    read_config(p)  # raises ConfigError naming the file when it is missing or broken
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
        ding_dist.entry.cli.UsageError: no complete checkpoint in ...
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
    # An absolute experiment folder: restarted ranks must find the checkpoints of the failed ones.
    argv = ["train", str(config), "--exp-dir", str(exp_dir), "--health-timeout", repr(args.health_timeout)]
    if args.seed is not None:
        argv += ["--seed", str(args.seed)]
    if args.overrides:
        argv += ["--set", *args.overrides]
    if args.max_env_steps is not None:
        argv += ["--max-env-steps", str(args.max_env_steps)]
    if args.resume is not None:
        argv += ["--resume", str(Path(args.resume).resolve())]
    if args.timeout is not None:
        argv += ["--timeout", repr(args.timeout)]
    if args.debug:
        argv += ["--debug"]
    return argv


def _failure_line(failure: Any) -> str:
    """First line of a rank's recorded error ('' when the rank left none, e.g. killed by a signal)."""
    message = failure.message
    if isinstance(message, dict):
        message = message.get("message", "")
    text = str(message or "").strip()
    if not text or text.startswith("To enable traceback"):  # torchrun's filler when there is no error file
        return ""
    return text.splitlines()[0]


def _is_consequence(failure: Any) -> bool:
    """True for a failure caused by another rank's: a lost peer, or a stop by the launcher."""
    from ding_dist.entry.pipeline import PEER_FAILURE

    text = _failure_line(failure)
    stopped = failure.exitcode in (-signal.SIGTERM, EXIT_SIGTERM)
    return stopped or text.startswith("DeadRankError") or bool(PEER_FAILURE.search(text))


@dataclass
class _KilledRank:
    """A rank the heartbeat watch SIGKILLed, as torchrun's ``ProcessFailure`` describes a failed rank."""

    pid: int
    timestamp: int
    signal_text: str = "SIGKILL"
    exitcode: int = -signal.SIGKILL
    message: str = ""

    def signal_name(self) -> str:
        return self.signal_text


def _with_killed(failures: dict[int, Any], monitor: Any) -> dict[int, Any]:
    """``failures`` plus the ranks the heartbeat watch killed and those that died by a signal without a word.
    Ranks forked by torchrun's agent are reported one failure per job (the first exit it sees), which can
    be a peer's consequence rather than the cause."""
    failures = dict(failures)
    if monitor is None:
        return failures
    latest = max((f.timestamp for f in failures.values()), default=0)
    for rank, (pid, when) in monitor.killed.items():
        if rank not in failures and abs(latest - when) < 60:  # this generation's kill, not an earlier restart's
            failures[rank] = _KilledRank(pid, int(when))
    for rank, pid in monitor.silent_deaths().items():
        if rank not in failures:
            failures[rank] = _KilledRank(pid, latest, signal_text="(unknown: it died without reporting)")
    return failures


def _report_failures(failures: dict[int, Any], nproc: int, max_restarts: int) -> int:
    """Print one line per failed rank, the root cause (the rank that failed first) last; return the exit code.

    Torchrun's timestamps have a resolution of one second, so a rank that failed *because* a peer died can
    carry the same (or an earlier) time as the peer; such consequences rank after real causes.
    """

    def how(failure: Any) -> str:
        return f"signal {failure.signal_name()}" if failure.exitcode < 0 else f"exit code {failure.exitcode}"

    first = min(failures, key=lambda r: (_is_consequence(failures[r]), failures[r].timestamp, r))
    for rank in sorted(failures):
        if rank != first:
            line = _failure_line(failures[rank]) or "its output is above"
            print(f"{PROG}: rank {rank} of {nproc} also failed with {how(failures[rank])}: {line}", file=sys.stderr)
    failure = failures[first]
    after = f" after {max_restarts} restart(s)" if max_restarts else ""
    line = _failure_line(failure) or (
        f"pid {failure.pid}; its output is above" if failure.pid else "its output is above"
    )
    print(f"{PROG}: error: rank {first} of {nproc} failed with {how(failure)}{after} (first failure): {line}",
          file=sys.stderr)  # fmt: skip
    return EXIT_USAGE if failure.exitcode == EXIT_USAGE else 1


class _AgentShutdownLines(logging.Filter):
    """Drops torchrun's agent's warnings about stopping the ranks on a signal (``Received 2 death signal,
    shutting down workers``, ``Closing process N via signal SIGINT``): the launcher says it once, in its own
    line. Other agent lines (restarts, failures) pass."""

    NOISE = ("death signal, shutting down workers", "via signal SIG")

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(noise in message for noise in self.NOISE)


def _quiet_agent_shutdown() -> None:
    for name in ("torch.distributed.elastic.agent.server.api", "torch.distributed.elastic.multiprocessing.api"):
        log = logging.getLogger(name)
        if not any(isinstance(f, _AgentShutdownLines) for f in log.filters):
            log.addFilter(_AgentShutdownLines())


def _launch_local(nproc: int, max_restarts: int, child_argv: list[str]) -> int:
    """Start ``nproc`` local ranks of ``ding-dist train`` with torch's launcher (torchrun --standalone).

    A failed rank ends the job (all ranks stopped) with a summary, or with ``max_restarts`` left, a restart
    of all ranks. SIGTERM/SIGINT to this process stop every rank (torchrun's agent forwards the signal and
    SIGKILLs what is left after 30 s) and return 143/130.
    """
    # torch's launcher is the point here, so it is imported directly rather than through ding_dist.comm.
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import get_args_parser
    from torch.distributed.run import run as torchrun

    from ding_dist.comm.heartbeat import watch_heartbeats

    fork = _start_method() == "fork"
    launcher_argv = ["--standalone", "--nnodes", "1", "--nproc-per-node", str(nproc)]
    launcher_argv += ["--max-restarts", str(max_restarts), "--module"]
    launcher_args = get_args_parser().parse_args([*launcher_argv, "ding_dist.entry.cli", *child_argv])
    try:  # the heartbeat watch: a frozen rank is SIGKILLed within the grace (docs/reliability.md)
        watch = watch_heartbeats(nproc, prefix=PROG)
    except ValueError as e:
        raise UsageError(str(e)) from None
    # torchrun would set this itself (with a banner); one thread per rank keeps N ranks from oversubscribing.
    threads = os.environ.setdefault("OMP_NUM_THREADS", "1")
    restarts = f", up to {max_restarts} restart(s)" if max_restarts else ""
    how = "fork" if fork else "subprocess"
    print(
        f"{PROG}: starting {nproc} local process(es) with torch.distributed.run ({how}, OMP_NUM_THREADS={threads}"
        f"{restarts})",
        file=sys.stderr,
    )
    _quiet_agent_shutdown()
    # torchrun's agent replaces these handlers (main thread only); put ours back when it is done.
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)}
    restore = threading.current_thread() is threading.main_thread()
    try:
        with watch as monitor:
            try:
                if fork:
                    _launch_forked(launcher_args, child_argv)
                else:
                    torchrun(launcher_args)
            except ChildFailedError as e:  # while the watch's store still holds the ranks' last beats
                return _report_failures(_with_killed(e.failures, monitor), nproc, max_restarts)
    except SignalException as e:
        print(f"{PROG}: stopped by {e.sigval.name}; all {nproc} rank(s) were stopped", file=sys.stderr)
        return 128 + int(e.sigval)
    finally:
        for sig, handler in saved.items():
            if restore and handler is not None:
                signal.signal(sig, handler)
    return 0


def _start_method() -> str:
    """How local ranks start: ``fork`` (of this process, whose torch and ding_dist imports they inherit: 2-3 s
    less per start on a small machine) with a CPU-only torch, else ``subprocess`` (fresh interpreters, as
    torchrun's ``--module``): a process that asked CUDA anything must not fork. ``DING_DIST_START_METHOD``
    overrides."""
    method = os.environ.get(START_METHOD_ENV, "")
    if method not in ("", "fork", "subprocess"):
        raise UsageError(f"{START_METHOD_ENV}={method!r}: expected 'fork' or 'subprocess'")
    if method:
        return method
    import torch

    return "subprocess" if torch.backends.cuda.is_built() else "fork"


def _launch_forked(launcher_args: argparse.Namespace, child_argv: list[str]) -> None:
    """Torchrun's agent (standalone rendezvous, restarts, signals) with ``_forked_rank`` as the ranks'
    entry point, started by fork."""
    import uuid

    from torch.distributed.launcher.api import elastic_launch
    from torch.distributed.run import config_from_args

    launcher_args.rdzv_backend, launcher_args.rdzv_endpoint = "c10d", "localhost:0"  # what --standalone means
    launcher_args.rdzv_id = str(uuid.uuid4())
    launcher_args.start_method = "fork"
    config, _, _ = config_from_args(launcher_args)
    elastic_launch(config=config, entrypoint=_forked_rank)(child_argv)


def _forked_rank(argv: list[str]) -> None:
    """One rank forked by :func:`_launch_forked`: ``main(argv)`` (torchrun's variables are in the environment);
    a non-zero code is the process's exit code, as for a started rank."""
    import atexit

    try:
        code = main(argv)
    finally:
        atexit._run_exitfuncs()  # a forked process ends in os._exit: what the rank registered runs here
    if code:
        sys.exit(code)


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


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


_CHECKED: dict[tuple, Any] = {}  # what _check_compiles passed; ranks forked from the launcher inherit it


def _check_compiles(config: Path, args: argparse.Namespace) -> Any:
    """Compile the config with its overrides, check its sizes and build its env once, so bad input is one
    error line before any process starts; returns the compiled config (a forked rank gets the launcher's)."""
    key = (str(config), config.read_bytes(), args.seed, tuple(args.overrides))
    if key not in _CHECKED:
        _CHECKED[key] = _compile_and_try(config, args)
    return copy.deepcopy(_CHECKED[key])


def _compile_and_try(config: Path, args: argparse.Namespace) -> Any:
    import torch

    from ding_dist.entry.pipeline import load_config
    from ding_dist.envs import make_env

    # One thread: OpenMP's worker threads do not survive a fork, and ranks forked from a launcher that had
    # started them hang in their first parallel op. The run sets its own threads (default_threads).
    torch.set_num_threads(1)
    try:
        cfg = load_config(str(config), seed=args.seed, overrides=tuple(args.overrides))
    except ConfigError:
        raise
    except (ValueError, KeyError, TypeError) as e:  # e.g. an unknown policy type, a negative size
        raise UsageError(f"config {str(config)!r}: {_first_line(e)}") from e
    env = cfg.env
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
            raise UsageError(f"--env {env.get('id')!r}: {_first_line(e)}") from e
        raise UsageError(f"config {str(config)!r}: {what} cannot be made: {_first_line(e)}") from e
    try:  # the policy on this env's spaces (on CPU): e.g. DQN on a Box action space is one line, not a traceback
        from ding_dist.entry.experiment import build_policy
        from ding_dist.policy.base import acting_only

        with acting_only():  # no optimizers: they import torch._dynamo (1.5 s) in a process that never trains
            build_policy(cfg, made.observation_space, made.action_space, device="cpu")
    except ValueError as e:
        raise UsageError(f"config {str(config)!r}: {_first_line(e)} (env {env.get('id')!r})") from e
    finally:
        made.close()
    return cfg


def _run_rank(args: argparse.Namespace, config: Path) -> int:
    """This process's rank of the job (a world of one without a launcher)."""
    from ding_dist.comm import DistContext, debug_enabled, set_debug
    from ding_dist.entry import pipeline

    kwargs: dict[str, Any] = {} if args.seed is None else {"seed": args.seed}  # else the pipeline's default
    was_debug = debug_enabled()
    if args.debug:
        set_debug(True)
    try:
        with DistContext():
            result = pipeline.train(
                str(config),
                overrides=tuple(args.overrides),
                exp_dir=args.exp_dir,
                max_env_steps=args.max_env_steps,
                resume=args.resume,
                health_timeout=args.health_timeout,
                **kwargs,
            )
            _print_rank0(_summary(result, args.exp_dir))
    finally:
        set_debug(was_debug)
    return 0


def _run_recorded_rank(args: argparse.Namespace, config: Path) -> int:
    """``_run_rank`` under torchrun's ``record``: an uncaught exception reaches the launcher's summary."""
    from torch.distributed.elastic.multiprocessing.errors import record

    return record(_run_rank)(args, config)


def _resume_config(exp_dir: str) -> str:
    """``train --resume EXP_DIR`` without CONFIG: the run's saved config (its newest, after resumes)."""
    from ding_dist.entry.resume import run_config

    if not Path(exp_dir).is_dir():
        raise UsageError(f"--resume {exp_dir!r} is not an experiment folder")
    found = run_config(exp_dir)
    if found is None:
        raise UsageError(f"--resume {exp_dir!r} has no saved config.py: give CONFIG")
    return str(found)


def _resume_is_done(args: argparse.Namespace, cfg: Any, state: dict) -> bool:
    """A resume keeps the run's ``--max-env-steps`` unless given again; True (after one line on stdout) when
    the run already reached it or ``env.stop_value``, so no iteration is run."""
    from ding_dist.entry.experiment import restart_count
    from ding_dist.entry.resume import done_message

    if args.max_env_steps is None:
        args.max_env_steps = state.get("max_env_steps")
    done = done_message(args.resume, state, cfg.env.get("stop_value"), args.max_env_steps)
    if done is None or restart_count() > 0:
        return False
    if os.environ.get("RANK", "0") == "0":
        print(f"{PROG}: {done}", flush=True)
    return True


def _train(args: argparse.Namespace) -> int:
    from ding_dist.entry import pipeline
    from ding_dist.utils.checkpoint import CheckpointManager

    if args.resume is not None and args.config is None and args.algo is None and args.env is None:
        args.config = _resume_config(args.resume)  # the run's own saved config
    if (args.algo is None) != (args.env is None) or (args.algo is not None) == (args.config is not None):
        raise UsageError(
            "give a CONFIG file, or --algo ALGO --env ENV_ID (e.g. --algo ppo --env Pendulum-v1), or --resume EXP_DIR"
        )
    if args.algo is not None:
        from ding_dist.config.presets import preset_config

        args.config = str(preset_config(args.algo, args.env))
    config = _check_config(args.config)
    resumed = None
    if args.resume is not None:
        if not Path(args.resume).is_dir():
            raise UsageError(f"--resume {args.resume!r} is not an experiment folder")
        resumed = CheckpointManager(Path(args.resume) / "ckpt").load_latest()
        if resumed is None:
            raise UsageError(f"--resume {args.resume!r}: no complete checkpoint in its ckpt/ folder")
    if args.nproc is None:
        args.nproc = 1 if resumed is None or _under_launcher() else _resumed_world(args, resumed)
    if args.exp_dir is not None and Path(args.exp_dir).exists() and not Path(args.exp_dir).is_dir():
        raise UsageError(f"--exp-dir {args.exp_dir!r} exists and is not a folder")
    if args.exp_dir is not None and args.resume is None and not _under_launcher() and pipeline.holds_run(args.exp_dir):
        raise UsageError(
            f"--exp-dir {args.exp_dir!r} already holds a run: add --resume {args.exp_dir} to continue it, "
            "or choose another folder"
        )
    asked_nproc = args.nproc
    args.nproc = _actor_learner_nproc(args)
    cfg = _check_compiles(config, args)
    if not _under_launcher():  # a folder no rank can write: one line now, not a traceback from every rank
        _check_writable(args.exp_dir or args.resume or pipeline.default_exp_dir(cfg.exp_name), args)
    if args.resume is not None and _resume_is_done(args, cfg, resumed):
        return 0
    if cfg.actor_learner.actors and args.actors is None:  # the roles come from the config file
        if args.nproc not in (1, cfg.actor_learner.actors + cfg.actor_learner.learners):
            raise UsageError(
                f"--nproc {args.nproc} does not match the config's actor_learner.actors={cfg.actor_learner.actors} "
                f"+ actor_learner.learners={cfg.actor_learner.learners}"
            )
        args.nproc = cfg.actor_learner.actors + cfg.actor_learner.learners
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
                return _run_recorded_rank(args, config)
            return _run_rank(args, config)
        if args.nproc > 1 or args.max_restarts > 0:
            _check_local_world(cfg, args.nproc)
            exp_dir = Path(args.exp_dir or args.resume or pipeline.default_exp_dir(cfg.exp_name)).resolve()
            return _launch_local(args.nproc, args.max_restarts, _child_argv(args, config, exp_dir))
        return _run_rank(args, config)


def _check_writable(folder: str | os.PathLike, args: argparse.Namespace) -> None:
    """Raise ``UsageError`` unless the experiment folder can be created and written (checked at its nearest
    existing ancestor, with a file created and removed there, so a read-only mount is caught for root too)."""
    import tempfile

    what = "--exp-dir" if args.exp_dir else "--resume" if args.resume else "the experiment folder"
    target = Path(folder).absolute()
    existing = target
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    try:
        if not existing.is_dir():
            raise NotADirectoryError(f"{existing} is a file")
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as e:
        why = f"{e.strerror or e} at {str(existing)!r}"
        raise UsageError(f"{what} {str(folder)!r} cannot be written ({why}); choose another folder") from None


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
        raise UsageError(f"--track needs the wandb package: {WANDB_HINT}")
    return "1"


def _check_local_world(cfg: Any, nproc: int) -> None:
    """Before starting ``nproc`` local processes: refuse global sizes they cannot share evenly (the learners of
    an actor-learner run), and warn once when they outnumber the CPU cores."""
    from ding_dist.config.split import split_errors

    al = cfg.actor_learner
    errors = split_errors(cfg, al.learners, "--learners") if al.actors else split_errors(cfg, nproc)
    if errors:
        raise UsageError("; ".join(errors))
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
    """``eval``'s CONFIG: as given, else the saved config of the run ``--ckpt`` belongs to."""
    if args.config is not None:
        return _check_config(args.config)
    from ding_dist.entry.resume import find_run_config

    resolve_checkpoint(args.ckpt)  # a missing checkpoint is reported as such
    found = find_run_config(args.ckpt)
    if found is None:
        raise UsageError(f"--ckpt {args.ckpt!r} is not in a run folder with a saved config.py: give CONFIG")
    return _check_config(str(found))


def _eval(args: argparse.Namespace) -> int:
    config = _eval_config(args)
    ckpt = resolve_checkpoint(args.ckpt)
    if getattr(args, "gif", None) and Path(args.gif).suffix.lower() != ".gif":
        raise UsageError(f"--gif must end in .gif, got {args.gif!r}")
    if args.video and Path(args.video).suffix.lower() != ".mp4":
        raise UsageError(f"--video must end in .mp4, got {args.video!r}")
    from ding_dist.comm import DistContext
    from ding_dist.entry import pipeline

    with DistContext():
        out = pipeline.evaluate(str(config), str(ckpt), episodes=args.episodes, seed=args.seed)
        if args.video:
            out["videos"] = [str(p) for p in _record_video(config, ckpt, args)]
        if getattr(args, "gif", None):
            out["gifs"] = [str(p) for p in _record_video(config, ckpt, args, gif=True)]
        if args.json:
            _print_rank0(json.dumps(_eval_record(out, ckpt, args.seed)))
        else:
            _print_rank0(
                f"checkpoint {ckpt}: mean_return {out['mean_return']:.3f} +/- {out['std_return']:.3f} "
                f"over {len(out.get('returns', [])) or args.episodes} episodes (seed {args.seed})"
            )
    return 0


def _record_video(config: Path, ckpt: Path, args: argparse.Namespace, gif: bool = False) -> list[Path]:
    """``eval --video OUT.mp4`` (or ``--gif OUT.gif`` with ``gif``): the checkpoint's greedy episodes, one
    unless ``--episodes`` was given, back to back in the one file named (ding_dist/utils/video.py)."""
    from ding_dist.entry.experiment import build_policy, load_config
    from ding_dist.envs import make_env
    from ding_dist.utils.checkpoint import load_checkpoint
    from ding_dist.utils.video import record_episodes, record_gif

    cfg = load_config(str(config), seed=args.seed)
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


# ------------------------------------------------------------------------------------------ plot
def __getattr__(name: str) -> Any:
    """``load_curves`` and ``plot_curves`` live in :mod:`ding_dist.entry.plot` (imported on first use)."""
    if name in ("load_curves", "plot_curves"):
        from ding_dist.entry import plot

        return getattr(plot, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _plot(args: argparse.Namespace) -> int:
    from ding_dist.entry.plot import plot_command

    return plot_command(args)


# ---------------------------------------------------------------------------------------- config
def _config_show(args: argparse.Namespace) -> int:
    """``ding-dist config show CONFIG``: the resolved config, a row per key (ding_dist/config/describe.py)."""
    from ding_dist.config.describe import describe, format_rows, markdown_table
    from ding_dist.entry.experiment import load_config
    from ding_dist.entry.roles import actor_learner_default_config
    from ding_dist.envs import env_default_config
    from ding_dist.policy import get_policy_cls

    config = _check_config(args.config)
    try:
        cfg = load_config(str(config), overrides=tuple(args.overrides))
    except ConfigError:
        raise
    except (ValueError, KeyError, TypeError) as e:
        raise UsageError(f"config {str(config)!r}: {_first_line(e)}") from e
    policy_type = cfg.create_config.policy.type
    schema = {
        "exp_name": "default_experiment",
        "seed": 0,
        "env": env_default_config(),
        "policy": get_policy_cls(policy_type).default_config(),
        "actor_learner": actor_learner_default_config(),
    }
    rows = describe(cfg, schema, policy_type)
    print(markdown_table(rows) if args.markdown else format_rows(rows))
    return 0


# ------------------------------------------------------------------------------------------ main
def _error_line(message: str) -> None:
    """One ``ding-dist: error:`` line in a single write (ranks under a launcher prefix their rank)."""
    world = os.environ.get("WORLD_SIZE", "1")
    prefix = f"[rank {os.environ.get('RANK', '?')}] " if world.isdigit() and int(world) > 1 else ""
    sys.stderr.write(f"{prefix}{PROG}: error: {message}\n")
    sys.stderr.flush()


def _record_for_launcher(e: BaseException) -> None:
    """Under torchrun, write a handled error to the rank's error file so the job's summary can show it."""
    if os.environ.get(ERROR_FILE_ENV):
        from torch.distributed.elastic.multiprocessing.errors import get_error_handler

        get_error_handler().record_exception(e)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``ding-dist`` with ``argv`` (default ``sys.argv[1:]``) and return the exit code.

    Example:
        >>> main(["train", "missing_config.py"])  # doctest: +SKIP
        ding-dist: error: config file 'missing_config.py' does not exist
        2
    """
    args = build_parser().parse_args(argv)
    from ding_dist.utils.checkpoint import CheckpointError  # torch, imported once the arguments parse

    get_logger("ding_dist")  # rank-aware INFO lines on stderr for the library's loggers
    if args.command == "resume":  # ding-dist resume EXP_DIR: train --resume EXP_DIR
        args.command = "train"
        args.algo = args.env = args.exp_dir = None
    commands = {"train": _train, "eval": _eval, "plot": _plot, "config": _config_show}
    try:
        return commands[args.command](args)
    except (UsageError, ConfigError, CheckpointError, ExperimentInUseError) as e:
        _record_for_launcher(e)
        _error_line(" ".join(str(e).split()))
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return EXIT_SIGINT
    except SystemExit as e:
        if e.code == EXIT_SIGTERM:  # the pipeline's SIGTERM handler: envs and writers are closed by now
            print(f"{PROG}: terminated (SIGTERM)", file=sys.stderr)
            return EXIT_SIGTERM
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


if __name__ == "__main__":
    run()
