"""Whole DQN runs of ding_dist and Stable-Baselines3 driven by the same random draws: do they end with the same net?

``parity_update_check.py`` shows one update is the same computation; this check covers everything around it in
both libraries' real training loops: ding_dist's ``train()`` (collector, SAME_STEP autoreset, replay ring and its
wrap-around, learning start, ``update_per_collect``, target copies, the epsilon schedule) and SB3's
``DQN.learn()`` (its rollout collection, replay buffer, ``train_freq``/``gradient_steps``, ``_on_step``'s target
copies and exploration schedule). Both start from the same initial weights and the same env seed, and every
random draw the two libraries make differently is replaced by one shared stream:

- exploration at env step ``t``: one uniform ``u_t`` and one random action ``a_t`` (each side keeps its own
  epsilon schedule and acts ``a_t`` when ``u_t < epsilon``; ``u_t`` is redrawn while it lies within 5e-4 of the
  schedule's value at ``t``, so the two schedules' few-step offsets never decide differently);
- the replay sample of update ``k``: ``batch_size`` age ranks (0 = the oldest stored transition), which each side
  maps to its own storage.

Two alignments, both outside the learning rule: SB3 acts uniformly at random until ``learning_starts`` where
ding_dist acts epsilon-greedily from step 0 (SB3 runs epsilon-greedy here too), and SB3 trains from the first
collect after ``learning_starts`` where ding_dist trains at it (SB3 gets ``learning_starts - train_freq``). With
the same draws the two runs must then end with bit-identical parameters; a difference anywhere in either loop
shows as a parameter difference (and the first update drawn from a replay of another size, where there is one).
Run (SB3 from the ``bench`` extra)::

    python benchmarks/parity_twin_check.py --row freeway_dqn --steps 20000
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")  # both sides on one thread, the parity runs' setting

import numpy as np  # noqa: E402
import torch  # noqa: E402

from ding_dist.policy.exploration import epsilon_schedule  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_parity  # noqa: E402
import parity_sb3  # noqa: E402

STREAM = 20261205  # the shared stream's seed
MARGIN = 5e-4


class Draws:
    """The shared random draws: exploration per env step, replay age ranks per update; each side counts its own."""

    def __init__(self, n_actions: int, eps: dict) -> None:
        self.n_actions, self.eps = n_actions, eps
        self.step = 0
        self.update = 0
        self.sizes: list[int] = []  # replay size at each update: with the update's index it fixes the age ranks

    def explore(self) -> tuple[float, int]:
        t, self.step = self.step, self.step + 1
        g = np.random.default_rng([STREAM, 0, t])
        ref = epsilon_schedule(self.eps["type"], self.eps["start"], self.eps["end"], self.eps["decay"], t)
        u = g.random()
        while abs(u - ref) < MARGIN:
            u = g.random()
        return u, int(g.integers(self.n_actions))

    def ranks(self, rows: int, batch: int) -> np.ndarray:
        k, self.update = self.update, self.update + 1
        out = np.random.default_rng([STREAM, 1, k]).integers(0, rows, size=batch)
        self.sizes.append(rows)
        return out


def run_ours(config: Path, seed: int, steps: int, overrides: list[str], draws: Draws, folder: Path) -> tuple:
    """ding_dist's real ``train()`` with its two random sources replaced by ``draws``; returns the initial
    online-network state dict, the trained policy and the run's result."""
    from ding_dist.data.replay import RowRing
    from ding_dist.entry import pipeline
    from ding_dist.entry.loops import data_parallel
    from ding_dist.policy.dqn import DQNPolicy
    from ding_dist.policy.encoders import obs_tensor

    captured: dict = {}
    build = data_parallel.build_policy

    def build_and_keep(*args, **kwargs):
        policy = build(*args, **kwargs)
        captured["policy"], captured["init"] = policy, copy.deepcopy(policy.model.state_dict())
        return policy

    @torch.no_grad()
    def collect_action(self, obs, env_step):
        eps = self.schedule_values(env_step)["train/epsilon"]
        greedy = self.model(obs_tensor(obs, self.obs_space, self.device)).argmax(dim=-1).cpu().numpy()
        out = greedy.copy()
        for i in range(len(out)):
            u, a = draws.explore()
            out[i] = a if u < eps else greedy[i]
        return out, {}

    def draw_n_step(self, batch_size, oldest):
        offset = draws.ranks(self._rows, batch_size)
        return self._n_step_at(oldest, offset, np.zeros(batch_size, dtype=np.int64))

    saved = (data_parallel.build_policy, DQNPolicy.collect_action, RowRing._draw_n_step)
    data_parallel.build_policy, DQNPolicy.collect_action, RowRing._draw_n_step = (
        build_and_keep, collect_action, draw_n_step,
    )  # fmt: skip
    try:
        result = pipeline.train(str(config), seed=seed, overrides=overrides, exp_dir=folder, max_env_steps=steps)
    finally:
        data_parallel.build_policy, DQNPolicy.collect_action, RowRing._draw_n_step = saved
    return captured["init"], captured["policy"], result


