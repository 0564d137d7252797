"""The argument parser of ``ding-dist``: sub-commands train, resume, eval, plot, config show and ckpt convert.

Building and using it imports no torch (``ding-dist --help`` answers at once). Errors are one line and exit
with code 2; a mistyped flag gets the closest known one suggested. Train and resume share their options (a
parent parser); ``--set`` is one block in train, resume and config show.

Example:
    >>> from ding_dist.entry.cli.parser import build_parser
    >>> build_parser().parse_args(["resume", "runs/x", "--nproc", "2"]).resume
    'runs/x'
"""

from __future__ import annotations

import argparse
import difflib
import math
from collections.abc import Sequence
from typing import Any, NoReturn

from ding_dist.config import ConfigError, parse_override
from ding_dist.entry.cli.auto_mode import DEFAULT_PROBE_SECONDS
from ding_dist.entry.cli.errors import EXIT_USAGE, PROG
from ding_dist.utils.install import install_hint

__all__ = ["build_parser", "EVAL_EPISODES"]

EVAL_EPISODES = 10  # eval's --episodes default (the recording of --video/--gif defaults to 1 episode)


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (no usage dump) and exit with code 2; an unknown flag gets the
    closest flag of the sub-command it was given to, or, when it is another sub-command's, says so."""

    def error(self, message: str, root: argparse.ArgumentParser | None = None) -> NoReturn:
        hint = _suggest_flag(self, message, root or self)
        self.exit(EXIT_USAGE, f"{PROG}: error: {message}{hint} (see '{self.prog} --help')\n")

    def parse_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:  # type: ignore[override]
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:  # reported by the sub-command's parser: its flags, its --help
            chosen = _chosen(self, parsed)
            message = f"unrecognized arguments: {' '.join(extras)}"
            chosen.error(message, self) if isinstance(chosen, _Parser) else self.error(message)
        return parsed


def _subcommands(parser: argparse.ArgumentParser) -> tuple[str, dict[str, argparse.ArgumentParser]] | None:
    """``(dest, {name: parser})`` of ``parser``'s sub-commands, or None."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.dest, dict(action.choices)
    return None


def _chosen(parser: argparse.ArgumentParser, parsed: argparse.Namespace) -> argparse.ArgumentParser:
    """The parser of the (sub-)sub-command that ``parsed`` ran, e.g. ``config show``'s."""
    found = _subcommands(parser)
    while found is not None and getattr(parsed, found[0], None) in found[1]:
        parser = found[1][getattr(parsed, found[0])]
        found = _subcommands(parser)
    return parser


def _flags_by_command(parser: argparse.ArgumentParser, name: str = "") -> dict[str, list[str]]:
    """``{--flag: [commands that take it]}`` over ``parser`` and its sub-commands (``"config show"``)."""
    found: dict[str, list[str]] = {}
    for action in parser._actions:
        for flag in (o for o in action.option_strings if o.startswith("--") and o not in ("--help", "--version")):
            found.setdefault(flag, []).append(name)
    for sub, child in (_subcommands(parser) or ("", {}))[1].items():
        for flag, names in _flags_by_command(child, f"{name} {sub}".strip()).items():
            found.setdefault(flag, []).extend(names)
    return found


def _suggest_flag(parser: argparse.ArgumentParser, message: str, root: argparse.ArgumentParser) -> str:
    """For ``"unrecognized arguments: --nprco 2"`` given to ``parser`` (a sub-command's of ``root``): ``"; did you
    mean --nproc?"`` when one of its flags is close, or ``"; eval takes no --set (train, resume and config show
    do)"`` for another command's flag; else ``""``."""
    if not message.startswith("unrecognized arguments:"):
        return ""
    own = _flags_by_command(parser)
    elsewhere = _flags_by_command(root)
    command = parser.prog.removeprefix(PROG).strip()
    for token in message.split(":", 1)[1].split():
        flag = token.split("=", 1)[0]
        if not flag.startswith("--"):
            continue
        if flag in elsewhere and flag not in own:
            takers = [c for c in elsewhere[flag] if c]
            listed = ", ".join(takers[:-1]) + f" and {takers[-1]}" if len(takers) > 1 else takers[0]
            return f"; {command} takes no {flag} ({listed} {'do' if len(takers) > 1 else 'does'})"
        close = difflib.get_close_matches(flag, sorted(own), n=1, cutoff=0.75)
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


