"""DI-engine 0.5.3's own config files, each given unchanged to ding_dist: which are accepted, which train.

For every config file of DI-engine's model zoo in ``dizoo/{classic_control,atari,mujoco,box2d}`` this runs what
``ding-dist config show FILE`` runs (translate, then compile) and, with ``--train``, ``ding-dist train FILE`` for a
short budget: until the first learning step has happened twice over (``max(2 n_sample, learning_starts +
n_sample)`` env steps; 8 times that for the policies that learn from whole episodes, ``collect.n_episode``).
The results go to a JSON file (``docs/ding_coverage.json``), from which the tables of
docs/migration_from_ding.md are rendered (between ``<!-- ding-coverage:NAME -->`` and ``<!-- /ding-coverage -->``);
``tests/config/test_docs_tables.py`` checks the rendered tables are current.

Files of the families the online-RL count leaves out (offline RL, imitation, reward models and exploration bonuses,
data generation, transformers, residual networks, representation add-ons) are listed with their family and still
given to ``config show``; they are not counted.

Usage::

    python tools/ding_coverage.py                          # config show on every file, JSON + docs tables
    python tools/ding_coverage.py --train --budget-s 600   # also a short training run of every accepted file
    python tools/ding_coverage.py --only 'pong_*' --train  # a subset (the other files keep their last results)
    python tools/ding_coverage.py --train --missing        # resume: only files without a successful run
    python tools/ding_coverage.py --train --jobs 2         # two runs at a time (one torch thread each)
    python tools/ding_coverage.py --render                 # only re-render the docs tables from the JSON

DI-engine's files come from ``--dizoo DIR`` (a ``dizoo`` folder), ``$DING_DIZOO``, or DI-engine 0.5.3's wheel,
downloaded once with ``pip download di-engine==0.5.3 --no-deps`` into ``~/.cache/ding_dist``.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import fnmatch
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from pathlib import Path

from ding_dist.utils.fileio import atomic_write_text

REPO = Path(__file__).resolve().parents[1]
JSON = REPO / "docs" / "ding_coverage.json"
DOCS = REPO / "docs" / "migration_from_ding.md"
SUITES = ("classic_control", "atari", "mujoco", "box2d")
VERSION = "0.5.3"
#: Families left out of the online-RL count, by a part of the file name (the first that matches names the family).
LEFT_OUT = (
    ("offline RL (a fixed data set)", ("_cql", "_td3_bc", "_dt_", "_decision_transformer")),
    ("imitation (expert data or an expert policy)", ("_bc_", "_bco", "_dqfd", "_sqil", "_ibc", "_r2d3")),
    ("reward model or exploration bonus", ("_gail", "_trex", "_drex", "_gcl", "_rnd", "_ngu", "_icm", "dqn_rnd")),
    ("data generation (loads a trained policy)", ("generation_data", "data_generation")),
    ("transformer", ("_gtrxl", "_hpt")),
    ("residual network", ("_residual",)),
    ("representation add-on", ("_stdim", "_vae")),
)


def left_out_family(path: str) -> str | None:
    """The left-out family of a DI-engine config file (its path under ``dizoo``), None for a counted online-RL file.

    Example::

        left_out_family("atari/config/serial/pong/pong_cql_config.py")  # 'offline RL (a fixed data set)'
    """
    if "/parallel/" in path:
        return "DI-engine's old parallel pipeline (dqn_command policies)"
    stem = "_" + Path(path).name.removesuffix(".py") + "_"
    for family, parts in LEFT_OUT:
        if any(part in stem for part in parts):
            return family
    return None


def dizoo_dir(given: str | None) -> Path:
    """The ``dizoo`` folder: ``given``, ``$DING_DIZOO``, or DI-engine's wheel unpacked in the cache."""
    for path in (given, os.environ.get("DING_DIZOO")):
        if path:
            return Path(path)
    cache = Path.home() / ".cache" / "ding_dist" / f"di-engine-{VERSION}"
    if not (cache / "dizoo").is_dir():
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", f"di-engine=={VERSION}", "--no-deps", "-d",
                        str(cache)], check=True)  # fmt: skip
        wheel = next(cache.glob("*.whl"))
        with zipfile.ZipFile(wheel) as z:
            z.extractall(cache, [n for n in z.namelist() if n.startswith("dizoo/")])
    return cache / "dizoo"


