"""The run folder's config files: ``config.py`` and ``config.json``, the ``config_resume<N>`` pair of later segments,
and whether a run is already done.

``config.py`` (to read and edit) and ``config.json`` (the same resolved config as plain data) are written at the
start; a resume whose resolved config differs (another CONFIG, ``--set``, ``--seed``) logs a unified diff and saves
the new one as ``config_resume<N>.py`` and ``.json``, never over an older file. :func:`run_config` is the newest
``.json``: what resume and eval read when no CONFIG is given, as data, so a run folder copied from elsewhere runs no
code of its own (a config file runs as code only when you name it on the command line).

Example::

    save_run_config(cfg, "runs/cartpole_dqn", continuing=False)   # runs/cartpole_dqn/config.py and config.json
    run_config("runs/cartpole_dqn")                                 # runs/cartpole_dqn/config.json
"""

from __future__ import annotations

import difflib
import json
import logging
import math
import os
import re
import shlex
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ding_dist.config import read_config, save_config, save_config_data
from ding_dist.config.compile import to_plain
from ding_dist.entry.experiment import Experiment
from ding_dist.entry.services.counters import Counters
from ding_dist.utils import atomic_write_json

__all__ = [
    "CONFIG_DATA",
    "CONFIG_FILE",
    "done_message",
    "find_run_config",
    "old_run_config",
    "reached_stop_value",
    "run_config",
    "save_run_config",
    "write_result",
]

logger = logging.getLogger(__name__)

CONFIG_FILE = "config.py"
CONFIG_DATA = "config.json"
_RESUME_CONFIG = re.compile(r"^config_resume(\d+)\.json$")


def _resume_configs(exp_dir: Path) -> list[tuple[int, Path]]:
    """``(N, path)`` of the run's ``config_resume<N>.json`` files, by N."""
    if not exp_dir.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in exp_dir.iterdir() if (m := _RESUME_CONFIG.match(p.name)) and p.is_file()]
    return sorted(found)


def run_config(exp_dir: str | os.PathLike) -> Path | None:
    """The config a run last trained with, as data: its newest ``config_resume<N>.json``, else ``config.json``, else
    None (also for a run written before runs saved their config as data: :func:`old_run_config` finds its file).

    Example::

        run_config("runs/cartpole_dqn")  # Path("runs/cartpole_dqn/config.json") after one run
    """
    folder = Path(exp_dir)
    resumed = _resume_configs(folder)
    if resumed:
        return resumed[-1][1]
    return folder / CONFIG_DATA if (folder / CONFIG_DATA).is_file() else None


def old_run_config(exp_dir: str | os.PathLike) -> Path | None:
    """A run's ``config.py`` when it has no ``config.json`` (written by an older ding_dist), else None: such a file
    is not read unless its user names it (it would run as code).

    Example::

        old_run_config("runs/old_run")  # Path("runs/old_run/config.py")
    """
    folder = Path(exp_dir)
    if run_config(folder) is None and (folder / CONFIG_FILE).is_file():
        return folder / CONFIG_FILE
    return None


def find_run_config(ckpt: str | os.PathLike, find: Any = None) -> Path | None:
    """:func:`run_config` (or ``find``) of the run a checkpoint (file, ``ckpt/`` folder or run folder) belongs to, or
    None.

    Example::

        find_run_config("runs/cartpole_dqn/ckpt/ckpt_000040192.pt")  # runs/cartpole_dqn/config.json
    """
    find = find or run_config
    p = Path(ckpt).resolve()
    start = p if p.is_dir() else p.parent
    for folder in (start, start.parent):
        found = find(folder)
        if found is not None:
            return found
    return None


def _config_text(cfg: Mapping) -> str:
    """The file :func:`~ding_dist.config.save_config` writes for ``cfg``."""
    with tempfile.TemporaryDirectory() as tmp:
        return save_config(cfg, Path(tmp) / CONFIG_FILE).read_text()


def _saved_text(path: Path) -> str:
    """The saved resolved config as ``save_config`` writes it, from its data (never by running a file): the
    ``.json``, or an older run's ``config.py`` as its text."""
    if path.suffix != ".json":
        return path.read_text()
    return _config_text(read_config(path)[0])


def _as_data(cfg: Mapping) -> Any:
    """``cfg`` as its ``.json`` file holds it (tuples as lists)."""
    return json.loads(json.dumps(to_plain(cfg)))


