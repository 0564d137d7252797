"""Learning parity: ding_dist and a reference trained side by side, same env, hyperparameters, env steps and seeds.

Each row is one env and algorithm with the reference's own tuned hyperparameters written out twice below, once as
a ding_dist config and once as the reference's arguments (Stable-Baselines3 2.x; for the masked-velocity CartPole
R2D2 row, ding_dist's own DQN), and its source cited. Every (row, library, seed) is one run: a ``ding-dist train``
process, or ``benchmarks/parity_sb3.py`` under the interpreter that holds SB3 (``--ref-python``), 1 torch thread
each. Both evaluate every ``eval_every`` env steps (and at the end): ``eval_episodes`` episodes with the greedy
action (the argmax, the Gaussian's mean) on envs seeded apart from training; rewards as the env gives them
(MinAtar's game score), episodes capped at ``max_episode_steps`` on both sides.

Results go to ``--out`` (one folder per row and library): ``seed<S>.json`` (the curve ``[env_steps, wall_s,
mean_return]``, wall seconds from the process start, and versions) and ``seed<S>.csv``; a finished run is skipped
when the command runs again, so a cut-short suite resumes where it stopped. ``summary.md``, ``summary.json`` and
figures (``<row>.png``, ``aggregate.png``) are rewritten from whatever runs have finished, after every run.

Per row the summary gives, over seeds: the final and the area-under-curve return (:func:`ding_dist.utils.stats.auc`,
the curve's mean return), each as an interquartile mean with a 95% stratified bootstrap interval
(:mod:`ding_dist.utils.stats`, rliable's definitions), whether ours is inside, above or below the reference's
interval, and the ratio ours / reference of the env steps and of the wall seconds each IQM curve needs to reach
the reference's final IQM. The aggregate normalizes each row's scores as ``(x - random) / (reference final IQM -
random)`` (``random``: the mean return of uniform random actions over ``eval_episodes`` episodes) and takes the IQM
over every run of every row with a stratified bootstrap interval.

Run (the reference libraries from the ``bench`` extra, or a venv made by ``bench_parity.sh``)::

    python benchmarks/bench_parity.py --out /work/bench_parity_runs                 # the default set, 3 seeds
    python benchmarks/bench_parity.py --out runs --rows breakout_ppo,hopper_sac --seeds 0,1,2,3,4 --budget 2000000
    python benchmarks/bench_parity.py --out runs --jobs 2                            # two runs at a time
    python benchmarks/bench_parity.py --out runs --list                              # the tasks, numbered
    python benchmarks/bench_parity.py --out runs --task-index $SLURM_ARRAY_TASK_ID   # one task (SLURM arrays)
    python benchmarks/bench_parity.py --out runs --summary-only                      # re-summarize what finished
"""

from __future__ import annotations

import argparse
import concurrent.futures
import csv
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SB3_RUNNER = ROOT / "benchmarks" / "parity_sb3.py"


