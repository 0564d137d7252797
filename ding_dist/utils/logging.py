"""Rank-aware logging: text logs, TensorBoard scalars plus a JSON-lines copy, and progress bars.

Rank 0 writes everything; other ranks only print warnings and errors (prefixed with their rank) and
write no files, so N processes produce one set of logs.

TensorBoard keys follow SB3/CleanRL: ``rollout/ep_rew_mean``, ``rollout/ep_len_mean``,
``eval/mean_reward``, ``train/loss``, ``train/<name>``, ``time/fps``, ``time/env_steps``,
``time/train_iters``.
"""

from __future__ import annotations

import json
import logging
import math
import numbers
import os
import re
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ding_dist.utils.fileio import atomic_write_text
from ding_dist.utils.install import install_hint

__all__ = [
    "get_logger",
    "MetricWriter",
    "PlainProgress",
    "end_progress",
    "progress_bar",
    "read_metrics",
    "tracking_requested",
    "METRICS_FILE",
    "TRACK_ENV",
]

METRICS_FILE = "metrics.jsonl"
#: Set to 1 (``ding-dist train --track``) to mirror the run to Weights & Biases (rank 0's MetricWriter).
TRACK_ENV = "DING_DIST_TRACK"
_RESERVED = ("step", "wall_time")
_FMT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_DATEFMT = "%H:%M:%S"


def _rank_and_world() -> tuple[int, int]:
    from ding_dist.comm import get_rank, get_world_size  # lazy: the rank is read when a record is emitted

    return get_rank(), get_world_size()


class _RankFilter(logging.Filter):
    """Let rank 0 through at any level; other ranks only at WARNING and above."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING:
            return True
        return _rank_and_world()[0] == 0


class _RankFormatter(logging.Formatter):
    """Prefix each line with ``[rank R]`` when the world has more than one process."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        rank, world = _rank_and_world()
        return f"[rank {rank}] {text}" if world > 1 else text


class _StderrHandler(logging.StreamHandler):
    """Write to the *current* ``sys.stderr`` (so redirections made after setup are honoured)."""

    _ding_dist = True

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