def config_files(dizoo: Path) -> list[tuple[str, Path]]:
    """``(suite, path)`` of every config file under ``dizoo/<suite>/**/config/``, sorted."""
    found = []
    for suite in SUITES:
        for path in sorted((dizoo / suite).rglob("*.py")):
            if "config" in path.relative_to(dizoo).parts[:-1] and path.name != "__init__.py":
                if "config" in path.name:
                    found.append((suite, path))
    return found


def config_show(path: Path) -> dict:
    """What ``ding-dist config show`` makes of ``path``: policy type, accepted or refused (with the first line)."""
    from ding_dist.config import ConfigError, read_config
    from ding_dist.config.ding import report as ding_report
    from ding_dist.entry.pipeline import load_config

    ding_report.reported.clear()
    os.environ.pop(ding_report.REPORTED_ENV, None)
    types = re.findall(r"policy\s*=\s*dict\(\s*type\s*=\s*['\"](\w+)['\"]", path.read_text())
    entry: dict = {"policy": types[-1] if types else None}  # create_config's, also when the file cannot run
    with contextlib.suppress(Exception):
        entry["policy"] = (read_config(path)[1].get("policy") or {}).get("type")
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            cfg = load_config(path)
    except (ConfigError, ValueError, TypeError) as e:
        why = str(e).splitlines()[0].replace(str(path), path.name)
        why = re.sub(r"ding_dist has the policies \[[^\]]*\]( \(closest: '\w+'\))?", "ding_dist has no such policy",
                     why)  # fmt: skip
        entry.update(verdict="refused", why=why)
        return entry
    p = cfg.policy
    n_sample = int(p.collect.get("n_sample") or 1)
    starts = int(p.learn.get("learning_starts") or 0)
    budget = max(2 * n_sample, starts + n_sample)
    if p.collect.get("n_episode"):  # whole-episode policies learn once n_episode episodes are complete
        budget *= 8
    entry.update(verdict="accepted", budget=budget, env=cfg.env.id)
    return entry


def train(
    path: Path, budget: int, timeout: float, workdir: Path, eval_episodes: int = 1, env: dict[str, str] | None = None
) -> dict:
    """``ding-dist train path --max-env-steps budget`` in a subprocess: env steps, train iters, wall time or error.

    ``eval_episodes`` > 0: the evaluations play that many episodes on as many envs (``--set
    env.n_evaluator_episode=K env.evaluator_env_num=K``; a run ends with one, and 8 Atari games take minutes on
    2 cores); 0: as the file says. ``env``: the run's environment variables (default: this process's)."""
    exp = Path(tempfile.mkdtemp(prefix=f"{path.stem}_", dir=workdir)) / "run"  # files of one stem may run at once
    cmd = [sys.executable, "-m", "ding_dist.entry.cli", "train", str(path), "--seed", "0", "--max-env-steps",
           str(budget), "--exp-dir", str(exp)]  # fmt: skip
    if eval_episodes > 0:
        cmd += ["--set", f"env.n_evaluator_episode={eval_episodes}", f"env.evaluator_env_num={eval_episodes}"]
        if "evaluator_batch_size" in path.read_text():  # DI-engine's env_pool files: EnvPool's batch, as many
            cmd.append(f"env.evaluator_batch_size={eval_episodes}")
    start = time.perf_counter()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=workdir, env=env)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"not done within {timeout:.0f} s", "wall_s": round(timeout)}
    wall = time.perf_counter() - start
    result = exp / "result.json"
    if done.returncode != 0 or not result.is_file():
        lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
        errors = [ln for ln in lines if re.search(r"Error|error:", ln)]
        return {"ok": False, "error": (errors or lines or [f"exit code {done.returncode}"])[-1][:300],
                "wall_s": round(wall)}  # fmt: skip
    r = json.loads(result.read_text())
    ok = int(r["train_iters"]) > 0
    return {"ok": ok, "env_steps": r["env_steps"], "train_iters": r["train_iters"], "wall_s": round(wall),
            **({} if ok else {"error": "no train iteration within the budget"})}  # fmt: skip