def _nproc(text: str) -> int | str:
    """``--nproc N`` (N >= 1) or ``auto``."""
    if text == "auto":
        return text
    try:
        return _int_at_least(1)(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1 or auto, got {text!r}") from None


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds > 0, got {text}")
    return value


def _minutes(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of minutes, got {text!r}") from None
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"must be a finite number of minutes >= 0 (0: off), got {text}")
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
  ding-dist train --algo ppo --env Pendulum-v1 --set policy.learn.batch_size=128 --max-env-steps 20000
  ding-dist train configs/cartpole_impala_config.py --actors 2 --learners 1
  ding-dist train configs/pendulum_sac_config.py --nproc auto   # tries each way to run, trains in the fastest
  ding-dist train --resume runs/cartpole_ppo --max-env-steps 100000   # on to 100k env steps"""
RESUME_EXAMPLES = """examples:
  ding-dist resume runs/cartpole_ppo                          # on the run's own processes and roles
  ding-dist resume runs/cartpole_ppo --max-env-steps 200000 --nproc 2
  ding-dist resume runs/cartpole_ppo --set env.stop_value=None --max-env-steps 300000   # solved: on to 300k steps"""
EVAL_EXAMPLES = """examples:
  ding-dist eval --ckpt runs/cartpole_ppo                     # the run's best checkpoint, its own config
  ding-dist eval --ckpt runs/cartpole_ppo --which last        # its newest checkpoint
  ding-dist eval --ckpt runs/cartpole_ppo/ckpt --episodes 20 --json   # or a checkpoint file
  ding-dist eval --ckpt runs/cartpole_ppo --video cartpole.mp4   # the first evaluated episode as an MP4"""
PLOT_EXAMPLES = """examples:
  ding-dist plot runs/cartpole_ppo --out curve.png
  ding-dist plot runs/ppo_s0 runs/ppo_s1 runs/ppo_s2 --smooth 3    # seeds: their mean and a 95% band
  ding-dist plot runs/ppo_s0 runs/ppo_s1 runs/ppo_s2 --band iqm    # or their IQM and a bootstrap 95% band
  ding-dist plot runs --keys eval/mean_reward,train/loss --x wall_time"""
CKPT_EXAMPLES = """examples:
  ding-dist ckpt convert runs/old/ckpt/ckpt_000051200.pt       # a file you trust that eval/resume refuse"""
CONFIG_EXAMPLES = """examples:
  ding-dist config show configs/cartpole_dqn_config.py
  ding-dist config show my_ding_config.py --set policy.learn.batch_size=64 --markdown"""


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of ``ding-dist`` (sub-commands train, resume, eval, plot, config, ckpt).

    Example:
        >>> args = build_parser().parse_args(["train", "cfg.py", "--nproc", "2", "--set", "seed=3"])
        >>> args.command, args.nproc, args.overrides
        ('train', 2, ['seed=3'])
    """
    parser = _Parser(prog=PROG, description="Train, evaluate and plot ding_dist RL runs.", allow_abbrev=False)
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="{train,resume,eval,plot,config,ckpt}", parser_class=_Parser
    )
    train = _command(sub, "train", "train from a config file", TRAIN_EXAMPLES, parents=[_run_options("train")])
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
    resume = _command(sub, "resume", "continue a run (train --resume EXP_DIR)", RESUME_EXAMPLES,
                      parents=[_run_options("resume")])  # fmt: skip
    resume.add_argument("resume", metavar="EXP_DIR", help="the run's experiment folder")
    resume.add_argument(
        "--config", default=None, help="another config file to continue with (default: the run's own saved one)"
    )
    _add_eval(_command(sub, "eval", "evaluate a checkpoint", EVAL_EXAMPLES))
    _add_plot(_command(sub, "plot", "learning-curve PNG from runs' logs", PLOT_EXAMPLES))

    config = _command(sub, "config", "inspect a config file", CONFIG_EXAMPLES)
    config_sub = config.add_subparsers(dest="config_command", required=True, metavar="{show}", parser_class=_Parser)
    show = config_sub.add_parser(
        "show", help="every key of the resolved config: value, type, default, meaning", allow_abbrev=False
    )
    show.add_argument("config", help="Python config file defining main_config (and create_config)")
    _add_overrides(show, "config overrides, as for train")
    show.add_argument("--markdown", action="store_true", help="a markdown table (key, value, default, meaning)")

    ckpt = _command(sub, "ckpt", "checkpoint files", CKPT_EXAMPLES)
    ckpt_sub = ckpt.add_subparsers(dest="ckpt_command", required=True, metavar="{convert}", parser_class=_Parser)
    convert = ckpt_sub.add_parser(
        "convert",
        help="rewrite a checkpoint refused as unsafe (or of an older format) as one that loads without running "
        "code; a refused file's own code RUNS while it is read: only for files whose source you trust",
        allow_abbrev=False,
    )
    convert.add_argument("file", metavar="FILE", help="the checkpoint file")
    convert.add_argument("--out", default=None, help="where to write (default: in place, the original kept as .orig)")
    return parser


def _command(
    sub: Any, name: str, help: str, epilog: str, parents: Sequence[argparse.ArgumentParser] = ()
) -> argparse.ArgumentParser:
    """A sub-command's parser: no abbreviated flags, its examples after the options as written."""
    return sub.add_parser(name, parents=list(parents), help=help, allow_abbrev=False, epilog=epilog,
                          formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip


def _add_overrides(parser: argparse.ArgumentParser, help: str) -> None:
    """``--set KEY=VALUE ...``, checked as it is parsed (its own help line in each command)."""
    parser.add_argument("--set", dest="overrides", metavar="KEY=VALUE", type=_override, nargs="+", action="extend",
                        default=[], help=help)  # fmt: skip


def _nnodes(text: str) -> tuple[int, int]:
    """``--nnodes N`` or ``MIN:MAX`` as ``(MIN, MAX)`` with 1 <= MIN <= MAX."""
    parts = text.split(":")
    try:
        low, high = (int(parts[0]), int(parts[-1])) if len(parts) in (1, 2) else (0, 0)
    except ValueError:
        low = high = 0
    if not 1 <= low <= high:
        raise argparse.ArgumentTypeError(f"{text!r}: expected N or MIN:MAX with 1 <= MIN <= MAX, e.g. 1:4")
    return low, high


def _run_options(command: str) -> argparse.ArgumentParser:
    """The options of a training run, shared by train and resume (a parent parser; ``command``: which of them)."""
    shared = _Parser(add_help=False, allow_abbrev=False)
    auto = command == "train"
    nproc_help = (
        "local processes; > 1 starts them with torchrun (ignored when already under a launcher); default 1, with "
        "--resume the run's own world size and roles"
    )
    if auto:
        nproc_help += (
            "; auto: try 1 process, data-parallel and actor-learner runs on this machine's cores for --probe-seconds "
            "each, then train in the fastest"
        )
    shared.add_argument(
        "--nproc",
        metavar="N|auto" if auto else "N",
        type=_nproc if auto else _int_at_least(1),
        default=None,
        help=nproc_help,
    )
    if auto:
        shared.add_argument(
            "--probe-seconds",
            metavar="S",
            type=_seconds,
            default=None,
            help="with --nproc auto: seconds of training each way to run is measured for, after its first update "
            f"(default {DEFAULT_PROBE_SECONDS:g})",
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
    shared.add_argument(
        "--population",
        metavar="K",
        type=_int_at_least(1),
        default=None,
        help="population-based training: K members over the processes, each on N/K of them (sets pbt.population; "
        "docs/pbt.md)",
    )
    shared.add_argument("--seed", type=_seed, default=None, help="random seed (default: the config's, else 0)")
    _add_overrides(shared, "config overrides, e.g. --set policy.learn.batch_size=64 env.collector_env_num=4")
    shared.add_argument(
        "--max-env-steps",
        type=_int_at_least(1),
        default=None,
        help="stop after N env steps",
    )
    shared.add_argument(
        "--checkpoint-minutes",
        metavar="M",
        type=_minutes,
        default=None,
        help="checkpoint every M minutes of wall time (sets policy.other.checkpoint.every_minutes; default 10, "
        "0: off); a kill loses at most that much",
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
    elastic = shared.add_argument_group("elastic multi-node runs (torchrun's c10d rendezvous; docs/launching.md)")
    elastic.add_argument(
        "--nnodes",
        metavar="MIN:MAX",
        type=_nnodes,
        default=None,
        help="run this node as one of MIN to MAX nodes, each with --nproc processes (default 1): nodes may join "
        "and leave, and the job re-forms at the new size from its newest checkpoint (needs --rdzv-endpoint)",
    )
    elastic.add_argument(
        "--rdzv-endpoint",
        metavar="HOST:PORT",
        default=None,
        help="with --nnodes: the rendezvous store every node reaches (one node serves it)",
    )
    elastic.add_argument(
        "--rdzv-id",
        metavar="ID",
        default=None,
        help="with --nnodes: the job's id, the same on every node (default $SLURM_JOB_ID, else the experiment "
        "folder's name); a job started again with it continues its folder's run",
    )
    elastic.add_argument(
        "--node-addr",
        metavar="ADDR",
        default=None,
        help="with --nnodes: the address other nodes reach this one at (default: its hostname)",
    )
    elastic.add_argument(
        "--rdzv-host",
        choices=("auto", "yes", "no"),
        default="auto",
        help="with --nnodes: whether this node serves the rendezvous store (auto: the node whose address the "
        "endpoint names; say yes/no when several nodes share one machine)",
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
        f"unless WANDB_MODE or WANDB_API_KEY is set; needs the wandb extra: {install_hint('wandb')})",
    )
    shared.add_argument(
        "--requeue",
        action="store_true",
        help="SLURM: after SIGTERM or SIGUSR1 (sbatch --signal=USR1@90) the run checkpoints its step and requeues "
        "its job (scontrol requeue $SLURM_JOB_ID); the requeued job "
        + ("resumes from --exp-dir (needs --exp-dir or --resume)" if command == "train" else "resumes EXP_DIR again"),
    )
    return shared


def _add_eval(ev: argparse.ArgumentParser) -> None:
    ev.add_argument(
        "config",
        nargs="?",
        default=None,
        help="the config file the checkpoint was trained with (default: the run's own saved config)",
    )
    ev.add_argument(
        "--ckpt",
        required=True,
        help="checkpoint file, or a run folder (or its ckpt/): its best checkpoint (ckpt/best.pt), else its newest "
        "complete one (--which)",
    )
    ev.add_argument(
        "--which",
        choices=("best", "last"),
        default=None,
        help="with a run folder: best (the default where the run has ckpt/best.pt: the weights of its best "
        "evaluation) or last (its newest complete checkpoint)",
    )
    ev.add_argument(
        "--episodes",
        type=_int_at_least(1),
        default=EVAL_EPISODES,
        action=_Given,
        metavar="K",
        help=f"evaluation episodes (default {EVAL_EPISODES}); with --video/--gif also the episodes recorded, "
        "back to back in the one file: the evaluated ones, played again from their seeds (default: the first "
        "evaluated episode recorded)",
    )
    ev.add_argument("--seed", type=_seed, default=0, help="evaluation seed (default 0)")
    ev.add_argument("--json", action="store_true", help="print one JSON object with every episode's return and length")
    for flag, suffix, kind in (("--video", "mp4", "H.264"), ("--gif", "gif", "animated")):
        ev.add_argument(
            flag,
            metavar=f"OUT.{suffix}",
            default=None,
            help=f"also write OUT.{suffix} ({kind}): the first evaluated episode, or all K back to back with "
            f"--episodes K (the same seeds and lengths); its folder must exist; needs the render extra: "
            f"{install_hint('render')}",
        )


def _add_plot(plot: argparse.ArgumentParser) -> None:
    plot.add_argument(
        "exp_dirs",
        nargs="+",
        metavar="EXP_DIR",
        help="one or more experiment folders, or folders of them (the runs one or two levels down)",
    )
    plot.add_argument(
        "--out", default=None, help="PNG path, in a folder that exists (default: <first EXP_DIR>/learning_curve.png)"
    )
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
        help="trailing moving average over the last W logged points of each run, after a run that reached "
        "env.stop_value has its last value held to its group's end (default 1: none)",
    )
    plot.add_argument(
        "--x",
        choices=("env_steps", "wall_time"),
        default="env_steps",
        help="x axis: env steps (default) or wall time: seconds of training (time/wall_time_s, the clock of "
        "result.json's wall_time_s), so the idle time before a resume is subtracted, not drawn as a line; runs "
        "logged without that key: seconds since their first record",
    )
    plot.add_argument(
        "--no-group",
        action="store_true",
        help="one line per run; by default runs that differ only in seed (each seed once: a repeated seed is a line "
        "of its own) are one line: their mean and a 95%% confidence band (Student t over the seeds, cut to the "
        "lowest and highest value the runs reach)",
    )
    plot.add_argument(
        "--band",
        choices=("mean", "iqm"),
        default="mean",
        help="a seed group's line and band: mean and Student t 95%% CI (default), or iqm: the interquartile mean "
        "(mean of the middle half of the seeds; the plain mean under 4) and its 95%% percentile interval over "
        "2000 stratified bootstrap resamples of the seeds (rliable's definition)",
    )


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("ding_dist")
    except Exception:  # not installed as a distribution (e.g. run from a source tree)
        return "unknown"
