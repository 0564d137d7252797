"""Atari Pong PPO throughput side by side with Stable-Baselines3, and replay memory per Atari transition.

One run measures, on the same number of env steps and 8 envs in total:

- SB3's PPO (from a separate virtual environment): ``make_atari_env`` + ``VecFrameStack(4)``, ``CnnPolicy``,
  rl-zoo's Atari PPO hyperparameters (n_envs 8, n_steps 128, batch 256, 4 epochs, lr 2.5e-4, clip 0.1,
  ent 0.01, vf 0.5), SB3's default ``DummyVecEnv`` (or ``--sb3-vec subproc``);
- ours: ``ding-dist train configs/pong_ppo_config.py`` (8 envs x 128 steps, batch 256, 4 epochs, async envs)
  on 1 process, and with ``--nproc 2`` (4 envs per rank: 8 in total, the same global sizes).

For each it prints the whole-process wall time (start to exit: imports, env start-up and, for ours, the
one final evaluation episode) and the training-loop env steps/s (env steps between the end of the first
and of the last iteration, over the time between them: start-up and the final evaluation excluded), then
the ratios ours1/sb3 and ours2/ours1. It also fills a :class:`~ding_dist.data.FrameReplayBuffer` with real
Pong transitions and prints its bytes per stored transition against 1.1x one 84x84 frame (7,762 bytes).

Setup and run (SB3 in its own venv, torch first so pip does not pull a CUDA build)::

    bash benchmarks/bench_vs_sb3.sh --steps 20480    # creates .venvs/sb3 once, then runs this script
    python benchmarks/bench_vs_sb3.py --sb3-venv .venvs/sb3 --steps 20480 --json out.json

When SB3 is not installed there, its row is skipped (exit code 2 at the end).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "pong_ppo_config.py"
FRAME_BYTES = 84 * 84

# The SB3 side, run by the SB3 venv's python. It prints one JSON line: env steps, loop seconds, loop steps.
SB3_SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    import ale_py, gymnasium as gym
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecFrameStack

    gym.register_envs(ale_py)


    class Marks(BaseCallback):  # (env steps, time) at the end of each iteration (collect + update)
        def __init__(self):
            super().__init__()
            self.marks = []

        def _on_rollout_start(self):
            if self.num_timesteps:
                self.marks.append((self.num_timesteps, time.perf_counter()))

        def _on_step(self):
            return True


    def main():
        steps, vec = int(sys.argv[1]), sys.argv[2]
        venv = make_atari_env(
            "ALE/Pong-v5", n_envs=8, seed=0, vec_env_cls=SubprocVecEnv if vec == "subproc" else DummyVecEnv,
            env_kwargs={"frameskip": 1, "repeat_action_probability": 0.0},
        )
        venv = VecFrameStack(venv, n_stack=4)

        model = PPO(
            "CnnPolicy", venv, n_steps=128, n_epochs=4, batch_size=256, learning_rate=2.5e-4, clip_range=0.1,
            ent_coef=0.01, vf_coef=0.5, device="cpu", seed=0, verbose=0,
        )
        marks = Marks()
        model.learn(total_timesteps=steps, callback=marks)
        marks.marks.append((model.num_timesteps, time.perf_counter()))
        (s0, t0), (s1, t1) = marks.marks[0], marks.marks[-1]
        print(json.dumps({"env_steps": model.num_timesteps, "loop_steps": s1 - s0, "loop_s": t1 - t0}))


    if __name__ == "__main__":  # SubprocVecEnv starts its workers by re-importing this file
        main()
    """
)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR")}
    env.pop("DING_DIST_DING_REPORTED", None)
    return env


