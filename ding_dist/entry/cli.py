"""The ``ding-dist`` command line: train, evaluate and plot.

::

    ding-dist train configs/cartpole_dqn_config.py                    # one process (fake link)
    ding-dist train configs/cartpole_dqn_config.py --nproc 2          # 2 local processes via torchrun
    torchrun --nproc_per_node 2 -m ding_dist.entry.cli train CONFIG   # same, launched by hand
    ding-dist eval configs/cartpole_dqn_config.py --ckpt runs/cartpole_dqn/ckpt
    ding-dist plot runs/cartpole_dqn --out curve.png

``--nproc N`` with N > 1 hands the job to torch's own launcher (``torch.distributed.run``, i.e. torchrun,
with ``--standalone``), which starts N copies of ``ding-dist train`` without ``--nproc``; each copy finds
torchrun's RANK/WORLD_SIZE and runs its rank. ``dist_init`` picks gloo on CPU and nccl on GPUs. Under any
launcher (torchrun, or ``srun`` with SLURM variables) ``ding-dist train`` only runs its own rank.

Bad input (missing files, bad ``--set`` syntax, bad numbers, unknown config keys) ends with one line
``ding-dist: error: ...`` on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from ding_dist.config import ConfigError, parse_override, read_config
from ding_dist.utils import (
    METRICS_FILE,
    CheckpointError,
    CheckpointManager,
    atomic_open,
    get_logger,
    read_metrics,
)

__all__ = ["build_parser", "main", "UsageError", "load_curves", "plot_curves", "resolve_checkpoint"]

PROG = "ding-dist"
EXIT_USAGE = 2
PLOT_KEYS = ("rollout/ep_rew_mean", "eval/mean_reward")


class UsageError(Exception):
    """Bad command-line input; reported as one line on stderr with exit code 2."""


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (no usage dump) and exit with code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{PROG}: error: {message} (see '{self.prog} --help')\n")


# --------------------------------------------------------------------------------- argument types
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


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of ``ding-dist`` (sub-commands train, eval, plot).

    Example:
        >>> args = build_parser().parse_args(["train", "cfg.py", "--nproc", "2", "--set", "seed=3"])
        >>> args.command, args.nproc, args.overrides
        ('train', 2, ['seed=3'])
    """
    parser = _Parser(prog=PROG, description="Train, evaluate and plot ding_dist RL runs.", allow_abbrev=False)
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{train,eval,plot}", parser_class=_Parser)

    train = sub.add_parser("train", help="train from a config file", allow_abbrev=False)
    train.add_argument("config", help="Python config file defining main_config (and create_config)")
    train.add_argument(
        "--nproc",
        type=_int_at_least(1),
        default=1,
        help="local processes; > 1 starts them with torchrun (ignored when already under a launcher)",
    )
    train.add_argument("--seed", type=_seed, default=None, help="random seed (default: the config's, else 0)")
    train.add_argument(
        "--set",
        dest="overrides",
        metavar="KEY=VALUE",
        type=_override,
        nargs="+",
        action="extend",
        default=[],
        help="config overrides, e.g. --set policy.learn.batch_size=64 env.collector_env_num=4",
    )
    train.add_argument("--exp-dir", default=None, help="experiment folder (default: runs/<exp_name>)")
    train.add_argument(
        "--max-env-steps",
        type=_int_at_least(1),
        default=None,
        help="stop after N env steps",
    )
    train.add_argument("--resume", metavar="EXP_DIR", default=None, help="continue the run saved in EXP_DIR")

    ev = sub.add_parser("eval", help="evaluate a checkpoint", allow_abbrev=False)
    ev.add_argument("config", help="the config file the checkpoint was trained with")
    ev.add_argument("--ckpt", required=True, help="checkpoint file, or a folder: its newest complete checkpoint")
    ev.add_argument("--episodes", type=_int_at_least(1), default=10, help="episodes (default 10)")
    ev.add_argument("--seed", type=_seed, default=0, help="evaluation seed (default 0)")

    plot = sub.add_parser("plot", help="learning-curve PNG from runs' logs", allow_abbrev=False)
    plot.add_argument("exp_dirs", nargs="+", metavar="EXP_DIR", help="one or more experiment folders")
    plot.add_argument("--out", default=None, help="PNG path (default: <first EXP_DIR>/learning_curve.png)")
    return parser


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("ding_dist")
    except Exception:  # not installed as a distribution (e.g. run from a source tree)
        return "unknown"


# --------------------------------------------------------------------------------------- helpers
def _check_config(path: str) -> Path:
    p = Path(path)
    read_config(p)  # raises ConfigError naming the file when it is missing or broken
    return p.resolve()