def run_sb3(row, spec_kwargs: dict, env_seed: int, steps: int, init: dict, draws: Draws):
    """SB3's real ``DQN.learn()`` from ``init`` with its random sources replaced by ``draws``; returns the model."""
    import stable_baselines3 as sb3
    from stable_baselines3.common.vec_env import DummyVecEnv

    make = parity_sb3._make(row.env, row.max_episode_steps)
    venv = DummyVecEnv([make])
    policy_kwargs = parity_sb3.policy_kwargs(row.ref)
    model = sb3.DQN("MlpPolicy", venv, seed=0, device="cpu", policy_kwargs=policy_kwargs, **spec_kwargs)
    with torch.no_grad():
        for net in (model.q_net, model.q_net_target):
            for dst, src in zip(net.parameters(), init.values(), strict=True):
                dst.copy_(src)
    venv.seed(env_seed)  # the env seed ding_dist's collector used (overrides the model's seed for the first reset)

    sample_action = model._sample_action
    model._sample_action = lambda learning_starts, action_noise=None, n_envs=1: sample_action(0, action_noise, n_envs)
    predict = model.predict

    def eps_greedy(observation, state=None, episode_start=None, deterministic=False):
        if deterministic:
            return predict(observation, state, episode_start, True)
        greedy, state = model.policy.predict(observation, state, episode_start, True)
        eps = model.exploration_schedule(model._current_progress_remaining)
        out = np.array(greedy).copy()
        for i in range(len(out)):
            u, a = draws.explore()
            out[i] = a if u < eps else out[i]
        return out, state

    model.predict = eps_greedy
    buffer = model.replay_buffer

    def sample(batch_size, env=None):
        rows = buffer.buffer_size if buffer.full else buffer.pos
        ranks = draws.ranks(rows, batch_size)
        index = (buffer.pos + ranks) % buffer.buffer_size if buffer.full else ranks
        return buffer._get_samples(index, env=env)

    buffer.sample = sample
    model.learn(total_timesteps=steps)
    return model