def run_sb3(venv: Path, steps: int, vec: str) -> dict[str, float] | None:
    """SB3's PPO on Pong in ``venv``: whole-process seconds and training-loop steps/s (None: SB3 missing)."""
    python = venv / "bin" / "python"
    check = subprocess.run([str(python), "-c", "import stable_baselines3, ale_py"], capture_output=True)
    if check.returncode != 0:
        print(f"stable-baselines3 is not installed in {venv}: run benchmarks/bench_vs_sb3.sh", file=sys.stderr)
        return None
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(SB3_SCRIPT)
    start = time.perf_counter()
    out = subprocess.run([str(python), f.name, str(steps), vec], capture_output=True, text=True, env=_env())
    wall = time.perf_counter() - start
    os.unlink(f.name)
    if out.returncode != 0:
        raise RuntimeError(f"SB3 run failed:\n{out.stderr[-3000:]}")
    r = json.loads(out.stdout.strip().splitlines()[-1])
    return {"wall_s": wall, "env_steps": r["env_steps"], "loop_steps_per_s": r["loop_steps"] / r["loop_s"]}


def _loop_rate(metrics: Path) -> float:
    """Env steps/s between the first and the last training record of a run's ``metrics.jsonl``."""
    rows = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    rows = [r for r in rows if "time/env_steps" in r]
    (s0, t0), (s1, t1) = [(r["time/env_steps"], r["wall_time"]) for r in (rows[0], rows[-1])]
    return (s1 - s0) / (t1 - t0)


def run_ours(steps: int, nproc: int, exp_dir: Path, extra: list[str]) -> dict[str, float]:
    """``ding-dist train configs/pong_ppo_config.py`` on ``nproc`` processes with 8 envs in total."""
    overrides = [
        f"env.collector_env_num={8 // nproc}",
        "env.evaluator_env_num=1",
        "env.n_evaluator_episode=1",
        "policy.other.log_freq=1024",  # one metrics record per iteration (8 envs x 128 steps)
        "policy.eval.eval_freq=0",  # one evaluation episode, at the end
        *extra,
    ]
    cmd = [sys.executable, "-m", "ding_dist.entry.cli", "train", str(CONFIG), "--max-env-steps", str(steps)]
    cmd += ["--nproc", str(nproc), "--exp-dir", str(exp_dir), "--set", *overrides]
    start = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, env=_env(), cwd=ROOT)
    wall = time.perf_counter() - start
    if out.returncode != 0:
        raise RuntimeError(f"ours ({nproc} process(es)) failed:\n{out.stderr[-3000:]}")
    result = json.loads((exp_dir / "result.json").read_text())
    return {
        "wall_s": wall,
        "env_steps": result["env_steps"],
        "loop_steps_per_s": _loop_rate(exp_dir / "tb" / "metrics.jsonl"),
    }


def replay_bytes_per_transition(rows: int = 600, num_envs: int = 4) -> dict[str, float]:
    """Fill a frame-deduplicated replay with real Pong training transitions; bytes per stored transition."""
    from ding_dist.data import replay_buffer_for
    from ding_dist.envs import env_seeds, make_vec_env

    venv = make_vec_env(
        {"id": "ALE/Pong-v5", "env_kwargs": {"repeat_action_probability": 0.0}}, num_envs, training=True
    )
    buf = replay_buffer_for(venv.single_observation_space, rows * num_envs, num_envs=num_envs, seed=0)
    obs, _ = venv.reset(seed=env_seeds(0, 0, "collector", num_envs))
    rng = np.random.default_rng(0)
    for _ in range(rows + 100):  # wraps around: the ring's steady state
        action = rng.integers(0, venv.single_action_space.n, num_envs)
        nxt, reward, term, trunc, info = venv.step(action)
        real_next = nxt.copy()
        if "_final_obs" in info:
            for i in np.flatnonzero(info["_final_obs"]):
                real_next[i] = info["final_obs"][i]
        buf.add(obs, action, reward, real_next, term, trunc)
        obs = nxt
    venv.close()
    per = buf.nbytes() / len(buf)
    # At 1M the fixed part (K extra frame rows per slot) vanishes: one frame, the scalars, the episode starts.
    steady = FRAME_BYTES + sum(v.nbytes for v in buf._data.values()) / buf.capacity
    steady += sum(v.nbytes for v in buf._starts.values()) / len(buf)
    return {"type": type(buf).__name__, "bytes": per, "x_frame": per / FRAME_BYTES, "gb_per_1m": steady * 1e6 / 1e9}


