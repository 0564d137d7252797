"""Reading run folders for ``ding-dist plot``: a :class:`Run` (its logged scalars, saved config, world size and why it
stopped), :func:`find_runs` (the runs in a folder of runs, one or two levels down), :func:`load_run` and
:func:`load_curves`.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ding_dist.entry.cli.errors import UsageError
from ding_dist.entry.exp_folder import ABORTED
from ding_dist.utils.logging import METRICS_FILE, read_metrics

__all__ = ["HELD", "IGNORED_FOR_GROUPING", "PLOT_KEYS", "Run", "find_runs", "load_curves", "load_run"]

#: Keys of the historical default panels (``load_curves``' default).
PLOT_KEYS = ("rollout/ep_rew_mean", "eval/mean_reward")
HELD = "stop_value"  # result.json's stopped_by of a run that solved its task: its curve holds its last value
IGNORED_FOR_GROUPING = ("seed", "exp_name")  # what seeds of one group may differ in
_FIND_DEPTH = 2  # how far below a folder of runs ``find_runs`` looks


@dataclass
class Run:
    """One experiment folder's logged scalars: ``points[key]`` is a list of ``(env_step, wall_time, value)``.

    ``config`` is the flattened saved config (``{"policy.learn.learning_rate": 1e-3, ...}``, empty when the
    folder has no ``config.py``); ``world_size`` and ``stopped_by`` (``"stop_value"``, ``"max_env_steps"``,
    ...) come from ``result.json`` when it is there (None: no result yet, e.g. still running or crashed).
    """

    path: Path
    points: dict[str, list[tuple[int, float, float]]]
    config: dict[str, Any] = field(default_factory=dict)
    world_size: int | None = None
    stopped_by: str | None = None

    @property
    def name(self) -> str:
        """The folder's name."""
        return self.path.resolve().name or str(self.path)

    @property
    def held(self) -> bool:
        """Whether the run stopped because it reached ``env.stop_value`` (its curve holds its last value)."""
        return self.stopped_by == HELD

    def group_key(self) -> tuple | None:
        """What seeds share: the config without ``seed``/``exp_name``, and the world size (None: no config)."""
        if not self.config:
            return None
        items = sorted((k, repr(v)) for k, v in self.config.items() if k not in IGNORED_FOR_GROUPING)
        return (tuple(items), self.world_size)


def _flatten(node: Mapping, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in node.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(_flatten(value, name + "."))
        else:
            out[name] = value
    return out


def _read_saved_config(root: Path) -> dict[str, Any]:
    path = root / "config.py"
    if not path.is_file():
        return {}
    from ding_dist.config import ConfigError, read_config

    try:
        main, create = read_config(path)
    except ConfigError as e:
        raise UsageError(f"run {str(root)!r}: {' '.join(str(e).split())}") from None
    flat = _flatten({k: v for k, v in main.items() if k != "create_config"})
    flat.update(_flatten(create or {}, "create_config."))
    return flat


def _read_result(root: Path) -> tuple[int | None, str | None]:
    """``(world_size, stopped_by)`` from ``result.json`` (None for what it does not say, or no file)."""
    try:
        result = json.loads((root / "result.json").read_text(encoding="utf-8"))
        world, stopped = result.get("world_size"), result.get("stopped_by")
    except (OSError, ValueError, AttributeError):
        return None, None
    return (world if isinstance(world, int) else None), (stopped if isinstance(stopped, str) else None)


def _has_logs(folder: Path) -> bool:
    """Whether ``folder`` is a run: scalars in ``tb/`` or in the folder itself."""
    return any((f / METRICS_FILE).is_file() or any(f.glob("events.out.tfevents.*")) for f in (folder / "tb", folder))


def find_runs(folder: str | os.PathLike) -> list[Path]:
    """``[folder]`` when it is a run (it has logs), else the runs inside it, one or two levels down, by path.

    A run's own sub-folders (``tb/``, ``ckpt/``, ``aborted/``) are not searched, nor are hidden folders or the
    ``aborted/`` folder where a new run set aside a run that stopped before its first checkpoint (name that folder
    to plot those). A folder that does not exist, or holds neither logs nor runs, is a :class:`UsageError`.

    Example:
        >>> import tempfile
        >>> from ding_dist.utils import MetricWriter
        >>> d = Path(tempfile.mkdtemp())
        >>> for name in ("sweep/s2", "sweep/s1", "alone"):
        ...     MetricWriter(d / name / "tb", tensorboard=False).close()
        >>> [str(p.relative_to(d)) for p in find_runs(d)]
        ['alone', 'sweep/s1', 'sweep/s2']
    """
    root = Path(folder)
    if not root.is_dir():
        raise UsageError(f"experiment folder {str(root)!r} does not exist")
    if _has_logs(root):
        return [root]
    found: list[Path] = []
    level = [root]
    for _ in range(_FIND_DEPTH):
        below = sorted(p for parent in level for p in parent.iterdir()
                       if p.is_dir() and not p.name.startswith(".") and p.name != ABORTED)  # fmt: skip
        found += [p for p in below if _has_logs(p)]
        level = [p for p in below if not _has_logs(p)]
    if not found:
        raise UsageError(
            f"{str(root)!r} is neither a run nor a folder of runs: no {METRICS_FILE} or TensorBoard events in it, "
            f"its tb/, or the folders {_FIND_DEPTH} levels below it"
        )
    return sorted(found)


def _read_points(root: Path) -> dict[str, list[tuple[int, float, float]]]:
    points: dict[str, list[tuple[int, float, float]]] = {}
    for folder in (root / "tb", root):
        if (folder / METRICS_FILE).is_file():
            for rec in read_metrics(folder):
                wall = rec.get("wall_time")
                wall = float(wall) if isinstance(wall, (int, float)) else math.nan
                for key, value in rec.items():
                    if key not in ("step", "wall_time") and isinstance(value, (int, float)):
                        points.setdefault(key, []).append((rec["step"], wall, float(value)))
            return points
        if any(folder.glob("events.out.tfevents.*")):
            from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

            acc = EventAccumulator(str(folder), size_guidance={"scalars": 0})
            acc.Reload()
            for key in acc.Tags().get("scalars", []):
                points[key] = [(int(e.step), float(e.wall_time), float(e.value)) for e in acc.Scalars(key)]
            return points
    raise UsageError(f"no {METRICS_FILE} or TensorBoard events in {str(root / 'tb')!r} or {str(root)!r}")


def load_run(exp_dir: str | os.PathLike) -> Run:
    """Read a run folder: its scalars (``tb/metrics.jsonl``, else TensorBoard events), config and world size.

    Example:
        >>> import tempfile
        >>> from ding_dist.utils import MetricWriter
        >>> d = tempfile.mkdtemp()
        >>> w = MetricWriter(d + "/tb", tensorboard=False); w.scalar("eval/mean_reward", 5, 100); w.close()
        >>> [(s, v) for s, _, v in load_run(d).points["eval/mean_reward"]]
        [(100, 5.0)]
    """
    root = Path(exp_dir)
    if not root.is_dir():
        raise UsageError(f"experiment folder {str(root)!r} does not exist")
    return Run(root, _read_points(root), _read_saved_config(root), *_read_result(root))


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
    points = _read_points(root)
    return {k: sorted((s, v) for s, _, v in points[k]) for k in keys if points.get(k)}
