"""Collection speed: the env alone, gymnasium's vector env, ours, and our Collector with the PPO policy acting.

Two cases, each with its training settings: MinAtar SpaceInvaders (the ``spaceinvaders_ppo`` row of
``bench_parity.py``: 64 envs, episodes capped at 10,000 steps, the MinAtar CNN) and CartPole-v1
(``configs/cartpole_ppo_config.py``: 8 envs, a 64-64 MLP). Env steps per second of:

- ``bare``: the envs' unwrapped games stepped in a Python loop with random actions (no wrappers, no batching):
  what the game itself costs;
- ``gym_vec`` (the floor): gymnasium's ``SyncVectorEnv`` (SAME_STEP autoreset) of the envs ``make_env`` builds with
  ``gym.make``'s default wrappers, random actions: a plain gymnasium user's vector env;
- ``ours``: ``make_vec_env(..., training=True)``, the collector's vector env (restarting crashed envs), random
  actions;
- ``collector``: :class:`~ding_dist.worker.Collector` on that vector env with the PPO policy acting (1 torch thread,
  as the parity runs), recording the rollout.

``--before REV`` adds ``ours@REV`` and ``collector@REV``: the same two with the vector env, env builder and collector
of git revision ``REV`` (``ding_dist/envs/{restarting,minatar,env}.py`` and ``ding_dist/worker/collector.py`` loaded
from it beside today's), to compare a change within one process.

Blocks of the same number of env steps run interleaved (bare, gym_vec, ours, collector, bare, ...; every other round
in reverse order) in one process; each variant's figure is its median over the rounds, printed with its ratio to
the floor (above 1: faster) and the spread of its rounds. ``--profile VARIANT`` then runs that variant under
cProfile and prints where its time goes (the game, the wrappers around it, the vector env, acting, the collector's
own work) and the functions with the most own time.

Run::

    python benchmarks/bench_collect.py                               # both cases, 7 rounds
    python benchmarks/bench_collect.py --before HEAD~1               # and the previous commit's, interleaved
    python benchmarks/bench_collect.py --cases spaceinvaders --rounds 5 --profile collector
"""

from __future__ import annotations

import argparse
import cProfile
import inspect
import json
import pstats
import statistics
import subprocess
import sys
import time
import types
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from ding_dist.entry import load_config  # noqa: E402
from ding_dist.entry.factories import build_policy  # noqa: E402
from ding_dist.envs import make_env, make_vec_env  # noqa: E402
from ding_dist.worker import Collector  # noqa: E402

VARIANTS = ("bare", "gym_vec", "ours", "collector")


def case_config(name: str) -> Any:
    """The compiled config of a case: its env section and PPO policy as training uses them."""
    if name == "cartpole":
        return load_config(str(ROOT / "configs" / "cartpole_ppo_config.py"), seed=0)
    from bench_parity import all_rows

    row = all_rows()[f"{name}_ppo"]
    main = {
        "exp_name": row.name,
        "env": {"id": row.env, "max_episode_steps": row.max_episode_steps, **row.ours["env"]},
        "policy": json.loads(json.dumps(row.ours["policy"])),
    }
    create = {"env": {"type": "gymnasium"}, "env_manager": {"type": "sync"}, "policy": {"type": "ppo"}}
    return load_config((main, create), seed=0)


def _env_args(env_cfg: Any) -> dict[str, Any]:
    return {"max_episode_steps": env_cfg.get("max_episode_steps"), "env_kwargs": env_cfg.get("env_kwargs")}


class Bare:
    """The unwrapped games stepped one by one, reset when an episode ends."""

    def __init__(self, env_cfg: Any, n: int, seed: int) -> None:
        self.envs = [make_env(env_cfg.id, **_env_args(env_cfg)).unwrapped for _ in range(n)]
        for i, env in enumerate(self.envs):
            env.reset(seed=seed + i)

    def run(self, actions: np.ndarray) -> None:
        for row in actions:
            for env, a in zip(self.envs, row):
                _, _, terminated, truncated, _ = env.step(a)
                if terminated or truncated:
                    env.reset()