def sweep(args: argparse.Namespace) -> dict:
    """``config show`` on every file (in this process, one at a time), then the training runs, ``args.jobs`` at a
    time; the JSON is rewritten (temp file, then rename) after each run, so a stopped sweep loses no result."""
    dizoo = dizoo_dir(args.dizoo)
    old = json.loads(JSON.read_text()) if JSON.is_file() else {"files": {}}
    files = dict(old.get("files", {}))
    todo: list[tuple[str, Path, dict]] = []
    for suite, path in config_files(dizoo):
        if args.only and not any(fnmatch.fnmatch(path.name, pat) for pat in args.only):
            continue
        key = str(path.relative_to(dizoo))
        entry = {"suite": suite, "family": left_out_family(key), **config_show(path)}
        previous = files.get(key, {})
        kept = args.missing and previous.get("run", {}).get("ok") and previous.get("verdict") == "accepted"
        if args.train and entry["verdict"] == "accepted" and entry["family"] is None and not kept:
            todo.append((key, path, entry))  # its entry (and last run) stays as it was until this run's lands
            continue
        if "run" in previous and previous.get("verdict") == entry["verdict"] == "accepted":
            entry["run"] = previous["run"]
        files[key] = entry
        print(f"{entry['verdict']:<9} {key}  {entry.get('why', '')}{entry.get('run', '')}", file=sys.stderr)
    lock = threading.Lock()
    # several runs at a time share the cores: one torch thread each (a lone run keeps the CLI's own choice)
    env = dict(os.environ, OMP_NUM_THREADS="1") if args.jobs > 1 else None

    def one(task: tuple[str, Path, dict], workdir: Path) -> None:
        key, path, entry = task
        entry["run"] = train(path, entry["budget"], args.budget_s, workdir, args.eval_episodes, env)
        with lock:
            files[key] = entry
            atomic_write_text(JSON, _dump(dict(old, files=dict(sorted(files.items())))))
            print(f"trained {key} ({entry['budget']} env steps): {entry['run']}", file=sys.stderr, flush=True)

    with tempfile.TemporaryDirectory(prefix="ding_coverage_") as tmp, \
            concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:  # fmt: skip
        print(f"training {len(todo)} files, {args.jobs} at a time", file=sys.stderr, flush=True)
        for future in [pool.submit(one, task, Path(tmp)) for task in todo]:
            future.result()
    return {"di_engine": VERSION, "date": time.strftime("%Y-%m-%d"), "files": dict(sorted(files.items()))}


def _dump(data: dict) -> str:
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


# ------------------------------------------------------------------------------------------------ tables
def _run_cell(entry: dict) -> str:
    run = entry.get("run")
    if run is None:
        return "-"
    if not run["ok"]:
        return f"fails: {run['error']}"
    return f"{run['env_steps']:,} env steps, {run['train_iters']:,} train iters, {run['wall_s']} s"


