"""DI-engine 0.5.3's Atari and MuJoCo files, unchanged, under DI-engine and under ding_dist for the same env steps.

For each file (default ``pong_dqn_config.py`` and ``hopper_sac_config.py``, taken at run time from the ``dizoo``
package of DI-engine's venv) and seed this runs, alternately:

* DI-engine: ``serial_pipeline((main_config, create_config), seed, max_env_step=N)`` in DI-engine's venv (this
  script re-run there with ``--ding-worker``), timed around that call; then the returned policy is evaluated once
  with DI-engine's own ``InteractionSerialEvaluator`` on the file's evaluator envs (``n_evaluator_episode``
  episodes; not timed).
* ding_dist: ``ding-dist train FILE --seed S --max-env-steps N`` in this venv; time and return from its
  ``result.json`` (``wall_time_s``, ``last_eval_return``: the run ends with one evaluation of the file's
  ``n_evaluator_episode`` episodes).

Each side's timed span holds one evaluation of the file's episodes (DI-engine's at train iteration 0, ours at the
end), so env steps per second = N / that time compare like with like. It prints both rows and the ratios ours /
DI-engine (env steps/s; return difference), with medians over seeds; ``--json`` keeps the rows.

DI-engine 0.5.3 runs on gym 0.25.1, whose ``Hopper-v3`` needs mujoco-py (MuJoCo 2.1 binaries, not installable
here): the worker registers ``Hopper-v3`` to gym 0.25.1's own ``hopper_v4`` class (the same model and reward on the
``mujoco`` bindings; needs ``mujoco==2.3.3``, the last that reads gym 0.25's XML). ding_dist maps Hopper-v3 to
gymnasium's Hopper-v5. Pong needs ``ale-py==0.8.1`` (gym 0.25's ALE) and the Pong ROM imported with
``ale-import-roms``. benchmarks/ding_side_by_side.sh builds that venv.

Usage::

    bash benchmarks/ding_side_by_side.sh --env-steps 20000 --seeds 0
    python benchmarks/ding_side_by_side.py --ding-venv /work/ding-venv --env-steps 20000 --files hopper_sac
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FILES = {
    "pong_dqn": "atari/config/serial/pong/pong_dqn_config.py",
    "hopper_sac": "mujoco/config/hopper_sac_config.py",
}


def _patch_gym_hopper() -> None:
    """gym 0.25.1's Hopper-v3 is mujoco-py's; register the id to gym's own mujoco-bindings class (hopper_v4)."""
    import gym

    gym.envs.registration.registry.pop("Hopper-v3", None)
    gym.register(id="Hopper-v3", entry_point="gym.envs.mujoco.hopper_v4:HopperEnv", max_episode_steps=1000,
                 reward_threshold=3800.0)  # fmt: skip