@dataclass(frozen=True)
class Row:
    """One env and algorithm: ding_dist's config, the reference's arguments, the budget and the eval protocol."""

    name: str
    env: str
    algo: str
    ours: dict  # main_config (env and policy sections) for ding-dist train
    ref: dict  # {"lib": "sb3", ...parity_sb3 spec} or {"lib": "ours_dqn", "config": {...}, "policy": "dqn"}
    budget: int  # env steps per run
    evals: int = 10  # evaluations over the budget (eval_every = budget / evals, rounded to whole iterations)
    iteration: int = 1  # env steps per iteration of both sides (PPO: the rollout); eval_every is a multiple
    eval_episodes: int = 10
    max_episode_steps: int | None = None
    default: bool = True  # in the default set
    source: str = ""

    @property
    def eval_every(self) -> int:
        return max(self.iteration, (self.budget // self.evals) // self.iteration * self.iteration)

    @property
    def ref_lib(self) -> str:
        return self.ref["lib"]


# --- the rows -------------------------------------------------------------------------------------------------------
MINATAR_GAMES = ("Breakout", "SpaceInvaders", "Asterix", "Freeway", "Seaquest")


def _minatar_ppo(game: str) -> Row:
    """gymnax-blines' tuned PPO for MinAtar (Lange 2022, ``agents/<Game>-MinAtar/ppo.yaml``): 64 envs x 128 steps,
    8 minibatches, 4 epochs, lr 5e-4, gamma 0.999, GAE 0.95, clip 0.2, entropy 0.01, value 0.5, grad norm 0.5; the
    network is the MinAtar paper's conv net with a shared trunk on both sides (gymnax-blines: an MLP), and no
    learning-rate warm-up (gymnax-blines: 5 % of the updates)."""
    ours = {
        "env": {"collector_env_num": 64},
        "policy": {
            "learn": dict(
                epoch_per_collect=4,
                batch_size=1024,
                learning_rate=5e-4,
                clip_ratio=0.2,
                value_clip_ratio=None,
                value_weight=0.5,
                entropy_weight=0.01,
                adv_norm=True,
                grad_clip_norm=0.5,
            ),  # fmt: skip
            "collect": dict(n_sample=8192, discount_factor=0.999, gae_lambda=0.95),
        },
        "create": {"policy": "ppo"},
    }
    ref = {"lib": "sb3", "n_envs": 64, "minatar_cnn": True, "policy_kwargs": {"net_arch": []},
           "kwargs": dict(n_steps=128, batch_size=1024, n_epochs=4, learning_rate=5e-4, gamma=0.999, gae_lambda=0.95,
                          clip_range=0.2, ent_coef=0.01, vf_coef=0.5, max_grad_norm=0.5)}  # fmt: skip
    return Row(f"{game.lower()}_ppo", f"MinAtar/{game}-v1", "ppo", ours, ref, budget=1_000_000, iteration=8192,
               max_episode_steps=10_000, default=game == "Breakout", source=_minatar_ppo.__doc__)  # fmt: skip


def _minatar_dqn(game: str) -> Row:
    """The MinAtar paper's DQN (Young & Tian 2019): replay 100k, batch 32, lr 2.5e-4, gamma 0.99, target network
    copied every 1,000 updates, epsilon 1 -> 0.1 over the first 100k env steps, learning from 5,000 env steps, one
    update per env step (here 4 updates per 4 env steps on both sides), conv 16 3x3 + linear 128; Adam on both
    sides (the paper: RMSProp), Huber loss and gradient norm 10 (SB3's defaults), single-network-argmax targets
    (SB3's DQN is not double: ``learn.double=False`` here)."""
    ours = {
        "env": {"collector_env_num": 1},
        "policy": {
            "discount_factor": 0.99,
            "nstep": 1,
            "model": {"hidden_sizes": [128], "dueling": False},
            "learn": dict(
                batch_size=32,
                learning_rate=2.5e-4,
                update_per_collect=4,
                learning_starts=5000,
                target_update_freq=1000,
                double=False,
                loss="huber",
                grad_clip_norm=10.0,
            ),  # fmt: skip
            "collect": {"n_sample": 4},
            "other": {
                "eps": dict(type="linear", start=1.0, end=0.1, decay=100_000),
                "replay_buffer": {"replay_buffer_size": 100_000},
            },  # fmt: skip
        },
        "create": {"policy": "dqn", "replay_buffer": "replay"},
    }
    ref = {"lib": "sb3", "n_envs": 1, "minatar_cnn": True, "policy_kwargs": {"net_arch": []},
           "kwargs": dict(buffer_size=100_000, learning_rate=2.5e-4, batch_size=32, learning_starts=5000, gamma=0.99,
                          target_update_interval=1000, train_freq=4, gradient_steps=4, exploration_initial_eps=1.0,
                          exploration_final_eps=0.1, max_grad_norm=10.0),
           "eps_decay_steps": 100_000}  # fmt: skip
    return Row(f"{game.lower()}_dqn", f"MinAtar/{game}-v1", "dqn", ours, ref, budget=200_000, iteration=4,
               max_episode_steps=10_000, default=game == "Breakout", source=_minatar_dqn.__doc__)  # fmt: skip


def _mujoco_sac(env: str) -> Row:
    """rl-baselines3-zoo ``hyperparams/sac.yml`` (MuJoCo: SB3's defaults, learning_starts 10,000): lr 3e-4 for the
    actor, the critics and the temperature, batch 256, replay 1M, tau 0.005, gamma 0.99, automatic entropy tuning
    from alpha 1, 256-256 networks, one update per env step (ours: 64 updates per 64 env steps)."""
    ours = {
        "env": {"collector_env_num": 1},
        "policy": {
            "discount_factor": 0.99,
            "model": {"actor_hidden_sizes": [256, 256], "critic_hidden_sizes": [256, 256]},
            "learn": dict(
                batch_size=256,
                learning_rate_policy=3e-4,
                learning_rate_q=3e-4,
                learning_rate_alpha=3e-4,
                update_per_collect=64,
                learning_starts=10_000,
                target_theta=0.005,
                alpha=1.0,
                auto_alpha=True,
            ),  # fmt: skip
            "collect": {"n_sample": 64},
            "other": {"replay_buffer": {"replay_buffer_size": 1_000_000}},
        },
        "create": {"policy": "sac", "replay_buffer": "replay"},
    }
    ref = {"lib": "sb3", "n_envs": 1, "kwargs": {"learning_starts": 10_000}}
    return Row(f"{env.split('-')[0].lower()}_sac", env, "sac", ours, ref, budget=100_000, iteration=64,
               eval_episodes=5, default=False, source=_mujoco_sac.__doc__)  # fmt: skip


def _mujoco_td3(env: str) -> Row:
    """rl-baselines3-zoo ``hyperparams/td3.yml`` (MuJoCo): lr 1e-3, batch 256, replay 1M (SB3's default),
    learning_starts 10,000, Gaussian exploration noise 0.1, 400-300 networks, one update per env step (ours: 64 per
    64), SB3's defaults for the rest: tau 0.005, gamma 0.99, policy delay 2, target noise 0.2 clipped at 0.5."""
    ours = {
        "env": {"collector_env_num": 1},
        "policy": {
            "discount_factor": 0.99,
            "model": {"actor_hidden_sizes": [400, 300], "critic_hidden_sizes": [400, 300]},
            "learn": dict(
                batch_size=256,
                learning_rate_actor=1e-3,
                learning_rate_critic=1e-3,
                update_per_collect=64,
                learning_starts=10_000,
                target_theta=0.005,
                actor_update_freq=2,
                noise=True,
                noise_sigma=0.2,
                noise_range={"min": -0.5, "max": 0.5},
            ),  # fmt: skip
            "collect": {"n_sample": 64, "noise_sigma": 0.1},
            "other": {"replay_buffer": {"replay_buffer_size": 1_000_000}},
        },
        "create": {"policy": "td3", "replay_buffer": "replay"},
    }
    ref = {"lib": "sb3", "n_envs": 1, "policy_kwargs": {"net_arch": [400, 300]},
           "kwargs": dict(learning_starts=10_000, learning_rate=1e-3, batch_size=256, train_freq=1, gradient_steps=1,
                          noise_std=0.1)}  # fmt: skip
    return Row(f"{env.split('-')[0].lower()}_td3", env, "td3", ours, ref, budget=100_000, iteration=64,
               eval_episodes=5, default=False, source=_mujoco_td3.__doc__)  # fmt: skip


def _hopper_ppo() -> Row:
    """rl-baselines3-zoo ``hyperparams/ppo.yml`` Hopper-v4 (tuned): 1 env, n_steps 512, batch 32, 5 epochs, lr
    9.80828e-5, gamma 0.999, GAE 0.99, clip 0.2, entropy 0.00229519, value 0.835671, grad norm 0.7, 256-256 ReLU
    networks, log std -2, observations normalized (ours: ``model.obs_norm``). Differences: SB3 also normalizes
    rewards (VecNormalize; ding_dist has no reward normalization) and initializes its layers with PyTorch's
    defaults (``ortho_init=False``; ours are orthogonal)."""
    ours = {
        "env": {"collector_env_num": 1},
        "policy": {
            "model": dict(hidden_sizes=[256, 256], activation="relu", log_std_init=-2.0, obs_norm=True),
            "learn": dict(
                epoch_per_collect=5,
                batch_size=32,
                learning_rate=9.80828e-5,
                clip_ratio=0.2,
                value_clip_ratio=None,
                value_weight=0.835671,
                entropy_weight=0.00229519,
                adv_norm=True,
                grad_clip_norm=0.7,
            ),  # fmt: skip
            "collect": dict(n_sample=512, discount_factor=0.999, gae_lambda=0.99),
        },
        "create": {"policy": "ppo"},
    }
    ref = {"lib": "sb3", "n_envs": 1, "normalize": True,
           "policy_kwargs": {"log_std_init": -2, "ortho_init": False, "activation_fn": "ReLU",
                             "net_arch": {"pi": [256, 256], "vf": [256, 256]}},
           "kwargs": dict(n_steps=512, batch_size=32, n_epochs=5, learning_rate=9.80828e-5, gamma=0.999,
                          gae_lambda=0.99, clip_range=0.2, ent_coef=0.00229519, vf_coef=0.835671,
                          max_grad_norm=0.7)}  # fmt: skip
    return Row("hopper_ppo", "Hopper-v5", "ppo", ours, ref, budget=200_000, iteration=512, eval_episodes=5,
               default=False, source=_hopper_ppo.__doc__)  # fmt: skip


def _classic_dqn(env: str) -> Row:
    """rl-baselines3-zoo ``hyperparams/dqn.yml`` (tuned): Acrobot-v1: lr 6.3e-4, batch 128, replay 50k, learning
    from the start (ours: from one batch, 128 env steps), gamma 0.99, target every 250 env steps (= 250 updates),
    train_freq 4 with as many updates (1 per env step), epsilon 1 -> 0.1 over 12 % of its 100k steps, 256-256;
    MountainCar-v0: lr 4e-3, batch 128, replay 10k, from 1,000 env steps, gamma 0.98, target every 600 env steps
    (= 300 updates), train_freq 16 with 8 updates, epsilon 1 -> 0.07 over 20 % of its 120k steps, 256-256.
    Single-network-argmax targets on both sides (SB3's DQN is not double)."""
    acrobot = env.startswith("Acrobot")
    n_sample, updates = (4, 4) if acrobot else (16, 8)
    eps_end, decay = (0.1, 12_000) if acrobot else (0.07, 24_000)
    lr, buffer, starts, gamma = (6.3e-4, 50_000, 128, 0.99) if acrobot else (4e-3, 10_000, 1000, 0.98)
    target_updates = 250 if acrobot else 300
    ours = {
        "env": {"collector_env_num": 1},
        "policy": {
            "discount_factor": gamma,
            "nstep": 1,
            "model": {"hidden_sizes": [256, 256], "dueling": False},
            "learn": dict(
                batch_size=128,
                learning_rate=lr,
                update_per_collect=updates,
                learning_starts=starts,
                target_update_freq=target_updates,
                double=False,
                loss="huber",
                grad_clip_norm=10.0,
            ),  # fmt: skip
            "collect": {"n_sample": n_sample},
            "other": {
                "eps": dict(type="linear", start=1.0, end=eps_end, decay=decay),
                "replay_buffer": {"replay_buffer_size": buffer},
            },  # fmt: skip
        },
        "create": {"policy": "dqn", "replay_buffer": "replay"},
    }
    ref = {"lib": "sb3", "n_envs": 1, "policy_kwargs": {"net_arch": [256, 256]}, "eps_decay_steps": decay,
           "kwargs": dict(buffer_size=buffer, learning_rate=lr, batch_size=128, learning_starts=0 if acrobot else 1000,
                          gamma=gamma, target_update_interval=250 if acrobot else 600, train_freq=n_sample,
                          gradient_steps=updates, exploration_initial_eps=1.0, exploration_final_eps=eps_end,
                          max_grad_norm=10.0)}  # fmt: skip
    return Row(f"{env.split('-')[0].lower()}_dqn", env, "dqn", ours, ref, budget=100_000 if acrobot else 120_000,
               iteration=n_sample, source=_classic_dqn.__doc__)  # fmt: skip


def _masked_r2d2() -> Row:
    """ding_dist's shipped ``cartpole_masked_r2d2_config.py`` (velocities masked: cart position and pole angle only)
    against ding_dist's own DQN (``cartpole_dqn_config.py``'s values) on the same env: the reference here is a
    memoryless agent, so the row shows what the LSTM recovers, not parity with another library."""
    from ding_dist.config.presets import find_config

    def shipped(name: str) -> dict:
        namespace: dict[str, Any] = {}
        exec(Path(find_config(name)).read_text(), namespace)
        main, create = namespace["main_config"], namespace["create_config"]
        policy = json.loads(json.dumps(main["policy"]))
        policy.get("eval", {}).pop("eval_freq", None)
        return {"env": {"collector_env_num": main["env"]["collector_env_num"]}, "policy": policy,
                "create": {"policy": create["policy"]["type"], "replay_buffer": "replay"}}  # fmt: skip

    ours = shipped("cartpole_masked_r2d2")
    ref = {"lib": "ours_dqn", "config": shipped("cartpole_dqn")}
    return Row("masked_cartpole_r2d2", "ding_dist.envs.masked:MaskedCartPole-v1", "r2d2", ours, ref, budget=60_000,
               iteration=64, source=_masked_r2d2.__doc__)  # fmt: skip


def all_rows() -> dict[str, Row]:
    """Every row, in the order they run."""
    rows = [_minatar_ppo(g) for g in MINATAR_GAMES] + [_minatar_dqn(g) for g in MINATAR_GAMES]
    rows += [_mujoco_sac("Hopper-v5"), _mujoco_td3("Hopper-v5"), _mujoco_sac("HalfCheetah-v5")]
    rows += [_mujoco_td3("HalfCheetah-v5"), _hopper_ppo()]
    rows += [_classic_dqn("Acrobot-v1"), _classic_dqn("MountainCar-v0"), _masked_r2d2()]
    return {r.name: r for r in rows}


# --- one run --------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Task:
    row: Row
    lib: str  # "ours" or the row's reference library
    seed: int

    @property
    def key(self) -> str:
        return f"{self.row.name}/{self.lib}/seed{self.seed}"


def result_path(out: Path, task: Task) -> Path:
    return out / task.row.name / task.lib / f"seed{task.seed}.json"


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


_CHILDREN: set[subprocess.Popen] = set()  # the training runs now running, stopped with us on SIGTERM
_CHILDREN_LOCK = threading.Lock()
_STOPPING = threading.Event()  # set on SIGTERM: the runs still queued in the pool start no process


def _run_child(cmd: list[str], log: Any) -> int:
    """Run one training process (its output into ``log``) and return its exit code; it is stopped if we are."""
    with _CHILDREN_LOCK:  # checked and started under the lock the SIGTERM handler takes: none slips in after it
        if _STOPPING.is_set():
            raise RuntimeError("stopped (SIGTERM) before this run started")
        proc = subprocess.Popen(cmd, cwd=ROOT, env=_child_env(), stdout=log, stderr=subprocess.STDOUT)
        _CHILDREN.add(proc)
    try:
        return proc.wait()
    finally:
        with _CHILDREN_LOCK:
            _CHILDREN.discard(proc)


def _stop_children(signum: int, frame: Any) -> None:
    """SIGTERM (``kill``, a SLURM time limit): stop the runs too, none left writing into the results folder; an
    unfinished run has no result file, so the next invocation starts it over. The runs still queued start none
    (the pool's threads finish them at once while the main thread unwinds)."""
    _STOPPING.set()
    with _CHILDREN_LOCK:
        for proc in _CHILDREN:
            proc.terminate()
    raise SystemExit(128 + signum)


def _child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR")}
    env["OMP_NUM_THREADS"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def ours_config_text(row: Row, part: dict, episodes: int) -> str:
    """A ding-dist config file for ``part`` (a row's ``ours``, or its ``ours_dqn`` reference) and its eval protocol."""
    env = {"id": row.env, "evaluator_env_num": min(episodes, 10), "n_evaluator_episode": episodes,
           "max_episode_steps": row.max_episode_steps, "stop_value": None, **part["env"]}  # fmt: skip
    policy = json.loads(json.dumps(part["policy"]))
    policy.setdefault("eval", {})["eval_freq"] = row.eval_every
    policy.setdefault("other", {})["log_freq"] = row.eval_every
    create = {
        "env": {"type": "gymnasium"},
        "env_manager": {"type": "sync"},
        "policy": {"type": part["create"]["policy"]},
    }
    if "replay_buffer" in part["create"]:
        create["replay_buffer"] = {"type": part["create"]["replay_buffer"]}
    main = {"exp_name": row.name, "env": env, "policy": policy}
    return (f'"""bench_parity.py row {row.name}."""\nfrom easydict import EasyDict\n\n'
            f"main_config = EasyDict({main!r})\ncreate_config = EasyDict({create!r})\n")  # fmt: skip


def run_ours(task: Task, part: dict, folder: Path, log: Any) -> dict:
    row = task.row
    config = folder / f"seed{task.seed}.config.py"
    config.write_text(ours_config_text(row, part, row.eval_episodes))
    exp = folder / f"seed{task.seed}.run"
    if exp.exists():  # an unfinished earlier attempt: it starts over (a finished run has its JSON and is skipped)
        shutil.rmtree(exp)
    cmd = [sys.executable, "-m", "ding_dist.entry.cli", "train", str(config), "--seed", str(task.seed),
           "--exp-dir", str(exp), "--max-env-steps", str(row.budget)]  # fmt: skip
    t0 = time.time()
    code = _run_child(cmd, log)
    if code != 0:
        raise RuntimeError(f"{task.key}: ding-dist train exited {code} (see {log.name})")
    curve = []
    for line in (exp / "tb" / "metrics.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if "eval/mean_reward" in rec and (not curve or rec["step"] != curve[-1][0]):
            curve.append([int(rec["step"]), float(rec["wall_time"]) - t0, float(rec["eval/mean_reward"])])
    result = json.loads((exp / "result.json").read_text())
    import torch

    import ding_dist

    versions = {"ding_dist": ding_dist.__version__, "torch": torch.__version__}
    shutil.rmtree(exp / "ckpt", ignore_errors=True)  # checkpoints are not needed for the curves (MBs per run)
    return {"curve": curve, "wall_s": time.time() - t0, "env_steps": int(result["env_steps"]), "versions": versions}


def run_sb3(task: Task, folder: Path, log: Any, ref_python: str) -> dict:
    row, ref = task.row, task.row.ref
    spec = {k: v for k, v in ref.items() if k not in ("lib", "eps_decay_steps")}
    spec["kwargs"] = dict(ref.get("kwargs", {}))
    if "eps_decay_steps" in ref:  # SB3 decays epsilon over a fraction of the budget: the same steps as ours
        spec["kwargs"]["exploration_fraction"] = min(1.0, ref["eps_decay_steps"] / row.budget)
    spec.update(env=row.env, algo=row.algo, budget=row.budget, eval_every=row.eval_every, seed=task.seed,
                eval_episodes=row.eval_episodes, max_episode_steps=row.max_episode_steps, t0=time.time())  # fmt: skip
    spec_path, out_path = folder / f"seed{task.seed}.spec.json", folder / f"seed{task.seed}.sb3out.json"
    spec_path.write_text(json.dumps(spec, indent=1))
    code = _run_child([ref_python, str(SB3_RUNNER), str(spec_path), str(out_path)], log)
    if code != 0:
        raise RuntimeError(f"{task.key}: the SB3 run exited {code} (see {log.name})")
    result = json.loads(out_path.read_text())
    out_path.unlink()
    return result


def random_score(row: Row, episodes: int) -> float:
    """Mean return of uniform random actions over ``episodes`` episodes (the aggregate's zero)."""
    from ding_dist.envs import make_env

    env = make_env(row.env, max_episode_steps=row.max_episode_steps)
    env.action_space.seed(0)
    total = []
    for ep in range(episodes):
        env.reset(seed=10_000 + ep)
        ret, done = 0.0, False
        while not done:
            _, r, term, trunc, _ = env.step(env.action_space.sample())
            ret, done = ret + float(r), term or trunc
        total.append(ret)
    env.close()
    return float(np.mean(total))


def run_task(task: Task, out: Path, ref_python: str) -> dict:
    """Train one run (or return its finished result) and write its JSON and CSV."""
    path = result_path(out, task)
    if path.exists():
        return json.loads(path.read_text())
    if _STOPPING.is_set():  # a run still queued at SIGTERM: nothing of it is written
        raise RuntimeError("stopped (SIGTERM) before this run started")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".log"), "w") as log:
        if task.lib == "ours":
            result = run_ours(task, task.row.ours, path.parent, log)
        elif task.lib == "sb3":
            result = run_sb3(task, path.parent, log, ref_python)
        else:  # ours_dqn: ding_dist's own DQN as the reference
            result = run_ours(task, task.row.ref["config"], path.parent, log)
    row = task.row
    result.update(row=row.name, lib=task.lib, seed=task.seed, env=row.env, algo=row.algo, budget=row.budget,
                  eval_every=row.eval_every, eval_episodes=row.eval_episodes)  # fmt: skip
    with open(path.with_suffix(".csv"), "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["env_steps", "wall_s", "mean_return"])
        writer.writerows(result["curve"])
    _write_atomic(path, json.dumps(result, indent=1))
    return result


# --- the summary ----------------------------------------------------------------------------------------------------
def _load(out: Path, row: Row, lib: str) -> list[dict]:
    folder = out / row.name / lib
    runs = [json.loads(p.read_text()) for p in sorted(folder.glob("seed*.json")) if p.name.count(".") == 1]
    return [r for r in runs if r.get("budget") == row.budget and r["curve"]]


def _grid(runs: list[dict]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Env steps, returns ``(runs, points)`` and wall seconds ``(runs, points)`` on the eval steps all runs share."""
    steps = sorted(set.intersection(*[{c[0] for c in r["curve"]} for r in runs]))
    ys = np.array([[dict((c[0], c[2]) for c in r["curve"])[s] for s in steps] for r in runs])
    ws = np.array([[dict((c[0], c[1]) for c in r["curve"])[s] for s in steps] for r in runs])
    return np.array(steps, dtype=float), ys, ws


def summarize_row(row: Row, ours: list[dict], ref: list[dict], reps: int) -> dict:
    """The row's figures over the seeds both libraries finished (see the module docstring)."""
    from ding_dist.utils.stats import auc, curve_iqm, first_reach, iqm, stratified_bootstrap_ci

    seeds = sorted({r["seed"] for r in ours} & {r["seed"] for r in ref})
    out: dict[str, Any] = {"row": row.name, "env": row.env, "algo": row.algo, "budget": row.budget,
                           "reference": row.ref_lib, "seeds": seeds}  # fmt: skip
    if not seeds:
        out["status"] = f"not finished (ours {len(ours)} run(s), reference {len(ref)})"
        return out
    for name, runs in (("ours", ours), ("ref", ref)):
        runs = [r for r in runs if r["seed"] in seeds]
        steps, ys, ws = _grid(runs)
        final = ys[:, -1]
        areas = np.array([auc(steps, y) for y in ys])
        out[name] = {
            "final": final.tolist(), "final_iqm": iqm(final), "final_ci": stratified_bootstrap_ci(final, reps=reps),
            "auc": areas.tolist(), "auc_iqm": iqm(areas), "auc_ci": stratified_bootstrap_ci(areas, reps=reps),
            "steps": steps.tolist(), "curve_iqm": curve_iqm(ys).tolist(), "wall_median": np.median(ws, 0).tolist(),
            "curves": ys.tolist(), "wall_s": float(np.median([r["wall_s"] for r in runs])),
            "versions": runs[0].get("versions", {}),
        }  # fmt: skip
    target = out["ref"]["final_iqm"]
    reach = {}
    for name in ("ours", "ref"):
        s = out[name]
        reach[name] = (
            first_reach(s["steps"], s["curve_iqm"], target),
            first_reach(s["wall_median"], s["curve_iqm"], target),
        )
    out["target"] = target
    out["steps_ratio"] = reach["ours"][0] / reach["ref"][0] if reach["ours"][0] and reach["ref"][0] else None
    out["wall_ratio"] = reach["ours"][1] / reach["ref"][1] if reach["ours"][1] and reach["ref"][1] else None
    out["ours_reached"] = reach["ours"][0] is not None
    low, high = out["ref"]["final_ci"]
    value = out["ours"]["final_iqm"]
    out["verdict"] = "above" if value > high else "inside" if value >= low else "below"
    out["status"] = "finished" if len(seeds) == len(ours) == len(ref) else "partial"
    return out


def _fmt(x: float | None, digits: int = 2) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _ci(point: float, ci: tuple[float, float], digits: int = 1) -> str:
    return f"{point:.{digits}f} [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"


def markdown_table(summaries: list[dict]) -> str:
    lines = ["| row | env | reference | budget | seeds | ours final IQM [95% CI] | reference final IQM [95% CI] | "
             "ours AUC | reference AUC | ours vs reference CI | env steps to reference's final, ours/ref | "
             "wall time to it, ours/ref | wall s per run, ours / ref |",
             "|" + "---|" * 13]  # fmt: skip
    for s in summaries:
        head = f"| {s['row']} | `{s['env']}` | {s['reference']} | {s['budget']:,} | "
        if "ours" not in s:
            lines.append(head + f"- | {s['status']} |" + " |" * 8)
            continue
        o, r = s["ours"], s["ref"]
        not_reached = "ours never reached it" if not s["ours_reached"] else None
        lines.append(
            head + f"{len(s['seeds'])}{'' if s['status'] == 'finished' else ' (partial)'} | "
            f"{_ci(o['final_iqm'], o['final_ci'])} | {_ci(r['final_iqm'], r['final_ci'])} | "
            f"{_ci(o['auc_iqm'], o['auc_ci'])} | {_ci(r['auc_iqm'], r['auc_ci'])} | **{s['verdict']}** | "
            f"{not_reached or _fmt(s['steps_ratio'])} | {not_reached or _fmt(s['wall_ratio'])} | "
            f"{o['wall_s']:.0f} / {r['wall_s']:.0f} |"
        )
    return "\n".join(lines)


def aggregate(summaries: list[dict], randoms: dict[str, float], reps: int) -> dict | None:
    """IQM of reference-normalized final scores over every run of every finished row, with a stratified interval."""
    from ding_dist.utils.stats import iqm, stratified_bootstrap_ci

    done = [s for s in summaries if "ours" in s and s["row"] in randoms]
    if not done:
        return None
    n = min(len(s["seeds"]) for s in done)
    agg: dict[str, Any] = {"rows": [s["row"] for s in done], "runs_per_row": n}
    for name in ("ours", "ref"):
        cols = []
        for s in done:
            zero, one = randoms[s["row"]], s["target"]
            scale = one - zero if abs(one - zero) > 1e-9 else 1.0
            cols.append((np.array(s[name]["final"][:n]) - zero) / scale)
        matrix = np.stack(cols, axis=1)  # (runs, rows): stratified over rows
        agg[name] = {"iqm": iqm(matrix), "ci": stratified_bootstrap_ci(matrix, reps=reps)}
    return agg


def plot(summaries: list[dict], agg: dict | None, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for s in summaries:
        if "ours" not in s:
            continue
        fig, ax = plt.subplots(figsize=(5, 3.4))
        for name, label, color in (("ours", "ding_dist", "C0"), ("ref", s["reference"], "C1")):
            steps, ys = np.array(s[name]["steps"]), np.array(s[name]["curves"])
            mean = ys.mean(0)
            ax.plot(steps, mean, color=color, label=f"{label} (mean of {len(ys)})")
            ax.fill_between(steps, ys.min(0), ys.max(0), color=color, alpha=0.2, linewidth=0)
        ax.set(title=f"{s['env']} {s['algo'].upper()}", xlabel="env steps", ylabel="eval return")
        ax.legend(fontsize=8, title="band: min-max over seeds", title_fontsize=7)
        fig.tight_layout()
        fig.savefig(out / f"{s['row']}.png", dpi=90)
        plt.close(fig)
    if agg:
        fig, ax = plt.subplots(figsize=(5, 2.2))
        for i, name in enumerate(("ours", "ref")):
            low, high = agg[name]["ci"]
            ax.errorbar([agg[name]["iqm"]], [i], xerr=[[agg[name]["iqm"] - low], [high - agg[name]["iqm"]]], fmt="o",
                        capsize=4, color=f"C{i}")  # fmt: skip
        ax.set(yticks=[0, 1], yticklabels=["ding_dist", "reference"], ylim=(-0.7, 1.7),
               xlabel=f"IQM of normalized final score ({len(agg['rows'])} rows), 95% CI")  # fmt: skip
        fig.tight_layout()
        fig.savefig(out / "aggregate.png", dpi=90)
        plt.close(fig)


def _machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    return f"{os.cpu_count()} cores ({cpu}), {platform.python_version()}"


def summarize(out: Path, rows: list[Row], reps: int = 10_000) -> list[dict]:
    """Rewrite ``summary.md``, ``summary.json`` and the figures from the finished runs under ``out``."""
    summaries = [summarize_row(r, _load(out, r, "ours"), _load(out, r, r.ref_lib), reps) for r in rows]
    randoms = {}
    for r in rows:
        p = out / r.name / "random.json"
        if p.exists():
            randoms[r.name] = json.loads(p.read_text())["mean_return"]
    agg = aggregate(summaries, randoms, reps)
    plot(summaries, agg, out)
    text = [f"# bench_parity summary ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})", "",
            f"Machine: {_machine()}. Final and AUC: interquartile mean over seeds, 95% stratified bootstrap "
            "interval; ratios: env steps and wall seconds the IQM curve needs to reach the reference's final IQM.",
            "", markdown_table(summaries), ""]  # fmt: skip
    if agg:
        o, r = agg["ours"], agg["ref"]
        text.append(f"Aggregate over {', '.join(agg['rows'])} ({agg['runs_per_row']} runs each), normalized final "
                    f"score IQM: ours {_ci(o['iqm'], o['ci'], 2)}, reference {_ci(r['iqm'], r['ci'], 2)}"
                    " (1 = the reference's final IQM, 0 = random actions).")  # fmt: skip
    (out / "summary.md").write_text("\n".join(text) + "\n")
    _write_atomic(out / "summary.json", json.dumps({"rows": summaries, "aggregate": agg, "random": randoms}, indent=1))
    return summaries


# --- the command ----------------------------------------------------------------------------------------------------
def select_rows(spec: str | None, budget: int | None, evals: int | None) -> list[Row]:
    rows = all_rows()
    if spec in (None, "default"):
        chosen = [r for r in rows.values() if r.default]
    elif spec == "all":
        chosen = list(rows.values())
    else:
        unknown = [n for n in spec.split(",") if n not in rows]
        if unknown:
            raise SystemExit(f"bench_parity.py: unknown row(s) {unknown}; rows are {sorted(rows)}")
        chosen = [rows[n] for n in spec.split(",")]
    return [replace(r, budget=budget or r.budget, evals=evals or r.evals) for r in chosen]


def make_tasks(rows: list[Row], seeds: list[int]) -> list[Task]:
    """Seed by seed (every row's seed 0 first), ours then the reference: a cut-short suite has whole seeds."""
    return [Task(r, lib, s) for s in seeds for r in rows for lib in ("ours", r.ref_lib)]


def _sb3_python(given: str | None) -> str:
    if given:
        return given
    ok = subprocess.run([sys.executable, "-c", "import stable_baselines3"], capture_output=True).returncode == 0
    if not ok:
        hint = "pass --ref-python of a venv with it (bash benchmarks/bench_parity.sh makes one)"
        raise SystemExit(f"bench_parity.py: stable-baselines3 is missing here: pip install '.[bench]', or {hint}")
    return sys.executable


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="results folder (reused: finished runs are skipped)")
    parser.add_argument("--rows", "--envs", dest="rows", default=None,
                        help="comma-separated row names, 'default' (the default set) or 'all'")  # fmt: skip
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--budget", type=int, default=None, help="env steps per run for every chosen row")
    parser.add_argument("--evals", type=int, default=None, help="evaluations per run (default 10)")
    parser.add_argument("--jobs", type=int, default=1, help="runs at a time (each 1 torch thread)")
    parser.add_argument("--task-index", type=int, default=None, help="run only task I of --list (SLURM arrays)")
    parser.add_argument("--list", action="store_true", help="print the tasks, numbered, and exit")
    parser.add_argument("--summary-only", action="store_true", help="re-summarize the finished runs and exit")
    parser.add_argument("--ref-python", default=None, help="interpreter with stable-baselines3 (default: this one)")
    parser.add_argument("--reps", type=int, default=10_000, help="bootstrap replicates")
    args = parser.parse_args(argv)
    try:
        seeds = [int(s) for s in args.seeds.split(",")]
    except ValueError:
        raise SystemExit(f"bench_parity.py: --seeds must be comma-separated integers, got {args.seeds!r}") from None
    if args.jobs < 1 or (args.budget is not None and args.budget < 1):
        raise SystemExit(f"bench_parity.py: --jobs and --budget must be >= 1, got {args.jobs} and {args.budget}")
    rows = select_rows(args.rows, args.budget, args.evals)
    tasks = make_tasks(rows, seeds)
    if args.list:
        for i, t in enumerate(tasks):
            done = "done" if result_path(args.out, t).exists() else "todo"
            print(f"{i:3d} {t.key:40s} {t.row.budget:>9,} env steps  {done}")
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    if args.summary_only:
        print(markdown_table(summarize(args.out, rows, args.reps)))
        return 0
    if args.task_index is not None:
        if not 0 <= args.task_index < len(tasks):
            raise SystemExit(f"bench_parity.py: --task-index must be in [0, {len(tasks)}), got {args.task_index}")
        tasks = [tasks[args.task_index]]
    ref_python = _sb3_python(args.ref_python) if any(t.lib == "sb3" for t in tasks) else ""
    for r in rows:  # the aggregate's zero: cheap, once per row
        p = args.out / r.name / "random.json"
        if not p.exists():
            p.parent.mkdir(parents=True, exist_ok=True)
            _write_atomic(p, json.dumps({"mean_return": random_score(r, r.eval_episodes)}))
    from tqdm import tqdm

    signal.signal(signal.SIGTERM, _stop_children)
    todo = [t for t in tasks if not result_path(args.out, t).exists()]
    print(f"bench_parity: {len(tasks)} runs, {len(tasks) - len(todo)} finished, {len(todo)} to run, "
          f"{args.jobs} at a time; results in {args.out}", flush=True)  # fmt: skip
    failed = []
    with tqdm(total=len(todo), desc="runs", unit="run", dynamic_ncols=True) as bar, \
            concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:  # fmt: skip
        futures = {pool.submit(run_task, t, args.out, ref_python): t for t in todo}
        for fut in concurrent.futures.as_completed(futures):
            t = futures[fut]
            try:
                r = fut.result()
                bar.set_postfix_str(f"{t.key}: {r['curve'][-1][2]:.1f} in {r['wall_s']:.0f} s")
            except Exception as e:  # one failed run is reported; the others go on
                failed.append(f"{t.key}: {e}")
                tqdm.write(f"FAILED {t.key}: {e}")
            bar.update(1)
            if args.task_index is None:
                summarize(args.out, rows, args.reps)
    if args.task_index is None:
        print((args.out / "summary.md").read_text())
    for line in failed:
        print(f"failed: {line}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