def _under_launcher() -> bool:
    """True when torchrun or SLURM variables say this process is one rank of a larger world."""
    from ding_dist.comm import resolve_launch_settings

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
def _child_argv(args: argparse.Namespace, config: Path) -> list[str]:
    argv = ["train", str(config)]
    if args.seed is not None:
        argv += ["--seed", str(args.seed)]
    if args.overrides:
        argv += ["--set", *args.overrides]
    if args.exp_dir is not None:
        argv += ["--exp-dir", str(Path(args.exp_dir).resolve())]
    if args.max_env_steps is not None:
        argv += ["--max-env-steps", str(args.max_env_steps)]
    if args.resume is not None:
        argv += ["--resume", str(Path(args.resume).resolve())]
    return argv


def _launch_local(nproc: int, child_argv: list[str]) -> int:
    """Start ``nproc`` local ranks of ``ding-dist train`` with torch's launcher (torchrun --standalone)."""
    # torch's launcher is the point here, so it is imported directly rather than through ding_dist.comm.
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import get_args_parser
    from torch.distributed.run import run as torchrun

    launcher_argv = ["--standalone", "--nnodes", "1", "--nproc-per-node", str(nproc), "--module"]
    launcher_args = get_args_parser().parse_args([*launcher_argv, "ding_dist.entry.cli", *child_argv])
    # torchrun would set this itself (with a banner); one thread per rank keeps N ranks from oversubscribing.
    threads = os.environ.setdefault("OMP_NUM_THREADS", "1")
    print(
        f"{PROG}: starting {nproc} local processes with torch.distributed.run (OMP_NUM_THREADS={threads})",
        file=sys.stderr,
    )
    try:
        torchrun(launcher_args)
    except ChildFailedError as e:
        rank, failure = e.get_first_failure()
        how = f"signal {failure.signal_name()}" if failure.exitcode < 0 else f"exit code {failure.exitcode}"
        print(f"{PROG}: error: rank {rank} of {nproc} failed with {how} (its output is above)", file=sys.stderr)
        return EXIT_USAGE if failure.exitcode == EXIT_USAGE else 1
    return 0


def _summary(result: dict[str, Any], exp_dir: str | None) -> str:
    def num(key: str) -> str:
        value = result.get(key)
        return f"{value:.2f}" if isinstance(value, (int, float)) else str(value)

    folder = result.get("exp_dir") or exp_dir
    where = f"; result: {Path(folder) / 'result.json'}" if folder else ""
    return (
        f"trained {result.get('env_steps')} env steps ({result.get('train_iters')} train iters, "
        f"world size {result.get('world_size')}) in {num('wall_time_s')} s; "
        f"eval return best {num('best_eval_return')}, last {num('last_eval_return')}{where}"
    )


def _check_compiles(config: Path, args: argparse.Namespace) -> None:
    """Compile the config with its overrides now, so a bad key is one error line before any process starts."""
    from ding_dist.entry.pipeline import load_config

    try:
        load_config(str(config), seed=args.seed, overrides=tuple(args.overrides))
    except ConfigError:
        raise
    except (ValueError, KeyError, TypeError) as e:  # e.g. an unknown policy type in create_config
        raise UsageError(f"config {str(config)!r}: {e}") from e


def _train(args: argparse.Namespace) -> int:
    config = _check_config(args.config)
    if args.resume is not None:
        if not Path(args.resume).is_dir():
            raise UsageError(f"--resume {args.resume!r} is not an experiment folder")
        if CheckpointManager(Path(args.resume) / "ckpt").latest() is None:
            raise UsageError(f"--resume {args.resume!r}: no complete checkpoint in its ckpt/ folder")
    if args.exp_dir is not None and Path(args.exp_dir).exists() and not Path(args.exp_dir).is_dir():
        raise UsageError(f"--exp-dir {args.exp_dir!r} exists and is not a folder")
    _check_compiles(config, args)
    if _under_launcher():
        if args.nproc > 1:
            print(f"{PROG}: already under a launcher, ignoring --nproc {args.nproc}", file=sys.stderr)
    elif args.nproc > 1:
        return _launch_local(args.nproc, _child_argv(args, config))

    from ding_dist.comm import DistContext
    from ding_dist.entry import pipeline

    kwargs: dict[str, Any] = {} if args.seed is None else {"seed": args.seed}  # else the pipeline's default
    with DistContext():
        result = pipeline.train(
            str(config),
            overrides=tuple(args.overrides),
            exp_dir=args.exp_dir,
            max_env_steps=args.max_env_steps,
            resume=args.resume,
            **kwargs,
        )
        _print_rank0(_summary(result, args.exp_dir))
    return 0


# ------------------------------------------------------------------------------------------ eval
def _eval(args: argparse.Namespace) -> int:
    config = _check_config(args.config)
    ckpt = resolve_checkpoint(args.ckpt)
    from ding_dist.comm import DistContext
    from ding_dist.entry import pipeline

    with DistContext():
        out = pipeline.evaluate(str(config), str(ckpt), episodes=args.episodes, seed=args.seed)
        _print_rank0(
            f"checkpoint {ckpt}: mean_return {out['mean_return']:.3f} +/- {out['std_return']:.3f} "
            f"over {len(out.get('returns', [])) or args.episodes} episodes (seed {args.seed})"
        )
    return 0


