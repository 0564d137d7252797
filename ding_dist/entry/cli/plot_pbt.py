"""``ding-dist plot RUN`` of a population (a folder with ``lineage.jsonl``, docs/pbt.md): one line per member, its
exploit events marked, and the best member's hyperparameter schedule.

The return panels (``--keys``, default ``eval/mean_reward``) draw each member's curve from its
``member<i>/tb/metrics.jsonl``; on the evaluation panel an arrow at each exploit step goes from the copying member's
score to the score of the member it copied (``lineage.jsonl``). One panel per explored hyperparameter draws each
member's value over the env steps as a step line, the best member's (``result.json``'s ``best_member``, else the
best score of the last round) bold; a key explored log-uniformly (``log=True``) on a log axis.

Example::

    ding-dist plot runs/cartpole_ppo_pbt            # runs/cartpole_ppo_pbt/learning_curve.png
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ding_dist.entry.cli.errors import UsageError
from ding_dist.entry.loops.pbt import LINEAGE_FILE, member_dir
from ding_dist.entry.services.run_folder import run_config
from ding_dist.utils import read_metrics
from ding_dist.utils.fileio import atomic_open

__all__ = ["build_population_figure", "is_population", "plot_population"]


def is_population(folder: str | os.PathLike) -> bool:
    """Whether ``folder`` is the run folder of a population (it holds ``lineage.jsonl``).

    Example:
        >>> is_population("runs/nothing_here")
        False
    """
    return (Path(folder) / LINEAGE_FILE).is_file()


def _lineage(folder: Path) -> list[dict[str, Any]]:
    lines = (folder / LINEAGE_FILE).read_text(encoding="utf-8").splitlines()
    rows = []
    for line in lines:
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line cut short: the others still draw
    return rows


def _best_member(folder: Path, rows: Sequence[dict[str, Any]]) -> int | None:
    try:
        return int(json.loads((folder / "result.json").read_text(encoding="utf-8"))["best_member"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    if not rows:
        return None
    last = [r for r in rows if r["round"] == rows[-1]["round"]]
    scored = [(-math.inf if r["score"] is None else r["score"], -r["member"]) for r in last]
    return -max(scored)[1]


def _trailing_mean(values: list[float], window: int) -> list[float]:
    """The mean of the last ``window`` values at each point (``ding-dist plot --smooth``)."""
    return [sum(values[max(0, i + 1 - window) : i + 1]) / len(values[max(0, i + 1 - window) : i + 1])
            for i in range(len(values))]  # fmt: skip


def _log_keys(folder: Path) -> set[str]:
    """The hyperparameters the population's config explores log-uniformly."""
    found = run_config(folder)
    if found is None:
        return set()
    from ding_dist.config import read_config

    try:
        spec = read_config(found)[0]["pbt"]["hyperparams"]
    except Exception:  # an unreadable config: linear axes
        return set()
    return {key for key, entry in spec.items() if isinstance(entry, dict) and entry.get("log")}


def build_population_figure(
    folder: str | os.PathLike, keys: Sequence[str] | None = None, smooth_window: int = 1
) -> Any:
    """The matplotlib ``Figure`` of a population folder (see the module docstring).

    Example:
        >>> fig = build_population_figure("runs/cartpole_ppo_pbt")  # doctest: +SKIP
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    folder = Path(folder)
    rows = _lineage(folder)
    members = sorted({r["member"] for r in rows}) or [0]
    i = len(members)
    while member_dir(folder, i).is_dir():  # members of a run that has no round yet
        members.append(i)
        i += 1
    records = {m: read_metrics(member_dir(folder, m) / "tb") for m in members}
    keys = list(keys or ())
    if not keys:
        every = {k for recs in records.values() for r in recs for k in r}
        keys = ["eval/mean_reward"] if "eval/mean_reward" in every else ["rollout/ep_rew_mean"]
    hypers = sorted({k for r in rows for k in r.get("new_hyperparams", {})})
    best = _best_member(folder, rows)
    panels = [*keys, *hypers]
    cols = min(len(panels), 3)
    fig = Figure(figsize=(max(5.2 * cols, 6.0), 3.8 * math.ceil(len(panels) / cols)), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(math.ceil(len(panels) / cols), cols, squeeze=False).ravel()
    for ax, key in zip(axes, keys):
        for m in members:
            points = [(r["step"], r[key]) for r in records[m] if key in r]
            if points:
                xs, ys = zip(*points)
                ax.plot(xs, _trailing_mean(list(ys), smooth_window), color=f"C{m % 10}", lw=2.2 if m == best else 1.2,
                        label=f"member {m}" + (" (best)" if m == best else ""))  # fmt: skip
        if key == "eval/mean_reward":  # the exploit events: from the copying member's score to the copied one's
            for r in rows:
                if r.get("copied_from") is not None and r["score"] is not None:
                    target = r["scores"][r["copied_from"]]
                    arrow = {"arrowstyle": "->", "color": f"C{r['member'] % 10}", "lw": 1.0}
                    ax.annotate("", xy=(r["env_step"], target), xytext=(r["env_step"], r["score"]), arrowprops=arrow)
        ax.set_title(key, fontsize="medium")
        ax.set_xlabel("env steps")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small", frameon=False)
    logs = _log_keys(folder)
    for ax, key in zip(axes[len(keys) :], hypers):
        for m in members:
            mine = [r for r in rows if r["member"] == m]
            if not mine:
                continue
            xs = [0] + [r["env_step"] for r in mine]
            ys = [mine[0]["old_hyperparams"][key]] + [r["new_hyperparams"][key] for r in mine]
            label = f"member {m}" + (" (best)" if m == best else "")
            ax.step(xs, ys, where="post", color=f"C{m % 10}", lw=2.2 if m == best else 0.9,
                    alpha=1.0 if m == best else 0.6, label=label)  # fmt: skip
        if key in logs:
            ax.set_yscale("log")
        ax.set_title(f"{key} (best member bold)", fontsize="medium")
        ax.set_xlabel("env steps")
        ax.grid(alpha=0.3)
    for ax in axes[len(panels) :]:
        ax.set_visible(False)
    copies = sum(r.get("copied_from") is not None for r in rows)
    fig.suptitle(f"{folder.name}: population of {len(members)}, {copies} exploit copies", fontsize="medium")
    return fig


def plot_population(
    folder: str | os.PathLike, out: str | os.PathLike, keys: Sequence[str] | None = None, smooth_window: int = 1
) -> Path:
    """Write the PNG of a population folder (:func:`build_population_figure`) to ``out``; its folder must exist.

    Example:
        >>> plot_population("runs/cartpole_ppo_pbt", "runs/cartpole_ppo_pbt/pbt.png")  # doctest: +SKIP
    """
    if not is_population(folder):
        raise UsageError(f"{str(folder)!r} is not a population's run folder (no {LINEAGE_FILE})")
    fig = build_population_figure(folder, keys, smooth_window)
    out = Path(out)
    with atomic_open(out, "wb") as f:
        fig.savefig(f, format="png", dpi=110)
    return out
