"""RL training on 1 vs 2 processes: collection throughput, gradient-sync share, time to a return of 475.

Run:  python benchmarks/bench_rl.py [--parts throughput,sync,ttt] [--seeds 0,1,2] [--repeats 3]

- throughput: env steps per second of a collection-heavy PPO run (16 CartPole envs per process,
  one synchronized update per 4096-step rollout, no evaluation until the end), 1 vs 2 processes,
  one torch thread per process; median of ``--repeats`` alternating runs, ratio 2p / 1p.
- sync: on 2 processes, time per train step of the shipped DQN and PPO configs' networks with
  gradient synchronization and without it (same batches, raw module); share = 1 - nosync / sync.
- ttt: wall time and env steps until the greedy evaluation reaches 475 on CartPole-v1 with the
  shipped DQN and PPO configs, 1 and 2 processes, median over ``--seeds``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import gymnasium as gym
import torch

from ding_dist.comm import allreduce, barrier, get_world_size, launch
from ding_dist.entry import load_config, train
from ding_dist.policy import get_policy_cls

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = {algo: str(ROOT / "configs" / f"cartpole_{algo}_config.py") for algo in ("dqn", "ppo")}
THROUGHPUT_OVERRIDES = [
    "env.collector_env_num=16",
    "env.stop_value=None",
    "policy.collect.n_sample=4096",
    "policy.learn.batch_size=4096",
    "policy.learn.epoch_per_collect=1",
    "policy.eval.eval_freq=0",
    "policy.other.log_freq=16384",
]


def _train(config: str, seed: int, max_env_steps: int, overrides: list[str]) -> dict:
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as exp_dir:
        return train(config, seed=seed, exp_dir=exp_dir, max_env_steps=max_env_steps, overrides=overrides)


def run(nproc: int, config: str, seed: int, max_env_steps: int, overrides: list[str] = ()) -> dict:
    """One training run on ``nproc`` fresh processes; rank 0's result."""
    return launch(_train, nproc, config, seed, max_env_steps, list(overrides), timeout=1800)[0]


def bench_throughput(repeats: int, env_steps: int) -> dict:
    fps: dict[int, list[float]] = {1: [], 2: []}
    for i in range(repeats):
        for nproc in (1, 2) if i % 2 == 0 else (2, 1):  # alternate so both see the same machine load
            r = run(nproc, CONFIGS["ppo"], seed=i, max_env_steps=env_steps, overrides=THROUGHPUT_OVERRIDES)
            fps[nproc].append(r["env_steps"] / r["wall_time_s"])
    med = {n: statistics.median(v) for n, v in fps.items()}
    return {"fps_1p": med[1], "fps_2p": med[2], "ratio_2p_over_1p": med[2] / med[1], "runs": fps}


def _time_steps(policy, data, steps: int) -> float:
    barrier()
    start = time.perf_counter()
    for _ in range(steps):
        policy.learn(data)
    return (time.perf_counter() - start) / steps