def tables(data: dict) -> dict[str, str]:
    """The markdown tables (``summary``, ``files``) of the sweep results ``data``."""
    files = data["files"]
    counted = {k: e for k, e in files.items() if e["family"] is None}
    rows = ["| suite | policy type | files | accepted | trained (short run) | refused: the key and why |",
            "|---|---|---|---|---|---|"]  # fmt: skip
    groups: dict[tuple[str, str], list[dict]] = {}
    for e in counted.values():
        groups.setdefault((e["suite"], str(e["policy"])), []).append(e)
    for (suite, policy), entries in sorted(groups.items()):
        accepted = [e for e in entries if e["verdict"] == "accepted"]
        ran = [e for e in accepted if e.get("run", {}).get("ok")]
        why = sorted({re.sub(r"('[\w.]+') = \S+", r"\1", e["why"]) for e in entries if e["verdict"] == "refused"})
        tried = sum("run" in e for e in accepted)
        rows.append(f"| {suite} | `{policy}` | {len(entries)} | {len(accepted)} | "
                    f"{f'{len(ran)} of {tried}' if tried else '-'} | {'; '.join(why) or ''} |")  # fmt: skip
    left: dict[str, list[str]] = {}
    for k, e in files.items():
        if e["family"] is not None:
            left.setdefault(e["family"], []).append(Path(k).name.removesuffix("_config.py").removesuffix(".py"))
    for family, names in sorted(left.items()):
        rows.append(f"| left out | {family} | {len(names)} | not counted | - | {', '.join(sorted(names))} |")
    n_acc = sum(e["verdict"] == "accepted" for e in counted.values())
    n_ran = sum(e.get("run", {}).get("ok", False) for e in counted.values())
    n_tried = sum("run" in e for e in counted.values())
    by_suite = ", ".join(
        f"{suite} {sum(e['verdict'] == 'accepted' for e in counted.values() if e['suite'] == suite)} of "
        f"{sum(e['suite'] == suite for e in counted.values())}"
        for suite in SUITES
    )
    summary = "\n".join(rows) + (f"\n\nCounted: **{len(counted)}** online-RL files; accepted by `config show`: "
                                 f"**{n_acc}** ({by_suite}); trained for a short run: **{n_ran} of {n_tried}** tried "
                                 f"(DI-engine {data['di_engine']}, {data['date']}).")  # fmt: skip
    per_file = ["| DI-engine file | policy type | `config show` | short run, or why refused |", "|---|---|---|---|"]
    for k, e in counted.items():
        note = e.get("why", "") if e["verdict"] == "refused" else _run_cell(e)
        per_file.append(f"| `{k}` | `{e['policy']}` | {e['verdict']} | {note} |")
    return {"summary": summary, "files": "\n".join(per_file)}


def render(text: str, data: dict) -> str:
    """``text`` with each ``<!-- ding-coverage:NAME -->`` ... ``<!-- /ding-coverage -->`` block regenerated."""
    for name, table in tables(data).items():
        start, end = f"<!-- ding-coverage:{name} -->", "<!-- /ding-coverage -->"
        i = text.find(start)
        if i < 0:
            continue
        j = text.index(end, i)
        text = text[:i] + f"{start}\n{table}\n{end}" + text[j + len(end) :]
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dizoo", help="DI-engine's dizoo folder (default: $DING_DIZOO or DI-engine's wheel)")
    ap.add_argument("--train", action="store_true", help="also train each accepted file for a short budget")
    ap.add_argument("--budget-s", type=float, default=600.0, help="time limit of one training run (default 600)")
    ap.add_argument("--eval-episodes", type=int, default=1,
                    help="episodes (and envs) of the runs' evaluations; 0: the file's (default 1)")  # fmt: skip
    ap.add_argument("--jobs", type=int, default=1, help="training runs at a time (each one torch thread when > 1)")
    ap.add_argument(
        "--missing",
        action="store_true",
        help="with --train: train only the files without a successful run in the JSON (resume a sweep)",
    )
    ap.add_argument("--only", nargs="+", help="file-name patterns (the other files keep their last results)")
    ap.add_argument("--render", action="store_true", help="only re-render the docs tables from the JSON")
    args = ap.parse_args(argv)
    if args.jobs < 1:
        ap.error(f"--jobs must be >= 1, got {args.jobs}")
    if args.render:
        data = json.loads(JSON.read_text())
    else:
        data = sweep(args)
        atomic_write_text(JSON, _dump(data))
    atomic_write_text(DOCS, render(DOCS.read_text(), data))
    counted = [e for e in data["files"].values() if e["family"] is None]
    print(f"{sum(e['verdict'] == 'accepted' for e in counted)} of {len(counted)} counted files accepted; "
          f"tables in {DOCS}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