class VecRandom:
    """A vector env stepped with given random actions."""

    def __init__(self, venv: gym.vector.VectorEnv, seed: int) -> None:
        self.venv = venv
        venv.reset(seed=[seed + i for i in range(venv.num_envs)])

    def run(self, actions: np.ndarray) -> None:
        for row in actions:
            self.venv.step(row)


class Collecting:
    """The collector with the policy acting."""

    def __init__(self, cfg: Any, n: int, seed: int, modules: types.SimpleNamespace | None = None) -> None:
        build_venv, collector_cls = (make_vec_env, Collector) if modules is None else (modules.make_vec_env,
                                                                                        modules.Collector)  # fmt: skip
        venv = build_venv(cfg.env, n, "sync", training=True)
        self.policy = build_policy(cfg, venv.single_observation_space, venv.single_action_space, device="cpu")
        self.collector = collector_cls(venv, self.policy, seeds=[seed + i for i in range(n)])

    def run(self, actions: np.ndarray) -> None:
        self.collector.collect(len(actions), env_step=0)


def load_revision(rev: str) -> types.SimpleNamespace:
    """``make_vec_env`` and ``Collector`` as git revision ``rev`` had them: its restarting vector env, MinAtar
    wrapper, env builder and collector, loaded as modules of their own beside today's (the rest is today's)."""

    def load(path: str, **patch: Any) -> types.ModuleType:
        source = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:{path}"], capture_output=True, text=True,
                                check=True).stdout  # fmt: skip
        module = types.ModuleType(f"_at_{rev}_{Path(path).stem}".replace("~", "_").replace("^", "_"))
        module.__file__ = f"{rev}:{path}"
        sys.modules[module.__name__] = module
        exec(compile(source, module.__file__, "exec"), module.__dict__)
        module.__dict__.update(patch)  # its imports of the other loaded modules point at the revision's
        return module

    restarting = load("ding_dist/envs/restarting.py")
    minatar = load("ding_dist/envs/minatar.py")
    env = load("ding_dist/envs/env.py", RestartingVectorEnv=restarting.RestartingVectorEnv,
               async_in_workers=restarting.async_in_workers, GridChannelsFirst=minatar.GridChannelsFirst)  # fmt: skip
    collector = load("ding_dist/worker/collector.py", close_vec_env=env.close_vec_env)
    return types.SimpleNamespace(make_vec_env=env.make_vec_env, Collector=collector.Collector)


def build(cfg: Any, variant: str, before: types.SimpleNamespace | None = None, seed: int = 0) -> Any:
    n = int(cfg.env.collector_env_num)
    if variant == "bare":
        return Bare(cfg.env, n, seed)
    if variant == "gym_vec":
        fns = [lambda: make_env(cfg.env.id, **_env_args(cfg.env)) for _ in range(n)]
        return VecRandom(gym.vector.SyncVectorEnv(fns, autoreset_mode=AutoresetMode.SAME_STEP), seed)
    if variant.startswith("ours"):
        build_venv = make_vec_env if "@" not in variant else before.make_vec_env
        return VecRandom(build_venv(cfg.env, n, "sync", training=True), seed)
    return Collecting(cfg, n, seed, before if "@" in variant else None)