def evaluate_both(policy, model, row, config: Path, overrides: list[str], seed: int, episodes: int) -> tuple:
    """The same trained network evaluated greedily by each library's own protocol, as in the parity rows: ding_dist's
    Evaluator (10 envs, episodes from its evaluator seeds) and SB3's ``evaluate_policy`` (one env seeded
    ``seed + 10_000``, episodes in a row). Returns the two lists of episode returns."""
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.vec_env import DummyVecEnv

    from ding_dist.config import load_config
    from ding_dist.envs.env import make_vec_env
    from ding_dist.envs.seeding import env_seeds
    from ding_dist.worker.evaluator import Evaluator

    cfg = load_config(str(config), seed=seed, overrides=overrides)
    venv = make_vec_env(cfg.env, 10, restarting=True)
    ours = Evaluator(venv, policy, episodes, env_seeds(seed, 0, "evaluator", 10)).evaluate()["returns"]
    venv.close()
    env = DummyVecEnv([parity_sb3._make(row.env, row.max_episode_steps)])
    env.seed(seed + 10_000)
    theirs, _ = evaluate_policy(model, env, n_eval_episodes=episodes, deterministic=True, return_episode_rewards=True)
    return ours, list(theirs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--row", default="freeway_dqn", help="a DQN row of bench_parity.py beside SB3")
    parser.add_argument("--steps", type=int, default=20_000, help="env steps of each run")
    parser.add_argument("--buffer", type=int, default=10_000, help="replay size (small: the ring wraps)")
    parser.add_argument("--eps-decay", type=int, default=15_000, help="env steps of the epsilon decay")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-episodes", type=int, default=30, help="episodes of each library's evaluation")
    parser.add_argument(
        "--set",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="extra ding_dist overrides (e.g. policy.learn.double=True: the check must then fail)",
    )
    args = parser.parse_args(argv)
    rows = bench_parity.all_rows()
    if args.row not in rows or rows[args.row].algo != "dqn" or rows[args.row].ref_lib != "sb3":
        raise SystemExit(f"parity_twin_check.py: --row must be a DQN row beside SB3, got {args.row!r}")
    if args.steps < 1 or args.buffer < 1 or args.eps_decay < 1:
        raise SystemExit("parity_twin_check.py: --steps, --buffer and --eps-decay must be >= 1")
    from ding_dist.envs.seeding import env_seeds

    row = rows[args.row]
    learn, eps = row.ours["policy"]["learn"], dict(row.ours["policy"]["other"]["eps"], decay=args.eps_decay)
    probe = parity_sb3._make(row.env, None)()
    n_actions = int(probe.action_space.n)
    probe.close()
    overrides = [
        f"policy.other.replay_buffer.replay_buffer_size={args.buffer}", f"policy.other.eps.decay={args.eps_decay}",
        "env.evaluator_env_num=1", "env.n_evaluator_episode=1", f"policy.eval.eval_freq={10 * args.steps}", *args.set,
    ]  # fmt: skip
    fraction = min(1.0, args.eps_decay / args.steps)
    kwargs = dict(row.ref["kwargs"], buffer_size=args.buffer, exploration_fraction=fraction)
    kwargs["learning_starts"] = learn["learning_starts"] - kwargs["train_freq"]
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / f"{args.row}.config.py"
        config.write_text(bench_parity.ours_config_text(row, row.ours, 1))
        ours_draws, ref_draws = Draws(n_actions, eps), Draws(n_actions, eps)
        init, policy, result = run_ours(config, args.seed, args.steps, overrides, ours_draws, Path(tmp) / "run")
        final = copy.deepcopy(policy.model.state_dict())
        model = run_sb3(row, kwargs, env_seeds(args.seed, 0, "collector", 1)[0], args.steps, init, ref_draws)
        evals = evaluate_both(policy, model, row, config, overrides, args.seed, args.eval_episodes)
    diffs = [(a - b).abs().max().item() for a, b in zip(final.values(), model.q_net.parameters(), strict=True)]
    moved = max((a - b).abs().max().item() for a, b in zip(final.values(), init.values(), strict=True))
    pairs = enumerate(zip(ours_draws.sizes, ref_draws.sizes))
    first = next((k for k, (a, b) in pairs if a != b), None)
    print(f"{args.row}: {args.steps} env steps each, replay {args.buffer}, epsilon decay {args.eps_decay}")
    print(f"ding_dist: {result['train_iters']} updates, {ours_draws.step} exploration draws")
    print(f"SB3:       {model._n_updates} updates, {ref_draws.step} exploration draws")
    print(f"largest parameter change from the initial weights: {moved:.4g}")
    print(f"max |parameter difference| ding_dist vs SB3: {max(diffs):.4g}")
    if first is not None:
        print(f"the replay sizes first differ at update {first + 1}")
    for lib, returns in zip(("ding_dist's Evaluator", "SB3's evaluate_policy"), evals, strict=True):
        sem = np.std(returns, ddof=1) / np.sqrt(len(returns)) if len(returns) > 1 else float("nan")
        print(f"the trained network by {lib}: {np.mean(returns):.2f} +- {sem:.2f} (s.e.m., {len(returns)} episodes)")
    same = max(diffs) == 0.0 and result["train_iters"] == model._n_updates
    print("SAME: the two training loops compute the same run" if same else "DIFFERENT")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