# ------------------------------------------------------------------------------------------ plot
def load_curves(exp_dir: str | os.PathLike, keys: Sequence[str] = PLOT_KEYS) -> dict[str, list[tuple[int, float]]]:
    """Curves ``{key: [(env_step, value), ...]}`` of a run, from ``tb/metrics.jsonl`` or TensorBoard events.

    Example:
        >>> import tempfile
        >>> from ding_dist.utils import MetricWriter
        >>> d = tempfile.mkdtemp()
        >>> w = MetricWriter(d + "/tb", tensorboard=False); w.scalar("eval/mean_reward", 5, 100); w.close()
        >>> load_curves(d)
        {'eval/mean_reward': [(100, 5.0)]}
    """
    root = Path(exp_dir)
    if not root.is_dir():
        raise UsageError(f"experiment folder {str(root)!r} does not exist")
    curves: dict[str, list[tuple[int, float]]] = {}
    for folder in (root / "tb", root):
        if (folder / METRICS_FILE).is_file():
            for rec in read_metrics(folder):
                for key in keys:
                    if isinstance(rec.get(key), (int, float)):
                        curves.setdefault(key, []).append((rec["step"], float(rec[key])))
            break
        if any(folder.glob("events.out.tfevents.*")):
            from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

            acc = EventAccumulator(str(folder), size_guidance={"scalars": 0})
            acc.Reload()
            tags = set(acc.Tags().get("scalars", []))
            for key in keys:
                if key in tags:
                    curves[key] = [(int(e.step), float(e.value)) for e in acc.Scalars(key)]
            break
    else:
        raise UsageError(f"no {METRICS_FILE} or TensorBoard events in {str(root / 'tb')!r} or {str(root)!r}")
    return {k: sorted(v) for k, v in curves.items() if v}


def plot_curves(exp_dirs: Sequence[str | os.PathLike], out: str | os.PathLike) -> Path:
    """Write a PNG with one panel per metric in :data:`PLOT_KEYS` and one line per experiment folder.

    Example:
        >>> plot_curves(["runs/cartpole_dqn"], "curve.png")  # doctest: +SKIP
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    runs = {str(d): load_curves(d) for d in exp_dirs}
    keys = [k for k in PLOT_KEYS if any(k in c for c in runs.values())]
    if not keys:
        raise UsageError(f"no {' or '.join(PLOT_KEYS)} records in {', '.join(map(repr, runs))}")
    fig = Figure(figsize=(5.5 * len(keys), 4), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(keys), squeeze=False)[0]
    for ax, key in zip(axes, keys):
        for name, curves in runs.items():
            points = [(s, v) for s, v in curves.get(key, []) if math.isfinite(v)]
            if points:
                steps, values = zip(*points)
                ax.plot(steps, values, marker="o" if len(points) < 30 else None, ms=3, label=Path(name).name)
        ax.set_title(key)
        ax.set_xlabel("env steps")
        ax.set_ylabel("return")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    out = Path(out)
    with atomic_open(out, "wb") as f:
        fig.savefig(f, format="png", dpi=110)
    return out


def _plot(args: argparse.Namespace) -> int:
    out = Path(args.out) if args.out else Path(args.exp_dirs[0]) / "learning_curve.png"
    if out.suffix.lower() != ".png":
        raise UsageError(f"--out must end in .png, got {str(out)!r}")
    path = plot_curves(args.exp_dirs, out)
    print(f"wrote {path}")
    return 0


# ------------------------------------------------------------------------------------------ main
def _error_line(message: str) -> None:
    """One ``ding-dist: error:`` line in a single write (ranks under a launcher prefix their rank)."""
    world = os.environ.get("WORLD_SIZE", "1")
    prefix = f"[rank {os.environ.get('RANK', '?')}] " if world.isdigit() and int(world) > 1 else ""
    sys.stderr.write(f"{prefix}{PROG}: error: {message}\n")
    sys.stderr.flush()


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``ding-dist`` with ``argv`` (default ``sys.argv[1:]``) and return the exit code.

    Example:
        >>> main(["train", "missing_config.py"])  # doctest: +SKIP
        ding-dist: error: config file 'missing_config.py' does not exist
        2
    """
    args = build_parser().parse_args(argv)
    get_logger("ding_dist")  # rank-aware INFO lines on stderr for the library's loggers
    commands = {"train": _train, "eval": _eval, "plot": _plot}
    try:
        return commands[args.command](args)
    except (UsageError, ConfigError, CheckpointError) as e:
        _error_line(" ".join(str(e).split()))
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