def vec_env_rates(managers: list[str], num_envs: int = 8, steps: int = 300, repeats: int = 3) -> dict[str, float]:
    """Median over ``repeats`` of Pong env steps/s with random actions, per env manager (start-up excluded)."""
    from ding_dist.envs import env_seeds, make_vec_env

    rates: dict[str, float] = {}
    cfg = {"id": "ALE/Pong-v5", "env_kwargs": {"repeat_action_probability": 0.0}}
    for manager in managers:
        runs = []
        for r in range(repeats):
            venv = make_vec_env(cfg, num_envs, manager, training=True)
            venv.reset(seed=env_seeds(r, 0, "collector", num_envs))
            rng = np.random.default_rng(r)
            actions = rng.integers(0, venv.single_action_space.n, (steps + 20, num_envs))
            for a in actions[:20]:  # warm-up
                venv.step(a)
            start = time.perf_counter()
            for a in actions[20:]:
                venv.step(a)
            runs.append(steps * num_envs / (time.perf_counter() - start))
            venv.close()
        rates[manager] = float(np.median(runs))
        print(f"vector env {manager:8s} {num_envs} Pong envs: {rates[manager]:7.0f} env steps/s (median of {repeats})")
    return rates


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sb3-venv", type=Path, default=Path(".venvs/sb3"))  # a venv holding SB3
    parser.add_argument("--steps", type=int, default=20480, help="env steps per run (multiple of 1024)")
    parser.add_argument("--sb3-vec", choices=("dummy", "subproc"), default="dummy")
    parser.add_argument("--skip", default="", help="comma-separated runs to skip: vec,replay,sb3,ours1,ours2")
    parser.add_argument("--set", nargs="*", default=[], help="extra config overrides for our runs")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    skip = set(filter(None, args.skip.split(",")))
    with open("/proc/loadavg") as f:
        figures: dict = {
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "load_before": f.read().split()[:3],
        }
    if "vec" not in skip:
        managers = ["sync", "async"] + (["envpool"] if importlib.util.find_spec("envpool") else [])
        figures["vec_env"] = vec_env_rates(managers)
    if "replay" not in skip:
        figures["replay"] = r = replay_bytes_per_transition()
        print(f"replay ({r['type']}): {r['bytes']:.0f} bytes per transition = {r['x_frame']:.3f}x one 84x84 frame "
              f"(target <= 1.1x); 1M transitions: {r['gb_per_1m']:.2f} GB", flush=True)  # fmt: skip
    if "sb3" not in skip:
        figures["sb3"] = run_sb3(args.sb3_venv, args.steps, args.sb3_vec)
    with tempfile.TemporaryDirectory() as tmp:
        for n in (1, 2):
            if f"ours{n}" not in skip:
                figures[f"ours{n}"] = run_ours(args.steps, n, Path(tmp) / f"ours{n}", args.set)
    for name in ("sb3", "ours1", "ours2"):
        f = figures.get(name)
        if f:
            whole = f"whole process {f['wall_s']:7.1f} s ({f['env_steps'] / f['wall_s']:6.1f} steps/s)"
            print(
                f"{name:6s} {f['env_steps']:7d} env steps  {whole}  training loop {f['loop_steps_per_s']:6.1f} steps/s"
            )
    ratios = {}
    for top, bottom in (("ours1", "sb3"), ("ours2", "ours1")):
        a, b = figures.get(top), figures.get(bottom)
        if a and b:
            ratios[f"{top}/{bottom}"] = {
                "whole_process": (a["env_steps"] / a["wall_s"]) / (b["env_steps"] / b["wall_s"]),
                "training_loop": a["loop_steps_per_s"] / b["loop_steps_per_s"],
            }
            r = ratios[f"{top}/{bottom}"]
            print(f"{top}/{bottom}: whole process {r['whole_process']:.2f}x, training loop {r['training_loop']:.2f}x")
    with open("/proc/loadavg") as f:
        figures["load_after"] = f.read().split()[:3]
    figures["ratios"] = ratios
    print(f"load average before {figures['load_before']}, after {figures['load_after']}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 2 if "sb3" not in skip and figures.get("sb3") is None else 0


if __name__ == "__main__":
    sys.exit(main())