def ding_worker(path: str, seed: int, env_steps: int, workdir: str) -> dict:
    """DI-engine's serial pipeline on ``path`` for ``env_steps`` (run inside DI-engine's venv), then one eval."""
    import copy
    import importlib.util
    from functools import partial

    import numpy as np

    _patch_gym_hopper()
    from ding.config import compile_config
    from ding.entry import serial_pipeline
    from ding.envs import BaseEnvManager, get_vec_env_setting
    from ding.worker import InteractionSerialEvaluator

    os.chdir(workdir)
    spec = importlib.util.spec_from_file_location("ding_file", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    main, create = mod.main_config, mod.create_config
    start = time.perf_counter()
    policy = serial_pipeline((copy.deepcopy(main), copy.deepcopy(create)), seed=seed, max_env_step=env_steps)
    seconds = time.perf_counter() - start
    cfg = compile_config(copy.deepcopy(main), seed=seed, auto=True, create_cfg=copy.deepcopy(create),
                         save_cfg=False)  # fmt: skip
    env_fn, _, eval_cfgs = get_vec_env_setting(cfg.env)
    envs = BaseEnvManager([partial(env_fn, cfg=c) for c in eval_cfgs], cfg=BaseEnvManager.default_config())
    envs.seed(seed + 1000, dynamic_seed=False)
    evaluator = InteractionSerialEvaluator(cfg.policy.eval.evaluator, envs, policy.eval_mode, exp_name="final_eval")
    _, info = evaluator.eval(None, 0, 0)
    returns = [float(np.asarray(r).sum()) for r in info["eval_episode_return"]]
    return {"seconds": seconds, "env_steps": env_steps, "return": float(np.mean(returns)), "episodes": len(returns)}


def _run(cmd: list[str], timeout: float, cwd: str | None = None) -> subprocess.CompletedProcess | None:
    """``cmd`` in its own process group; None when past ``timeout`` (the whole group, env workers too, killed)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd,
                            start_new_session=True)  # fmt: skip
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return None
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def run_ding(venv: Path, path: Path, seed: int, env_steps: int, timeout: float) -> dict:
    with tempfile.TemporaryDirectory(prefix="ding_side_") as tmp:
        cmd = [str(venv / "bin" / "python"), "-W", "ignore", __file__, "--ding-worker", str(path), "--seeds",
               str(seed), "--env-steps", str(env_steps), "--workdir", tmp]  # fmt: skip
        done = _run(cmd, timeout)
        if done is None:
            return {"error": f"not done within {timeout:.0f} s"}
        lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
        if done.returncode != 0 or not lines:
            err = [ln for ln in done.stderr.splitlines() if ln.strip()]
            return {"error": (err or [f"exit code {done.returncode}"])[-1][:300]}
        return json.loads(lines[-1])


def run_ours(path: Path, seed: int, env_steps: int, timeout: float) -> dict:
    with tempfile.TemporaryDirectory(prefix="ours_side_") as tmp:
        exp = Path(tmp) / "run"
        cmd = [sys.executable, "-m", "ding_dist.entry.cli", "train", str(path), "--seed", str(seed),
               "--max-env-steps", str(env_steps), "--exp-dir", str(exp)]  # fmt: skip
        done = _run(cmd, timeout, cwd=tmp)
        if done is None:
            return {"error": f"not done within {timeout:.0f} s"}
        if done.returncode != 0:
            err = [ln for ln in done.stderr.splitlines() if ln.strip()]
            return {"error": (err or [f"exit code {done.returncode}"])[-1][:300]}
        r = json.loads((exp / "result.json").read_text())
        return {"seconds": r["wall_time_s"], "env_steps": r["env_steps"], "return": r["last_eval_return"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ding-venv", default=os.environ.get("DING_VENV", "/work/ding-venv"))
    ap.add_argument("--files", default=",".join(FILES), help=f"comma-separated, of {sorted(FILES)}")
    ap.add_argument("--env-steps", type=int, default=20000)
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per run")
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--ding-worker", help=argparse.SUPPRESS)
    ap.add_argument("--workdir", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    if args.ding_worker:
        print(json.dumps(ding_worker(args.ding_worker, seeds[0], args.env_steps, args.workdir)))
        return 0
    venv = Path(args.ding_venv)
    dizoo = subprocess.run([str(venv / "bin" / "python"), "-c", "import dizoo, os; print(os.path.dirname("
                            "dizoo.__file__))"], capture_output=True, text=True)  # fmt: skip
    if dizoo.returncode != 0:
        print(
            f"ding_side_by_side: DI-engine is not importable in {venv}: {dizoo.stderr.strip()[-200:]}", file=sys.stderr
        )
        return 2
    rows = []
    for seed in seeds:
        for name in args.files.split(","):
            if name not in FILES:
                print(f"ding_side_by_side: unknown file {name!r}, expected one of {sorted(FILES)}", file=sys.stderr)
                return 2
            path = Path(dizoo.stdout.strip()) / FILES[name]
            theirs = run_ding(venv, path, seed, args.env_steps, args.timeout)
            ours = run_ours(path, seed, args.env_steps, args.timeout)
            rows.append({"file": name, "seed": seed, "env_steps": args.env_steps, "ding": theirs, "ours": ours})
            print(json.dumps(rows[-1]), flush=True)
            if args.json:
                Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    print("\n| file | env steps | DI-engine steps/s | ours steps/s | ratio ours/DI-engine | DI-engine return | "
          "ours return |\n|---|---|---|---|---|---|---|")  # fmt: skip
    for name in args.files.split(","):
        mine = [r for r in rows if r["file"] == name and "error" not in r["ding"] and "error" not in r["ours"]]
        if not mine:
            errs = [r["ding"].get("error") or r["ours"].get("error") for r in rows if r["file"] == name]
            print(f"| {name} | {args.env_steps} | failed: {errs[0]} |")
            continue
        d_rate = statistics.median(r["env_steps"] / r["ding"]["seconds"] for r in mine)
        o_rate = statistics.median(r["ours"]["env_steps"] / r["ours"]["seconds"] for r in mine)
        d_ret = statistics.median(r["ding"]["return"] for r in mine)
        o_ret = statistics.median(r["ours"]["return"] for r in mine)
        print(f"| {name} | {args.env_steps} | {d_rate:.0f} | {o_rate:.0f} | {o_rate / d_rate:.2f}x | {d_ret:.1f} | "
              f"{o_ret:.1f} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