def save_run_config(cfg: Mapping, exp_dir: str | os.PathLike, continuing: bool) -> Path | None:
    """Save the resolved config of a run (rank 0); return the ``.json`` written, or None when nothing changed.

    A fresh run writes ``config.py`` and ``config.json``. A run that continues a checkpoint compares ``cfg`` with
    :func:`run_config` (data: nothing of the folder runs): the same config writes nothing; a different one is
    logged as a unified diff and saved as the next ``config_resume<N>.py`` and ``.json`` (atomically), never over
    an older file.

    Example::

        save_run_config(cfg, "runs/cartpole_dqn", continuing=True)  # None: same config as config.json
    """
    folder = Path(exp_dir)
    saved = (run_config(folder) or old_run_config(folder)) if continuing else None
    if saved is None:
        save_config(cfg, folder / CONFIG_FILE)
        return save_config_data(cfg, folder / CONFIG_DATA)
    old, new = _saved_text(saved), _config_text(_as_data(cfg))
    if old == new:
        return None
    numbers = [n for n, _ in _resume_configs(folder)]
    path = folder / f"config_resume{(numbers[-1] if numbers else 0) + 1}.py"
    save_config(cfg, path)
    data = save_config_data(cfg, path.with_suffix(".json"))
    diff = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), fromfile=str(saved.with_suffix(".py")),
        tofile=str(path)
    )  # fmt: skip
    logger.warning(
        "resuming with another config than the run's %s; the new one is saved as %s:\n%s",
        saved.with_suffix(".py").name,
        path.name,
        "".join(diff).rstrip("\n"),
    )
    return data


def reached_stop_value(state: Mapping[str, Any], stop_value: float | None) -> bool:
    """Whether the last evaluation of checkpoint ``state`` reached ``stop_value`` (None: never).

    Example:
        >>> reached_stop_value({"counters": {"last_eval": 500.0}}, 475), reached_stop_value({"counters": {}}, 475)
        (True, False)
    """
    last = (state.get("counters") or {}).get("last_eval")
    return stop_value is not None and last is not None and math.isfinite(last) and last >= stop_value


def done_message(
    exp_dir: str | os.PathLike, state: Mapping[str, Any], stop_value: float | None, max_env_steps: int | None
) -> str | None:
    """One line saying that the run a checkpoint ``state`` continues is already done, or None when it is not.

    Done: the checkpoint's last evaluation reached ``stop_value``, or its env steps reached ``max_env_steps``. The
    advice for a run that reached its stop value is a command that ends: a budget above its steps (the resume then
    trains on past the stop value, to that budget), never ``env.stop_value=None`` alone, which trains until Ctrl-C.

    Example:
        >>> done_message("runs/x", {"counters": {"env_steps": 512, "last_eval": 500.0}}, 475, None)
        "run 'runs/x' is already done at env step 512 with eval return 500.00 >= env.stop_value=475; to train on \
past it, give a --max-env-steps above 512: ding-dist resume runs/x --max-env-steps 1024"
    """
    c = state.get("counters") or {}
    steps, last = c.get("env_steps", 0), c.get("last_eval")
    ret = "none" if last is None else f"{last:.2f}"
    where = f"run {str(exp_dir)!r} is already done at env step {steps} with eval return {ret}"
    solved = reached_stop_value(state, stop_value)
    at_budget = max_env_steps is not None and steps >= max_env_steps
    if solved:  # advice that works as printed and ends: a budget (past the stop value, which the resume then drops)
        command = f"ding-dist resume {shlex.quote(str(exp_dir))} --max-env-steps {max(2 * steps, steps + 1)}"
        return (
            f"{where} >= env.stop_value={stop_value:g}; to train on past it, give a --max-env-steps above {steps}: "
            f"{command}"
        )
    if at_budget:
        return f"{where}, at its --max-env-steps {max_env_steps}; to continue, give --max-env-steps above {steps}"
    return None


def write_result(
    exp: Experiment, policy: Any, counters: Counters, stopped_by: str, segment_s: float, **extra: Any
) -> dict[str, Any]:
    """The run's result, shared by every loop that learns (``extra`` adds a loop's keys); rank 0 writes
    ``result.json`` atomically. ``wall_time_s`` is the training loops' total over the run's segments (a resumed
    run adds its earlier segments, up to the checkpoint it continued from); ``segment_wall_time_s`` this one's.

    Example::

        result = write_result(exp, policy, counters, "max_env_steps", segment_s=12.5)
    """
    c = counters
    result = {
        "env_steps": c.env_steps,
        "train_iters": policy.train_iter,
        "episodes": c.episodes,
        "best_eval_return": c.best_eval,
        "last_eval_return": c.last_eval,
        "eval_history": c.eval_history,
        "world_size": exp.world,
        "wall_time_s": c.wall_time_s + segment_s,
        "segment_wall_time_s": segment_s,
        "stopped_by": stopped_by,
        "exp_dir": str(exp.exp_dir),
        **extra,
    }
    if exp.rank == 0:
        atomic_write_json(exp.exp_dir / "result.json", result)
    return result
