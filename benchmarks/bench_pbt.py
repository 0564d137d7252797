"""Population-based training against as many independent runs: the same start, the same env steps.

Per seed ``s``: one population of K members (``ding-dist train --nproc K --population K``, member ``i`` on seed
``s + i``) and K independent runs (run ``i`` on seed ``s + i`` with member ``i``'s initial hyperparameters: the same
draws, from ``pbt.seed = s``), each member and each run trained for ``--budget`` env steps: equal total env steps.
The task: MinAtar Breakout with gymnax-blines' tuned PPO (64 envs x 128 steps, 4 epochs, 8 minibatches), the
learning rate drawn log-uniformly over two decades (``--lr-range``, default 5e-5 .. 5e-3) and the entropy weight
over [0, 0.02]; the population exploits every ``--interval`` env steps (truncation selection, quantile 0.25).

The figure per seed is the final evaluation return (``--eval-episodes`` greedy episodes) of the best member of the
population against the best of the K independent runs, and the mean over the K; across seeds, the interquartile
mean with a stratified bootstrap 95% interval (rliable's, ``ding_dist.utils.stats``). Prints one table; writes
``<out>/bench_pbt.json`` with every run's numbers.

Run (needs ``pip install -e '.[minatar]'``; K processes at a time, each one member or one run):

    python benchmarks/bench_pbt.py --out runs/bench_pbt --seeds 0,1,2,3,4 --population 4 --budget 1000000
    python benchmarks/bench_pbt.py --smoke       # CartPole, a few thousand env steps: the script works, no figure
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ding_dist.config.pbt import parse_hyperparams  # noqa: E402
from ding_dist.utils.stats import iqm, stratified_bootstrap_ci  # noqa: E402
from ding_dist.worker.pbt import initial_values  # noqa: E402


def task_config(args: argparse.Namespace) -> tuple[dict, dict]:
    """The task's ``(main_config, create_config)`` without its ``pbt`` section."""
    if args.smoke:
        env = {"id": "CartPole-v1", "collector_env_num": 4, "evaluator_env_num": 2}
        learn = {"epoch_per_collect": 2, "batch_size": 64}
        collect = {"n_sample": 256}
    else:
        env = {"id": "MinAtar/Breakout-v1", "collector_env_num": 64, "evaluator_env_num": 8,
               "max_episode_steps": 10_000}  # fmt: skip
        learn = dict(epoch_per_collect=4, batch_size=1024, clip_ratio=0.2, value_clip_ratio=None, value_weight=0.5,
                     adv_norm=True, grad_clip_norm=0.5)  # fmt: skip
        collect = dict(n_sample=8192, discount_factor=0.999, gae_lambda=0.95)
    env.update(n_evaluator_episode=args.eval_episodes, stop_value=None)
    policy = {"learn": learn, "collect": collect, "eval": {"eval_freq": args.interval},
              "other": {"log_freq": args.interval}}  # fmt: skip
    create = {"env": {"type": "gymnasium"}, "env_manager": {"type": "sync"}, "policy": {"type": "ppo"}}
    return {"exp_name": "bench_pbt", "env": env, "policy": policy}, create


def hyperparams(args: argparse.Namespace) -> dict:
    low, high = (float(v) for v in args.lr_range.split(","))
    return {
        "learn.learning_rate": {"min": low, "max": high, "log": True},
        "learn.entropy_weight": {"min": 0.0, "max": 0.02},
    }


def write_config(path: Path, main: dict, create: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'"""bench_pbt.py."""\nfrom easydict import EasyDict\n\nmain_config = EasyDict({main!r})\n'
                    f"create_config = EasyDict({create!r})\n")  # fmt: skip
    return path


def train(argv: list[str], log: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    with open(log, "w") as f:
        done = subprocess.run([sys.executable, "-m", "ding_dist.entry.cli", "train", *argv], stdout=f, stderr=f,
                              env=env, cwd=ROOT)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"ding-dist train {' '.join(argv)} failed ({done.returncode}); see {log}")


