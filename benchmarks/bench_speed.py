"""Speed side by side: ours on one process, ours on every core, Stable-Baselines3, and the limit, at equal env steps.

Each row is a learning-parity row of ``bench_parity.py`` (same env, hyperparameters and evaluation protocol on both
sides) cut to a short fixed budget with one evaluation at the end, or a shipped config where SB3 has no twin:

- ``spaceinvaders_ppo``: MinAtar SpaceInvaders PPO, 64 envs x 128 steps, env-bound; every core: ``--nproc 2``.
- ``breakout_dqn``: MinAtar Breakout DQN, 1 env, one update per env step, update-bound; every core: ``--actors 1
  --learners 1`` (one process steps the env while the other learns).
- ``hopper_sac``: Hopper-v5 SAC, 256-256 networks, one update per env step; every core as DQN.
- ``pong_ppo``: the shipped Pong PPO config (no SB3 twin: its column is left empty); every core: ``--nproc 2``.

Per row and variant: the whole process's wall time as a user waits (start-up included), median over ``--reps``
interleaved repetitions, run one at a time (the machine otherwise idle), each library with its own default threads.
The **limit** is what the machine allows: the env stepped alone with random actions (gymnasium's own vector env of
the same number of envs; Pong: ours, as it preprocesses frames) plus the updates alone (ours, on batches of the same
sizes, as many as the run makes), each timed in a process of its own. Printed: the ratios ours / SB3 and ours /
limit, and where the time of our runs went (``result.json``'s ``phases_s``: start-up, collect, learn, log, eval,
checkpoint; the 2-process variant's rank 0) and, where the thread governor ran, the seconds at each thread count.

Run:  python benchmarks/bench_speed.py [--rows spaceinvaders_ppo,hopper_sac] [--reps 3] [--json out.json]
      (SB3 from the ``bench`` extra: pip install -e '.[bench]')
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_parity as parity  # noqa: E402

#: row -> (parity row or None, budget in env steps, the every-core flags)
ROWS = {
    "spaceinvaders_ppo": ("spaceinvaders_ppo", 163_840, ["--nproc", "2"]),
    "breakout_dqn": ("breakout_dqn", 30_000, ["--actors", "1", "--learners", "1"]),
    "hopper_sac": ("hopper_sac", 20_000, ["--actors", "1", "--learners", "1"]),
    "pong_ppo": (None, 16_384, ["--nproc", "2"]),
}


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR",
                                                             "OMP_NUM_THREADS")}  # fmt: skip
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def _timed(cmd: list[str], log: Path) -> float:
    start = time.perf_counter()
    with open(log, "w") as f:
        code = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=_env()).returncode
    wall = time.perf_counter() - start
    if code != 0:
        raise RuntimeError(f"{' '.join(cmd[:6])} ... exited {code}; see {log}")
    return wall


def _config(name: str, folder: Path) -> tuple[Path, object | None]:
    """The ding-dist config of a row (written from its parity row), and the shortened parity row (None: shipped)."""
    parity_name, budget, _ = ROWS[name]
    if parity_name is None:
        return ROOT / "configs" / f"{name}_config.py", None
    row = replace(parity.all_rows()[parity_name], budget=budget, evals=1)
    path = folder / f"{name}.config.py"
    path.write_text(parity.ours_config_text(row, row.ours, row.eval_episodes))
    return path, row


def run_ours(name: str, config: Path, folder: Path, extra: list[str], tag: str) -> dict:
    exp = folder / f"{name}_{tag}_{time.monotonic_ns()}"
    budget = ROWS[name][1]
    cmd = [sys.executable, "-m", "ding_dist.entry.cli", "train", str(config), "--seed", "0", "--exp-dir", str(exp),
           "--max-env-steps", str(budget), "--set", "env.stop_value=None", *extra]  # fmt: skip
    wall = _timed(cmd, folder / f"{exp.name}.log")
    result = json.loads((exp / "result.json").read_text())
    return {"wall_s": wall, "env_steps": result["env_steps"], "phases_s": result.get("phases_s", {}),
            "threads_s": result.get("threads_s")}  # fmt: skip


def run_sb3(row: object, folder: Path) -> dict:
    ref = row.ref
    spec = {k: v for k, v in ref.items() if k not in ("lib", "eps_decay_steps")}
    spec["kwargs"] = dict(ref.get("kwargs", {}))
    if "eps_decay_steps" in ref:
        spec["kwargs"]["exploration_fraction"] = min(1.0, ref["eps_decay_steps"] / row.budget)
    spec.update(env=row.env, algo=row.algo, budget=row.budget, eval_every=row.eval_every, seed=0,
                eval_episodes=row.eval_episodes, max_episode_steps=row.max_episode_steps, t0=time.time())  # fmt: skip
    spec_path, out = folder / f"{row.name}.sb3.json", folder / f"{row.name}.sb3out.json"
    spec_path.write_text(json.dumps(spec))
    wall = _timed([sys.executable, str(parity.SB3_RUNNER), str(spec_path), str(out)], folder / f"{row.name}.sb3.log")
    return {"wall_s": wall, "env_steps": json.loads(out.read_text())["env_steps"]}


def run_limit(name: str, config: Path, folder: Path) -> dict:
    out = folder / f"{name}.limit.json"
    _timed([sys.executable, __file__, "--limit-of", name, "--config", str(config), "--out", str(out),
            "--budget", str(ROWS[name][1])], folder / f"{name}.limit.log")  # fmt: skip
    return json.loads(out.read_text())


# --- the limit, in a process of its own ------------------------------------------------------------------------------
def _env_alone(cfg: object, name: str, budget: int) -> float:
    """Seconds to step the row's envs ``budget`` times in all with random actions, through gymnasium's own vector
    env (Pong: ours, which preprocesses its frames)."""
    import gymnasium as gym
    import numpy as np

    n = cfg.env.collector_env_num
    if name == "pong_ppo":
        from ding_dist.entry.factories import env_manager
        from ding_dist.envs import make_vec_env

        venv = make_vec_env(cfg.env, n, env_manager(cfg), training=True)
    else:
        if cfg.env.id.startswith("MinAtar/"):
            import minatar.gym

            if cfg.env.id not in gym.registry:
                minatar.gym.register_envs()
        venv = gym.make_vec(cfg.env.id, num_envs=n, vectorization_mode="sync")
    venv.reset(seed=0)
    rng = np.random.default_rng(0)
    space = venv.action_space
    start = time.perf_counter()
    for _ in range(max(1, budget // n)):
        if hasattr(space, "nvec"):
            action = rng.integers(0, space.nvec)
        else:
            action = rng.uniform(space.low, space.high).astype(space.dtype)
        venv.step(action)
    seconds = time.perf_counter() - start
    venv.close()
    return seconds


def _updates_alone(cfg: object, budget: int) -> tuple[float, int]:
    """Seconds of the updates a run of ``budget`` env steps makes, alone, on batches of its sizes (PPO: one real
    rollout learned once per collect; DQN and SAC: a replay buffer filled with ``learning_starts`` real steps, then
    ``update_per_collect`` updates per ``n_sample`` env steps after it)."""
    import math

    from ding_dist.entry.experiment import Experiment  # noqa: F401  (the factories' layer)
    from ding_dist.entry.factories import build_policy, env_manager, make_replay_buffer, replay_capacity
    from ding_dist.envs import make_vec_env
    from ding_dist.policy import get_policy_cls
    from ding_dist.worker import Collector, Learner

    n = cfg.env.collector_env_num
    venv = make_vec_env(cfg.env, n, env_manager(cfg), training=True)
    policy = build_policy(cfg, venv.single_observation_space, venv.single_action_space)
    collector, learner = Collector(venv, policy, list(range(n))), Learner(policy)
    p = cfg.policy
    n_vec = max(1, math.ceil(p.collect.n_sample / n))
    if get_policy_cls(cfg.create_config.policy.type).on_policy:
        rollout = collector.collect(n_vec, 0)
        iterations = max(1, budget // (n_vec * n))
        start = time.perf_counter()
        for _ in range(iterations):
            learner.train_rollout({k: v.copy() for k, v in rollout.items()})
        seconds, updates = time.perf_counter() - start, policy.train_iter
    else:
        space = venv.single_observation_space, venv.single_action_space
        buffer = make_replay_buffer(cfg, *space, n, replay_capacity(cfg, 1), 0)
        starts = p.learn.get("learning_starts", 0)
        while len(buffer) < max(starts, p.learn.batch_size):
            buffer.extend(collector.collect(n_vec, 0))
        total = max(0, budget - starts) * p.learn.update_per_collect // p.collect.n_sample
        start = time.perf_counter()
        chunk = p.learn.update_per_collect
        for done in range(0, total, chunk):
            learner.train_replay(buffer, min(chunk, total - done), p.learn.batch_size)
        seconds, updates = time.perf_counter() - start, policy.train_iter
    venv.close()
    return seconds, updates


def limit_main(name: str, config: str, out: str) -> None:
    from ding_dist.config import load_config

    cfg = load_config(config)
    budget = ROWS[name][1]
    env_s = _env_alone(cfg, name, budget)
    learn_s, updates = _updates_alone(cfg, budget)
    Path(out).write_text(json.dumps({"env_s": env_s, "learn_s": learn_s, "updates": updates,
                                     "wall_s": env_s + learn_s}))  # fmt: skip


# --- the table -------------------------------------------------------------------------------------------------------
def _ratio(a: float | None, b: float | None) -> str:
    return "-" if a is None or b is None else f"{a / b:.2f}"


def _split(phases: dict) -> str:
    if not phases:
        return "-"
    return ", ".join(f"{k} {v:.0f}" for k, v in phases.items() if isinstance(v, (int, float)) and v >= 0.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default=",".join(ROWS), help=f"comma-separated rows of {', '.join(ROWS)}")
    parser.add_argument("--reps", type=int, default=1, help="interleaved repetitions (the median is printed)")
    parser.add_argument("--no-sb3", action="store_true", help="leave SB3 out")
    parser.add_argument("--budget", type=int, default=None, help="env steps of every row (default: each row's own)")
    parser.add_argument("--json", default=None, help="also write the figures here")
    parser.add_argument("--limit-of", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--config", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.budget is not None:
        for key, (parity_name, _, flags) in list(ROWS.items()):
            ROWS[key] = (parity_name, args.budget, flags)
    if args.limit_of:
        limit_main(args.limit_of, args.config, args.out)
        return
    names = [n for n in args.rows.split(",") if n]
    unknown = [n for n in names if n not in ROWS]
    if unknown:
        parser.error(f"unknown row(s) {unknown}; choose from {', '.join(ROWS)}")
    figures: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for name in names:
            config, row = _config(name, folder)
            runs: dict[str, list[dict]] = {"ours_1": [], "ours_all": [], "sb3": [], "limit": []}
            for _ in range(args.reps):
                runs["ours_1"].append(run_ours(name, config, folder, [], "one"))
                runs["ours_all"].append(run_ours(name, config, folder, ROWS[name][2], "all"))
                if row is not None and not args.no_sb3:
                    runs["sb3"].append(run_sb3(row, folder))
                runs["limit"].append(run_limit(name, config, folder))
            med = {k: statistics.median(r["wall_s"] for r in v) if v else None for k, v in runs.items()}
            figures[name] = {"budget": ROWS[name][1], "median_wall_s": med, "runs": runs,
                             "every_core": " ".join(ROWS[name][2])}  # fmt: skip
            lim = runs["limit"][0]
            print(f"\n{name}: {ROWS[name][1]} env steps, every core = {' '.join(ROWS[name][2])}", flush=True)
            print(f"  ours 1 process / SB3      {_ratio(med['ours_1'], med['sb3'])}")
            print(f"  ours every core / SB3     {_ratio(med['ours_all'], med['sb3'])}")
            print(
                f"  ours 1 process / limit    {_ratio(med['ours_1'], med['limit'])}   (limit: env alone "
                f"{lim['env_s']:.0f} s + {lim['updates']} updates alone {lim['learn_s']:.0f} s)"
            )
            print(f"  ours every core / limit   {_ratio(med['ours_all'], med['limit'])}")
            print(f"  ours every core / 1 process env steps/s  {_ratio(med['ours_1'], med['ours_all'])}")
            print(f"  split, 1 process (s):     {_split(runs['ours_1'][0]['phases_s'])}")
            print(f"  split, every core (s):    {_split(runs['ours_all'][0]['phases_s'])}")
            for label, key in (("1 process", "ours_1"), ("every core", "ours_all")):
                threads = runs[key][0].get("threads_s")  # the thread governor's seconds per thread count
                if threads:
                    print(f"  torch threads, {label} (s): " + ", ".join(f"{n}: {t:.0f}" for n, t in threads.items()))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