def _policy_and_batch(algo: str, cfg, world: int):
    policy_cls = get_policy_cls(cfg.create_config.policy.type)
    policy = policy_cls(cfg.policy, gym.spaces.Box(-5, 5, (4,)), gym.spaces.Discrete(2))
    if algo == "dqn":  # one update on a per-rank batch
        b = cfg.policy.learn.batch_size // world
        data = {
            "obs": torch.randn(b, 4),
            "action": torch.randint(0, 2, (b,)),
            "reward": torch.randn(b),
            "next_obs": torch.randn(b, 4),
            "discount": torch.full((b,), 0.99),
        }
        return policy, data, 1
    # PPO: one learn() call = one rollout = epochs x minibatches updates
    policy.cfg.learn.batch_size //= world
    n = cfg.policy.collect.n_sample // world
    obs = torch.randn(n, 1, 4).numpy()
    action, extras = policy.collect_action(obs[:, 0], 0)
    data = {
        "obs": obs,
        "next_obs": obs,
        "action": action[:, None],
        "logp": extras["logp"][:, None],
        "value": extras["value"][:, None],
        "reward": torch.randn(n, 1).numpy(),
        "terminated": (torch.rand(n, 1) < 0.05).numpy(),
        "truncated": torch.zeros(n, 1, dtype=torch.bool).numpy(),
        "last_obs": obs[-1],
    }
    return policy, data, cfg.policy.learn.epoch_per_collect * (n // policy.cfg.learn.batch_size)


def _sync_share_on_rank(algo: str, repeats: int, steps: int) -> dict:
    torch.set_num_threads(1)
    cfg = load_config(CONFIGS[algo])
    world = get_world_size()
    synced_policy, data, per_call = _policy_and_batch(algo, cfg, world)
    local_policy, _, _ = _policy_and_batch(algo, cfg, world)
    # The engine hooks the parameters themselves: close() removes the hooks, so this policy does the
    # same per-rank work with no communication at all.
    local_policy.train_model = local_policy.train_model.close()
    calls = max(1, steps // per_call)
    _time_steps(synced_policy, data, 2), _time_steps(local_policy, data, 2)  # warm up
    flat = torch.zeros(sum(p.numel() for p in synced_policy.model.parameters()))
    synced, local, raw = [], [], []
    for _ in range(repeats):
        synced.append(_time_steps(synced_policy, data, calls) / per_call)
        local.append(_time_steps(local_policy, data, calls) / per_call)
        barrier()
        start = time.perf_counter()
        for _ in range(steps):  # the floor: one plain allreduce of all gradients, flattened
            allreduce(flat, op="avg")
        raw.append((time.perf_counter() - start) / steps)
    return {
        "sync_ms": statistics.median(synced) * 1e3,
        "nosync_ms": statistics.median(local) * 1e3,
        "raw_allreduce_ms": statistics.median(raw) * 1e3,
        "params": flat.numel(),
    }


def bench_sync(repeats: int, steps: int) -> dict:
    out = {}
    for algo in ("dqn", "ppo"):
        r = launch(_sync_share_on_rank, 2, algo, repeats, steps, timeout=900)[0]
        r["sync_share"] = 1.0 - r["nosync_ms"] / r["sync_ms"]
        out[algo] = r
    return out


def bench_time_to_475(seeds: list[int], max_env_steps: int) -> dict:
    out = {}
    for algo in ("ppo", "dqn"):
        for nproc in (1, 2):
            runs = [run(nproc, CONFIGS[algo], seed, max_env_steps) for seed in seeds]
            reached = [r for r in runs if r["best_eval_return"] >= 475]
            out[f"{algo}_{nproc}p"] = {
                "median_wall_s": statistics.median(r["wall_time_s"] for r in runs),
                "median_env_steps": statistics.median(r["env_steps"] for r in runs),
                "reached": f"{len(reached)}/{len(runs)}",
                "runs": [(r["env_steps"], round(r["wall_time_s"], 1), r["best_eval_return"]) for r in runs],
            }
        one, two = out[f"{algo}_1p"], out[f"{algo}_2p"]
        out[f"{algo}_wall_ratio_2p_over_1p"] = two["median_wall_s"] / one["median_wall_s"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="throughput,sync,ttt", help="comma list of throughput,sync,ttt")
    parser.add_argument("--seeds", default="0,1,2", help="seeds for time-to-475")
    parser.add_argument("--repeats", type=int, default=3, help="repeats for throughput and sync timing")
    parser.add_argument("--throughput-steps", type=int, default=262144, help="env steps per throughput run")
    parser.add_argument("--json", default=None, help="also write all figures to this JSON file")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    results: dict = {}
    if "throughput" in parts:
        t = results["throughput"] = bench_throughput(args.repeats, args.throughput_steps)
        print(
            f"throughput (PPO, collection-heavy): 1p {t['fps_1p']:.0f} env steps/s, "
            f"2p {t['fps_2p']:.0f} env steps/s, ratio 2p/1p = {t['ratio_2p_over_1p']:.2f}",
            flush=True,
        )
    if "sync" in parts:
        s = results["sync"] = bench_sync(max(5, args.repeats), steps=300)
        for algo, r in s.items():
            print(
                f"gradient sync, {algo} (2 processes, {r['params']} params): {r['sync_ms']:.3f} ms/step with "
                f"sync, {r['nosync_ms']:.3f} ms/step without; sync share {100 * r['sync_share']:.0f}%; "
                f"one raw allreduce of all gradients {r['raw_allreduce_ms']:.3f} ms",
                flush=True,
            )
    if "ttt" in parts:
        seeds = [int(s) for s in args.seeds.split(",")]
        t = results["time_to_475"] = bench_time_to_475(seeds, max_env_steps=100_000)
        for algo in ("ppo", "dqn"):
            for nproc in (1, 2):
                r = t[f"{algo}_{nproc}p"]
                print(
                    f"time to 475, {algo} {nproc}p: median {r['median_wall_s']:.1f} s, "
                    f"{r['median_env_steps']:.0f} env steps, reached {r['reached']} (runs {r['runs']})",
                    flush=True,
                )
            print(f"time to 475, {algo}: wall ratio 2p/1p = {t[f'{algo}_wall_ratio_2p_over_1p']:.2f}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()
