"""One DQN update of ding_dist beside Stable-Baselines3's, on the same weights and the same batches.

Builds both sides from a ``bench_parity.py`` DQN row (default ``freeway_dqn``), copies ding_dist's online and
target networks into SB3's layer by layer, then feeds the same random MinAtar-shaped batches to
``DQNPolicy.learn`` and to ``DQN.train`` (its replay sample replaced by the batch) and prints the largest parameter
difference every 50 updates: 0.0 means the two updates are the same computation, so a learning gap between the
libraries on that row lies outside the update (replay sampling, collection, evaluation).

Run (SB3 from the ``bench`` extra)::

    python benchmarks/parity_update_check.py --row freeway_dqn --updates 300
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_parity  # noqa: E402
import parity_sb3  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--row", default="freeway_dqn", help="a DQN row of bench_parity.py")
    parser.add_argument("--updates", type=int, default=300)
    args = parser.parse_args(argv)
    rows = bench_parity.all_rows()
    if args.row not in rows or rows[args.row].algo != "dqn" or rows[args.row].ref_lib != "sb3":
        raise SystemExit(f"parity_update_check.py: --row must be a DQN row beside SB3, got {args.row!r}")
    import stable_baselines3 as sb3
    from stable_baselines3.common.logger import configure
    from stable_baselines3.common.type_aliases import ReplayBufferSamples

    from ding_dist.config import load_config
    from ding_dist.policy.dqn import DQNPolicy

    torch.set_num_threads(1)
    row = rows[args.row]
    obs_space, act_space = gym.spaces.Box(0, 1, (7, 10, 10), np.uint8), gym.spaces.Discrete(6)
    with tempfile.TemporaryDirectory() as tmp:  # the row's policy config as its runs compile it
        config = Path(tmp) / f"{args.row}.config.py"
        config.write_text(bench_parity.ours_config_text(row, row.ours, 1))
        cfg = load_config(str(config)).policy
    torch.manual_seed(0)
    ours = DQNPolicy(cfg, obs_space, act_space)

    class Spaces(gym.Env):
        observation_space, action_space = obs_space, act_space

    theirs = sb3.DQN("MlpPolicy", Spaces(), seed=0, device="cpu", policy_kwargs=parity_sb3.policy_kwargs(row.ref),
                     **row.ref["kwargs"])  # fmt: skip
    theirs.set_logger(configure(None, []))
    with torch.no_grad():
        for src, dst in ((ours.model, theirs.q_net), (ours.target_model, theirs.q_net_target)):
            for a, b in zip(src.parameters(), dst.parameters(), strict=True):
                b.copy_(a)
    rng, n, gamma = np.random.default_rng(0), int(cfg.learn.batch_size), float(cfg.discount_factor)
    for step in range(args.updates):
        obs, next_obs = (rng.integers(0, 2, (n, *obs_space.shape)).astype(np.uint8) for _ in range(2))
        action, reward = rng.integers(0, act_space.n, n), rng.integers(0, 2, n).astype(np.float32)
        done = (rng.random(n) < 0.05).astype(np.float32)
        o, o2 = torch.as_tensor(obs), torch.as_tensor(next_obs)
        ours.learn({"obs": o, "next_obs": o2, "action": torch.as_tensor(action), "reward": torch.as_tensor(reward),
                    "discount": torch.as_tensor(gamma * (1 - done))})  # fmt: skip
        batch = ReplayBufferSamples(o.float(), torch.as_tensor(action).view(-1, 1), o2.float(),
                                    torch.as_tensor(done).view(-1, 1), torch.as_tensor(reward).view(-1, 1))  # fmt: skip
        theirs.replay_buffer.sample = lambda *_, b=batch, **__: b
        theirs.train(gradient_steps=1, batch_size=n)
        if step % 50 == 0 or step == args.updates - 1:
            diff = max((a - b).abs().max().item() for a, b in zip(ours.model.parameters(), theirs.q_net.parameters()))
            print(f"update {step + 1}: max |parameter difference| {diff:.3g}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