def run_seed(args: argparse.Namespace, seed: int, out: Path) -> dict:
    """One seed: the population, then the K independent runs (K at a time)."""
    main, create = task_config(args)
    spec = hyperparams(args)
    k = args.population
    pbt = {"population": k, "interval": args.interval, "quantile": 0.25, "hyperparams": spec, "seed": seed}
    pop_dir = out / f"pbt_seed{seed}"
    config = write_config(out / "configs" / f"pbt_seed{seed}.py", {**main, "pbt": pbt}, create)
    t = time.time()
    train([str(config), "--nproc", str(k), "--seed", str(seed), "--max-env-steps", str(args.budget),
           "--exp-dir", str(pop_dir)], out / f"pbt_seed{seed}.log")  # fmt: skip
    pbt_s = time.time() - t
    result = json.loads((pop_dir / "result.json").read_text())
    pop_finals = [m["last_eval_return"] for m in result["members"]]
    draws = initial_values(parse_hyperparams(spec), k, seed, {})  # member i's start: run i's settings

    def independent(i: int) -> float:
        policy = json.loads(json.dumps(main["policy"]))
        for key, value in draws[i].items():
            section, name = key.split(".")
            policy[section][name] = value
        cfg = write_config(out / "configs" / f"ind_seed{seed}_run{i}.py", {**main, "policy": policy}, create)
        folder = out / f"independent_seed{seed}" / f"run{i}"
        train([str(cfg), "--seed", str(seed + i), "--max-env-steps", str(args.budget), "--exp-dir", str(folder)],
              out / f"ind_seed{seed}_run{i}.log")  # fmt: skip
        return json.loads((folder / "result.json").read_text())["last_eval_return"]

    t = time.time()
    with ThreadPoolExecutor(max_workers=k) as pool:
        ind_finals = list(pool.map(independent, range(k)))
    return {"seed": seed, "population_finals": pop_finals, "independent_finals": ind_finals, "draws": draws,
            "rounds": result["rounds"], "best_member": result["best_member"], "pbt_wall_s": pbt_s,
            "independent_wall_s": time.time() - t}  # fmt: skip


def summary(rows: list[dict]) -> list[str]:
    lines = [f"{'figure':<34}{'PBT':>32}{'independent':>32}"]
    for name, pick in (("best of K, final eval return", max), ("mean of K, final eval return", np.mean)):
        cells = []
        for which in ("population_finals", "independent_finals"):
            values = np.array([float(pick(r[which])) for r in rows])
            low, high = stratified_bootstrap_ci(values[:, None]) if len(values) > 1 else (values[0], values[0])
            cells.append(f"IQM {iqm(values):8.2f} [{low:.2f}, {high:.2f}]")
        lines.append(f"{name:<34}{cells[0]:>32}{cells[1]:>32}")
    return lines


def figure(rows: list[dict], path: Path) -> None:
    """Per seed, each member's and each independent run's final return; the IQM of the best of K as a line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for offset, (which, label, color) in enumerate(
        (("independent_finals", "independent runs", "tab:gray"), ("population_finals", "PBT members", "tab:blue"))
    ):
        for i, r in enumerate(rows):
            x = i + (offset - 0.5) * 0.3
            ax.scatter([x] * len(r[which]), r[which], s=14, color=color, label=label if i == 0 else None)
        best = iqm(np.array([max(r[which]) for r in rows]))
        ax.axhline(best, color=color, lw=1, ls="--", label=f"{label}: IQM of the best of K {best:.1f}")
    ax.set_xticks(range(len(rows)), [f"seed {r['seed']}" for r in rows])
    ax.set_ylabel("final evaluation return")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2)
    fig.tight_layout()
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=120)
    tmp.replace(path)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="runs/bench_pbt")
    parser.add_argument("--seeds", default="0,1,2,3,4")
    parser.add_argument("--population", type=int, default=4)
    parser.add_argument("--budget", type=int, default=1_000_000, help="env steps of each member and each run")
    parser.add_argument("--interval", type=int, default=49_152, help="env steps between exploit steps (6 x 8192)")
    parser.add_argument("--lr-range", default="5e-5,5e-3", help="LOW,HIGH of the learning rate (log-uniform)")
    parser.add_argument("--eval-episodes", type=int, default=32)
    parser.add_argument("--smoke", action="store_true", help="CartPole, 2 members, 2048 env steps, one seed")
    parser.add_argument("--figure", metavar="PNG", help="also draw the per-seed returns into PNG")
    parser.add_argument("--from-json", metavar="JSON", help="print the table (and --figure) of an earlier run")
    args = parser.parse_args()
    if args.from_json:
        rows = json.loads(Path(args.from_json).read_text())["rows"]
        print("\n".join(summary(rows)))
        if args.figure:
            figure(rows, Path(args.figure))
        return
    if args.smoke:
        args.seeds, args.population, args.budget, args.interval, args.eval_episodes = "0", 2, 2048, 512, 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for seed in (int(s) for s in args.seeds.split(",")):
        rows.append(run_seed(args, seed, out))
        print(f"seed {seed}: PBT {rows[-1]['population_finals']} | independent {rows[-1]['independent_finals']}",
              flush=True)  # fmt: skip
    (out / "bench_pbt.json").write_text(json.dumps({"args": vars(args), "rows": rows}, indent=1))
    for line in summary(rows):
        print(line)
    if args.figure:
        figure(rows, Path(args.figure))
    print(f"wrote {out / 'bench_pbt.json'}")


if __name__ == "__main__":
    main()