def get_logger(name: str) -> logging.Logger:
    """Return ``logging.getLogger(name)`` with a rank-aware stderr handler on its top-level package.

    INFO and above are printed on rank 0; other ranks print WARNING and above, prefixed with their rank
    when the world size is > 1. Rank is looked up when a record is emitted, so module-level loggers
    created before ``dist_init`` behave right afterwards.

    Example:
        >>> log = get_logger("ding_dist.demo")
        >>> log.info("collected %d steps", 128)  # printed on rank 0 only
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"logger name must be a non-empty string, got {name!r}")
    logger = logging.getLogger(name)
    top = logging.getLogger(name.split(".")[0])
    if not any(getattr(h, "_ding_dist", False) for h in top.handlers):
        handler = _StderrHandler()
        handler.addFilter(_RankFilter())
        handler.setFormatter(_RankFormatter(_FMT, _DATEFMT))
        top.addHandler(handler)
        if top.level == logging.NOTSET:
            top.setLevel(logging.INFO)
    return logger


def _as_float(key: str, value: Any) -> float:
    if hasattr(value, "item") and callable(value.item):  # torch / numpy scalars
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"metric {key!r} must be a real number, got {value!r} ({type(value).__name__})")
    return float(value)


def _json_number(x: float) -> float | str:
    return x if math.isfinite(x) else str(x)  # 'nan' / 'inf' keep the file strict JSON


def read_metrics(path: str | os.PathLike) -> list[dict]:
    """Read the records of a ``metrics.jsonl`` file (or of a folder holding one), oldest first.

    Lines that are not valid JSON (e.g. a last line cut short by a crash) are skipped.

    Example:
        >>> import tempfile
        >>> d = tempfile.mkdtemp()
        >>> w = MetricWriter(d, tensorboard=False); w.scalar("eval/mean_reward", 9.5, step=100); w.close()
        >>> [(r["step"], r["eval/mean_reward"]) for r in read_metrics(d)]
        [(100, 9.5)]
    """
    p = Path(path)
    if p.is_dir():
        p = p / METRICS_FILE
    if not p.is_file():
        raise FileNotFoundError(f"no metrics file at {str(p)!r}")
    records = []
    with open(p, encoding="utf-8") as f:
        for line in f:
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(rec, dict) and isinstance(rec.get("step"), int):
                records.append({k: float(v) if isinstance(v, str) else v for k, v in rec.items()})
    return records


class MetricWriter:
    """Scalars to TensorBoard and to ``log_dir/metrics.jsonl`` on rank 0; a no-op on other ranks.

    Each :meth:`scalars` call appends one JSON line ``{"step": s, "wall_time": t, "<key>": value, ...}``.
    ``purge_step`` (when resuming at step S) drops records at steps >= S left by the interrupted run,
    both in TensorBoard and in the JSON-lines file. ``tensorboard=False`` writes only the JSON lines.
    TensorBoard's writer (importing it takes about 0.2 s) is made at the first record, flush or close, so a run
    reaches its first env step without it. ``config`` (the resolved run config) is written once to TensorBoard
    (:meth:`write_config`). ``track``
    (default: :func:`tracking_requested`) first starts a Weights & Biases run with ``sync_tensorboard``,
    the config, ``dir`` = the folder above ``log_dir`` (the experiment folder), offline unless
    ``WANDB_MODE`` or ``WANDB_API_KEY`` is set; it is finished by :meth:`close`. ``enabled`` (default: this is rank
    0) says whether this process writes (a population's members write from their own first ranks).

    Example:
        >>> import tempfile
        >>> with MetricWriter(tempfile.mkdtemp(), tensorboard=False) as w:
        ...     w.scalars({"rollout/ep_rew_mean": 21.0, "time/fps": 900.0}, step=500)
    """

    def __init__(
        self,
        log_dir: str | os.PathLike,
        purge_step: int | None = None,
        tensorboard: bool = True,
        config: Mapping[str, Any] | None = None,
        track: bool | None = None,
        enabled: bool | None = None,
    ):
        if purge_step is not None and (isinstance(purge_step, bool) or not isinstance(purge_step, int)):
            raise TypeError(f"purge_step must be an int or None, got {purge_step!r}")
        self.log_dir = Path(log_dir)
        self.enabled = _rank_and_world()[0] == 0 if enabled is None else bool(enabled)
        self._tb = None
        self._tb_to_make: int | None | bool = False  # the writer's purge_step until it is made; False: none to make
        self._tb_configs: list[tuple[Mapping[str, Any], int]] = []  # write_config's calls before it was made
        self._file = None
        self._wandb = None
        if not self.enabled:
            return
        self.log_dir.mkdir(parents=True, exist_ok=True)
        path = self.log_dir / METRICS_FILE
        if purge_step is not None and path.is_file():
            kept = [r for r in read_metrics(path) if r["step"] < purge_step]
            atomic_write_text(path, "".join(json.dumps(self._encode(r)) + "\n" for r in kept))
        if tracking_requested() if track is None else track:  # before TensorBoard: wandb patches its writer
            self._wandb = _start_wandb(config or {}, self.log_dir.parent)
        if tensorboard:
            self._tb_to_make = purge_step  # made by _writer(), after wandb's patch as before
        self._file = open(path, "a", encoding="utf-8")
        if config is not None:
            self.write_config(config, step=purge_step or 0)

    def _writer(self) -> Any:
        """TensorBoard's ``SummaryWriter`` (None without TensorBoard), made at the first call, which also writes the
        configs :meth:`write_config` was given before it."""
        if self._tb is None and self._tb_to_make is not False:
            from torch.utils.tensorboard import SummaryWriter

            purge_step, self._tb_to_make = self._tb_to_make, False
            self._tb = SummaryWriter(log_dir=str(self.log_dir), purge_step=purge_step)
            configs, self._tb_configs = self._tb_configs, []
            for config, step in configs:
                self.write_config(config, step)
        return self._tb

    @staticmethod
    def _encode(record: Mapping[str, Any]) -> dict:
        return {k: _json_number(v) if isinstance(v, float) else v for k, v in record.items()}

    def scalars(self, values: Mapping[str, Any], step: int) -> None:
        """Log several scalars at ``step`` (e.g. env steps)."""
        if isinstance(step, bool) or not isinstance(step, numbers.Integral):
            raise TypeError(f"step must be an int, got {step!r}")
        if not isinstance(values, Mapping):
            raise TypeError(f"values must be a dict of metric name -> number, got {type(values).__name__}")
        clean = {}
        for key, value in values.items():
            if not isinstance(key, str) or key in _RESERVED:
                raise ValueError(f"metric name must be a string other than {_RESERVED}, got {key!r}")
            clean[key] = _as_float(key, value)
        if not self.enabled or self._file is None:
            return
        tb = self._writer()
        if tb is not None:
            for key, value in clean.items():
                tb.add_scalar(key, value, int(step))
        record = {"step": int(step), "wall_time": time.time(), **clean}
        self._file.write(json.dumps(self._encode(record)) + "\n")
        self._file.flush()

    def scalar(self, key: str, value: Any, step: int) -> None:
        """Log one scalar at ``step``."""
        self.scalars({key: value}, step)

    def write_config(self, config: Mapping[str, Any], step: int = 0) -> None:
        """Write a run's resolved config to TensorBoard: the whole config as text (tag ``config``) and its
        scalar leaves (numbers, strings, booleans) as hparams (``policy.learn.learning_rate`` ...), with
        ``eval/mean_reward`` as the hparams dashboard's metric. A no-op without TensorBoard.

        Example:
            >>> import tempfile
            >>> with MetricWriter(tempfile.mkdtemp()) as w:
            ...     w.write_config({"seed": 0, "policy": {"learn": {"learning_rate": 1e-3}}})
        """
        if not self.enabled or (self._tb is None and self._tb_to_make is False):
            return
        if self._tb is None:  # written when the writer is made, as it is now
            self._tb_configs.append((_plain(config), step))
            return
        from torch.utils.tensorboard.summary import hparams

        plain = _plain(config)
        text = json.dumps(plain, indent=2, sort_keys=True, default=str)
        self._tb.add_text("config", "    " + text.replace("\n", "\n    "), int(step))  # markdown code block
        flat = {k: v for k, v in _flat(plain).items() if isinstance(v, (bool, int, float, str))}
        writer = self._tb._get_file_writer()
        for summary in hparams(flat, {"eval/mean_reward": 0.0}):
            writer.add_summary(summary, int(step))

    def flush(self) -> None:
        """Push buffered events to disk."""
        if self._file is not None and self._writer() is not None:
            self._tb.flush()
        if self._file is not None:
            self._file.flush()
            os.fsync(self._file.fileno())

    def close(self) -> None:
        """Flush and close (and finish the W&B run); later calls are no-ops."""
        if self._file is not None:  # a run that wrote no record still leaves its config in TensorBoard
            self._writer()
        if self._tb is not None:
            self._tb.close()
            self._tb = None
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._wandb is not None:
            run, self._wandb = self._wandb, None
            run.finish()

    def __enter__(self) -> MetricWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def tracking_requested(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``DING_DIST_TRACK`` (in ``environ``, default ``os.environ``) asks for Weights & Biases
    tracking; ``ding-dist train --track`` sets it for every rank.

    Example:
        >>> tracking_requested({"DING_DIST_TRACK": "1"}), tracking_requested({})
        (True, False)
    """
    from ding_dist.comm.settings import env_value  # the table of DING_DIST_* variables: a bad value is one line

    return bool(env_value(TRACK_ENV, os.environ if environ is None else environ))


def _plain(config: Any) -> Any:
    if isinstance(config, Mapping):
        return {str(k): _plain(v) for k, v in config.items()}
    if isinstance(config, (list, tuple)):
        return [_plain(v) for v in config]
    return config


def _flat(node: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in node.items():
        if isinstance(value, Mapping):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _start_wandb(config: Mapping[str, Any], folder: Path) -> Any:
    """``wandb.init`` for a run in ``folder`` (see :class:`MetricWriter`); ImportError naming the extra."""
    try:
        import wandb
    except ImportError as e:
        raise ImportError(f"tracking with W&B needs the wandb package: {install_hint('wandb')} ({e})") from None
    kwargs: dict[str, Any] = {
        "project": os.environ.get("WANDB_PROJECT") or "ding_dist",
        "name": folder.resolve().name,
        "dir": str(folder),
        "config": _plain(config),
        "sync_tensorboard": True,
    }
    if not (os.environ.get("WANDB_MODE") or os.environ.get("WANDB_API_KEY")):
        kwargs["mode"] = "offline"  # no account or network needed; `wandb sync` uploads it later
    return wandb.init(**kwargs)


class PlainProgress:
    """Progress off a terminal: one plain line (``n/total env steps (p%), R env steps/s, ETA h:mm:ss, k=v``) every
    ``interval`` seconds and one at the end, each ending in a newline; tqdm's ``update``, ``set_postfix``,
    ``close``, ``n``, ``total`` and ``disable``.

    Example:
        >>> import io
        >>> out = io.StringIO()
        >>> bar = PlainProgress(100, desc="env steps", stream=out, clock=iter([0.0, 10.0, 10.0]).__next__)
        >>> bar.update(50); bar.close()
        >>> out.getvalue()
        '50/100 env steps (50%), 5 env steps/s, ETA 0:00:10\\n'
    """

    def __init__(
        self,
        total: int | None,
        desc: str = "",
        initial: int = 0,
        *,
        disable: bool = False,
        interval: float = 30.0,
        unit: str = "env steps",
        stream: Any = None,
        clock: Any = time.monotonic,
    ) -> None:
        self.total, self.desc, self.n, self.disable = total, desc, initial, disable
        self.interval, self.unit, self._stream, self._clock = interval, unit, stream, clock
        self._initial = initial
        self._start = self._last = clock()
        self._postfix: dict[str, Any] = {}
        self._closed = False
        self.stopped: str | None = None  # why the run ended before its total (no ETA is shown then)

    def update(self, n: int = 1) -> None:
        """Count ``n`` more; print a line when ``interval`` seconds have passed since the last one."""
        self.n += n
        now = self._clock()
        if now - self._last >= self.interval:
            self._last = now
            self._print(now)

    def set_postfix(self, ordered_dict: Mapping[str, Any] | None = None, refresh: bool = True, **kwargs: Any) -> None:
        """Values shown at the end of the next line (never a line of their own)."""
        self._postfix = {**(ordered_dict or {}), **kwargs}

    def close(self) -> None:
        """Print the final line (once)."""
        if not self._closed:
            self._closed = True
            self._print(self._clock())

    def line(self, now: float) -> str:
        """The progress line at time ``now``."""
        elapsed = max(now - self._start, 1e-9)
        rate = (self.n - self._initial) / elapsed
        head = f"{self.desc}: " if self.desc and self.desc != self.unit else ""
        if self.total:
            text = f"{head}{self.n}/{self.total} {self.unit} ({min(100, 100 * self.n // self.total)}%)"
        else:
            text = f"{head}{self.n} {self.unit}"
        text += f", {rate:.0f} {self.unit}/s"
        if self.stopped is not None:
            text += f", stopped by {self.stopped}"
        elif self.total and rate > 0:
            left = max(self.total - self.n, 0) / rate
            text += f", ETA {int(left // 3600)}:{int(left % 3600 // 60):02d}:{int(left % 60):02d}"
        return text + "".join(f", {k}={v}" for k, v in self._postfix.items())

    def _print(self, now: float) -> None:
        if not self.disable:
            stream = self._stream or sys.stderr
            stream.write(self.line(now) + "\n")
            stream.flush()


def _console_loggers() -> list[logging.Logger]:
    """The loggers whose console handlers a shown bar redirects: ``ding_dist``'s, and the root logger when it
    prints to the console (a logger without one must not get tqdm's handler: its records would print twice)."""
    found = []
    for logger in (logging.getLogger("ding_dist"), logging.root):
        console = [h for h in logger.handlers if isinstance(h, logging.StreamHandler)]
        for h in console:
            if getattr(h, "_ding_dist", False):
                h.stream = sys.stderr  # it writes to the current stderr: let tqdm's handler do the same
        if any(h.stream in (sys.stdout, sys.stderr) for h in console):
            found.append(logger)
    return found


class _LoggingBar(tqdm):
    """A tqdm bar that, from creation to :meth:`close`, prints log lines above itself (``logging_redirect_tqdm``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._redirect = None
        super().__init__(*args, **kwargs)
        if not self.disable:
            from tqdm.contrib.logging import logging_redirect_tqdm

            self._redirect = logging_redirect_tqdm(loggers=_console_loggers(), tqdm_class=tqdm)
            self._redirect.__enter__()

    def close(self) -> None:
        """Close the bar, then give the loggers their own handlers back."""
        try:
            super().close()
        finally:
            redirect, self._redirect = getattr(self, "_redirect", None), None
            if redirect is not None:
                redirect.__exit__(None, None, None)


def end_progress(bar: tqdm | PlainProgress, stopped_by: str, last_eval: float | None = None) -> None:
    """Before a bar closes: its last values, and when the run ended before the bar's total (a stop value, a
    signal), why, in place of an ETA (a plain line says ``stopped by stop_value``; a tqdm bar fills to where the
    run ended and says it in its description).

    Example:
        >>> import io
        >>> out = io.StringIO()
        >>> bar = PlainProgress(100, desc="env steps", stream=out, clock=iter([0.0, 10.0, 10.0]).__next__)
        >>> bar.update(76); end_progress(bar, "stop_value", 500.0); bar.close()
        >>> out.getvalue()
        '76/100 env steps (76%), 8 env steps/s, stopped by stop_value, eval=500.0\\n'
    """
    if last_eval is not None and isinstance(bar, PlainProgress):
        bar.set_postfix({**bar._postfix, "eval": f"{last_eval:.1f}"})
    elif last_eval is not None and bar.postfix and "eval=" in bar.postfix:  # tqdm keeps its postfix as text
        bar.set_postfix_str(re.sub(r"eval=[^,]*", f"eval={last_eval:.1f}", bar.postfix), refresh=False)
    if bar.total is None or bar.n >= bar.total:
        return
    if isinstance(bar, PlainProgress):
        bar.stopped = stopped_by
    else:
        bar.total = bar.n
        bar.set_description(f"{bar.desc} (stopped by {stopped_by})", refresh=False)
        bar.refresh()


def progress_bar(total: int | None, desc: str = "", initial: int = 0) -> tqdm | PlainProgress:
    """A tqdm bar shown on rank 0 and disabled (silent, still countable) on the other ranks.

    When stderr is not a terminal (CI logs, redirected output) it is a :class:`PlainProgress`: one
    plain line every 30 s with the total and an ETA, rather than carriage-return refreshes glued together.
    On a terminal, while the bar is open, the console lines of the ``ding_dist`` loggers (and of the root
    logger's console handlers) go through tqdm's ``logging_redirect_tqdm``: they print above the bar.

    Example:
        >>> bar = progress_bar(100, desc="env steps")
        >>> bar.update(10); bar.close()
    """
    if total is not None and (isinstance(total, bool) or not isinstance(total, numbers.Integral) or total < 0):
        raise ValueError(f"total must be an int >= 0 or None, got {total!r}")
    disable = _rank_and_world()[0] != 0
    if not sys.stderr.isatty():
        return PlainProgress(total, desc=desc, initial=initial, disable=disable)
    return _LoggingBar(
        total=total,
        desc=desc,
        initial=initial,
        disable=disable,
        dynamic_ncols=True,
        mininterval=0.5,
        unit=" env steps" if desc == "env steps" else "it",
    )