def measure(cases: list[str], rounds: int, env_steps: int, profile: str | None,
            before: str | None = None) -> dict[str, dict[str, float]]:  # fmt: skip
    results: dict[str, dict[str, float]] = {}
    variants = list(VARIANTS)
    old = None
    if before:
        old = load_revision(before)
        variants[3:3] = [f"ours@{before}"]
        variants.append(f"collector@{before}")
    if profile and profile not in variants:
        raise SystemExit(f"bench_collect.py: --profile must be one of {variants}, got {profile!r}")
    for name in cases:
        cfg = case_config(name)
        n = int(cfg.env.collector_env_num)
        steps = max(1, env_steps // n)  # vector steps per block
        probe = make_env(cfg.env.id, **_env_args(cfg.env))
        n_actions = int(probe.action_space.n)
        probe.close()
        rng = np.random.default_rng(0)
        runners = {v: build(cfg, v, old) for v in variants}
        for runner in runners.values():  # warm-up: first steps, first forward passes
            runner.run(rng.integers(n_actions, size=(min(steps, 8), n)))
        rates: dict[str, list[float]] = {v: [] for v in variants}
        for r in range(rounds):
            for v in variants if r % 2 == 0 else variants[::-1]:
                actions = rng.integers(n_actions, size=(steps, n))
                t0 = time.perf_counter()
                runners[v].run(actions)
                rates[v].append(steps * n / (time.perf_counter() - t0))
        med = {v: statistics.median(x) for v, x in rates.items()}
        spread = {v: (max(x) - min(x)) / med[v] for v, x in rates.items()}
        floor = med["gym_vec"]
        print(f"\n{name}: {n} envs, {steps * n} env steps per block, {rounds} rounds (medians)")
        width = max(len(v) for v in variants) + 2
        print(f"  {'variant':<{width}} {'env steps/s':>12} {'vs gym_vec':>11} {'spread':>7}")
        for v in variants:
            print(f"  {v:<{width}} {med[v]:>12,.0f} {med[v] / floor:>10.2f}x {spread[v]:>6.0%}")
        if before:
            for v in ("ours", "collector"):
                print(f"  {v} / {v}@{before}: {med[v] / med[f'{v}@{before}']:.2f}x")
        results[name] = {**{f"{v}_steps_per_s": med[v] for v in variants},
                         **{f"{v}_vs_gym_vec": med[v] / floor for v in variants}}  # fmt: skip
        if profile:
            profile_variant(runners[profile], rng, n_actions, steps, n, max(3, rounds), f"{name}/{profile}")
    return results


def _code_key(fn: Any) -> tuple[str, int, str]:
    code = inspect.unwrap(fn).__code__  # a decorated method (torch.no_grad): its own code, not the decorator's
    return code.co_filename, code.co_firstlineno, code.co_name


def _split(runner: Any, stats: dict, total: float) -> dict[str, float]:
    """Seconds of the profiled blocks per part: the game (the unwrapped env's step and reset), the wrappers around
    it, the vector env's own work, the policy acting and the collector's own work (from cumulative times)."""

    def cum(fns: list[Any]) -> float:
        return sum(stats[_code_key(f)][3] for f in fns if _code_key(f) in stats)

    collector = getattr(runner, "collector", None)
    venv = collector.venv if collector is not None else getattr(runner, "venv", None)
    if venv is None:
        envs = runner.envs
    elif hasattr(venv, "subs"):
        envs = [sub.envs[0] for sub in venv.subs]
    else:
        envs = list(venv.envs)
    outer = {type(e) for e in envs}
    inner = {type(e.unwrapped) for e in envs}
    game = cum([c.step for c in inner] + [c.reset for c in inner])
    calls = cum([c.step for c in outer] + [c.reset for c in outer])
    parts = {"game": game, "wrappers": calls - game}
    if venv is not None:
        stepped = cum([type(venv).step])
        parts["vector env"] = stepped - calls
        if collector is not None:
            act = type(collector)._act if hasattr(collector, "_act") else type(runner.policy).collect_action
            acting = cum([act])
            parts["acting"] = acting
            parts["collector"] = total - stepped - acting
    return parts


def profile_variant(runner: Any, rng: np.random.Generator, n_actions: int, steps: int, n: int, blocks: int,
                    label: str) -> None:  # fmt: skip
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    for _ in range(blocks):
        runner.run(rng.integers(n_actions, size=(steps, n)))
    prof.disable()
    total = time.perf_counter() - t0
    stats = pstats.Stats(prof)
    print(f"\nprofile {label} ({blocks} blocks; cProfile slows Python calls, so shares are approximate):")
    for part, t in _split(runner, stats.stats, total).items():  # type: ignore[attr-defined]
        print(f"  {part:<12} {t / total:>6.1%}")
    stats.sort_stats("tottime").print_stats(15)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default="spaceinvaders,cartpole", help="spaceinvaders, cartpole (comma-separated)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--env-steps", type=int, default=4096, help="env steps per timed block")
    parser.add_argument("--profile", default=None, help=f"one of {', '.join(VARIANTS)} (with --before: or ours@REV, "
                        "collector@REV)")  # fmt: skip
    parser.add_argument("--before", default=None, help="also time the vector env and collector of this git revision")
    parser.add_argument("--json", type=Path, default=None, help="write the medians and ratios here")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    results = measure(args.cases.split(","), args.rounds, args.env_steps, args.profile, args.before)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
