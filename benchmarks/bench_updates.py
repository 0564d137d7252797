"""Updates alone: ding_dist's policy update beside Stable-Baselines3's same update and beside the plain compute floor.

For each row (the sizes of a ``bench_parity.py`` row) every side updates from random data already in memory, so
the figures hold the update and nothing else (no env, no acting, no replay sampling):

- ``ours``: the row's policy built from its parity config, driven by :class:`ding_dist.worker.learner.Learner` as
  the training loops drive it (``train_replay`` on prepared batches, ``train_rollout`` on a prepared rollout), its
  statistics read back once per round as at a log point;
- ``sb3``: SB3's model of the row built on the same spaces, its ``train()`` called as its parity run calls it
  (SAC and TD3: one gradient step per call; DQN: 4 per call; PPO: GAE on a filled rollout buffer, then ``train()``),
  its replay sample replaced by the prepared batches (skipped when SB3 is not installed: ``pip install -e
  '.[bench]'``);
- ``floor``: the same networks' forward, backward and Adam step written plainly in this file (``torch.optim.Adam``
  with its defaults, one ``nn.Sequential`` per network, no statistics kept): the compute an update cannot avoid.

Rows: ``hopper_sac`` (batch 256, 256-256 networks), ``hopper_td3`` (batch 256, 400-300), ``breakout_dqn`` (MinAtar,
batch 32), ``spaceinvaders_ppo`` (MinAtar, a rollout of 64 x 128, 4 epochs of 8 minibatches of 1,024), ``pong_ppo``
(Nature CNN, a rollout of 8 x 128, 4 epochs of 4 minibatches of 256; slow on a CPU, so not in the default set).
The sides run interleaved (a round times each side once, in a rotating order) on one torch thread; each figure is
the median over the rounds, in updates per second (PPO: gradient steps per second) and as ratios.

Run::

    python benchmarks/bench_updates.py                                   # default rows, 11 rounds
    python benchmarks/bench_updates.py --rows hopper_sac,breakout_dqn --rounds 9
    python benchmarks/bench_updates.py --rows hopper_sac --compile      # also ours with learn.compile=True
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_parity  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
HOPPER = (gym.spaces.Box(-np.inf, np.inf, (11,), np.float64), gym.spaces.Box(-1.0, 1.0, (3,), np.float32))
BREAKOUT = (gym.spaces.Box(0, 1, (4, 10, 10), np.uint8), gym.spaces.Discrete(3))
SPACEINVADERS = (gym.spaces.Box(0, 1, (6, 10, 10), np.uint8), gym.spaces.Discrete(4))
PONG = (gym.spaces.Box(0, 255, (4, 84, 84), np.uint8), gym.spaces.Discrete(6))
N_BATCHES = 8  # distinct random batches each side cycles through


@dataclass
class Side:
    """One side of a row: ``run()`` does ``updates`` gradient steps (the unit a round times); ``prepare()``, when
    given, runs untimed before each ``run()`` (SB3's rollout buffer is filled by its collection)."""

    name: str
    run: Callable[[], Any]
    updates: int
    prepare: Callable[[], Any] | None = None


# --- random data ----------------------------------------------------------------------------------------------------
def _obs(rng: np.random.Generator, space: gym.spaces.Box, n: int) -> np.ndarray:
    if space.dtype == np.uint8:
        high = int(space.high.max())
        return rng.integers(0, high + 1, (n, *space.shape), dtype=np.uint8)
    return rng.standard_normal((n, *space.shape)).astype(np.float32)


def _actions(rng: np.random.Generator, space: gym.Space, n: int) -> np.ndarray:
    if isinstance(space, gym.spaces.Discrete):
        return rng.integers(0, space.n, n)
    return rng.uniform(-1.0, 1.0, (n, *space.shape)).astype(np.float32)


def replay_batches(spaces: tuple[gym.Space, gym.Space], batch: int, gamma: float, seed: int = 0) -> list[dict]:
    """``N_BATCHES`` replay batches as numpy arrays: obs, action, reward, next_obs, done, discount."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(N_BATCHES):
        done = (rng.random(batch) < 0.02).astype(np.float32)
        out.append({"obs": _obs(rng, spaces[0], batch), "next_obs": _obs(rng, spaces[0], batch),
                    "action": _actions(rng, spaces[1], batch), "reward": rng.standard_normal(batch).astype(np.float32),
                    "done": done, "discount": (gamma * (1.0 - done)).astype(np.float32)})  # fmt: skip
    return out


def rollouts(spaces: tuple[gym.Space, gym.Space], steps: int, envs: int, seed: int = 0) -> list[dict]:
    """Two random rollouts ``[steps, envs, ...]`` in the collector's layout."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(2):
        out.append({"obs": _obs(rng, spaces[0], steps * envs).reshape(steps, envs, *spaces[0].shape),
                    "action": _actions(rng, spaces[1], steps * envs).reshape(steps, envs),
                    "logp": (-rng.random((steps, envs)) * 2).astype(np.float32),
                    "value": rng.standard_normal((steps, envs)).astype(np.float32),
                    "reward": (rng.random((steps, envs)) < 0.05).astype(np.float32),
                    "terminated": rng.random((steps, envs)) < 0.005, "truncated": np.zeros((steps, envs), bool),
                    "last_obs": _obs(rng, spaces[0], envs)})  # fmt: skip
    return out


# --- ours -----------------------------------------------------------------------------------------------------------
class _Batches:
    """A stand-in replay that hands out prepared batches (tensors), in turn."""

    def __init__(self, batches: list[dict], keys: tuple[str, ...]) -> None:
        self.batches = [{k: torch.as_tensor(b[k]) for k in keys} for b in batches]
        self.i = 0

    def sample(self, n: int, device: Any = None) -> dict:
        self.i = (self.i + 1) % len(self.batches)
        return self.batches[self.i]


def _policy_cfg(row: bench_parity.Row, compile_: bool) -> Any:
    from ding_dist.config import load_config

    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / f"{row.name}.config.py"
        config.write_text(bench_parity.ours_config_text(row, row.ours, 1))
        cfg = load_config(str(config)).policy
    cfg.device = "cpu"
    if compile_:
        cfg.learn.compile = True
    return cfg


def ours_replay(row: bench_parity.Row, spaces: tuple, cls: type, updates: int, compile_: bool = False) -> Side:
    from ding_dist.worker.learner import Learner, reduce_log

    cfg = _policy_cfg(row, compile_)
    torch.manual_seed(0)
    policy = cls(cfg, *spaces)
    learner = Learner(policy)
    batches = _Batches(replay_batches(spaces, int(cfg.learn.batch_size), float(cfg.discount_factor)),
                       ("obs", "next_obs", "action", "reward", "discount"))  # fmt: skip

    def run() -> None:
        learner.train_replay(batches, n_updates=updates, rank_batch=int(cfg.learn.batch_size))
        reduce_log({}, learner.pop_stats())  # the log point's one host read

    return Side("ours+compile" if compile_ else "ours", run, updates)


def ours_rollout(row_or_cfg: Any, spaces: tuple, steps: int, envs: int, compile_: bool = False) -> Side:
    from ding_dist.policy.ppo import PPOPolicy
    from ding_dist.worker.learner import Learner, reduce_log

    cfg = _policy_cfg(row_or_cfg, compile_) if isinstance(row_or_cfg, bench_parity.Row) else row_or_cfg
    torch.manual_seed(0)
    policy = PPOPolicy(cfg, *spaces)
    learner = Learner(policy)
    data = rollouts(spaces, steps, envs)
    state = {"i": 0}
    n_minibatch = (steps * envs) // int(cfg.learn.batch_size)

    def run() -> None:
        state["i"] ^= 1
        learner.train_rollout(data[state["i"]])
        reduce_log({}, learner.pop_stats())

    return Side("ours+compile" if compile_ else "ours", run, n_minibatch * int(cfg.learn.epoch_per_collect))


# --- SB3 ------------------------------------------------------------------------------------------------------------
def _spaces_env(spaces: tuple) -> Callable[[], gym.Env]:
    class Spaces(gym.Env):
        observation_space, action_space = spaces

        def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple:
            return self.observation_space.sample(), {}

        def step(self, action: Any) -> tuple:
            return self.observation_space.sample(), 0.0, False, False, {}

    return Spaces


def _sb3_model(algo: str, row_ref: dict, spaces: tuple, n_envs: int = 1, policy: str = "MlpPolicy") -> Any:
    import parity_sb3
    import stable_baselines3 as sb3
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.logger import configure

    env = make_vec_env(_spaces_env(spaces), n_envs=n_envs)
    kwargs = dict(row_ref.get("kwargs", {}))
    kwargs.pop("noise_std", None)  # parity_sb3's exploration-noise shorthand: acting only, not the update
    if algo != "ppo":
        kwargs.update(learning_starts=0, buffer_size=10_000)  # train() is called directly; a small buffer suffices
    cls = getattr(sb3, algo.upper())
    model = cls(policy, env, seed=0, device="cpu", policy_kwargs=parity_sb3.policy_kwargs(row_ref), **kwargs)
    model.set_logger(configure(None, []))
    return model


def sb3_replay(row: bench_parity.Row, spaces: tuple, per_call: int, calls: int) -> Side:
    from stable_baselines3.common.type_aliases import ReplayBufferSamples

    model = _sb3_model(row.algo, row.ref, spaces)
    batch = int(model.batch_size)
    samples = []
    for b in replay_batches(spaces, batch, float(model.gamma)):
        obs, next_obs = torch.as_tensor(b["obs"]).float(), torch.as_tensor(b["next_obs"]).float()
        action = torch.as_tensor(b["action"]).reshape(batch, -1)
        samples.append(ReplayBufferSamples(obs, action.float() if row.algo != "dqn" else action, next_obs,
                                           torch.as_tensor(b["done"]).view(-1, 1),
                                           torch.as_tensor(b["reward"]).view(-1, 1)))  # fmt: skip
    state = {"i": 0}

    def sample(*_: Any, **__: Any) -> Any:
        state["i"] = (state["i"] + 1) % len(samples)
        return samples[state["i"]]

    model.replay_buffer.sample = sample

    def run() -> None:
        for _ in range(calls):
            model.train(gradient_steps=per_call, batch_size=batch)

    return Side("sb3", run, per_call * calls)


def sb3_rollout(ref: dict, spaces: tuple, steps: int, envs: int, policy: str = "MlpPolicy") -> Side:
    model = _sb3_model("ppo", ref, spaces, n_envs=envs, policy=policy)
    data = rollouts(spaces, steps, envs)
    state = {"i": 0}

    def fill() -> None:  # the collection's part, not timed
        state["i"] ^= 1
        d, buf = data[state["i"]], model.rollout_buffer
        buf.reset()
        for t in range(steps):
            buf.add(d["obs"][t], d["action"][t].reshape(envs, 1), d["reward"][t], d["terminated"][t].astype(np.float32),
                    torch.as_tensor(d["value"][t]), torch.as_tensor(d["logp"][t]))  # fmt: skip

    def run() -> None:
        with torch.no_grad():
            last = model.policy.predict_values(torch.as_tensor(data[state["i"]]["last_obs"]).float())
        model.rollout_buffer.compute_returns_and_advantage(last_values=last, dones=np.zeros(envs, np.float32))
        model.train()

    return Side("sb3", run, (steps * envs // int(model.batch_size)) * int(model.n_epochs), prepare=fill)


# --- the floor: the same networks and losses, written plainly --------------------------------------------------------
def _mlp(sizes: list[int], out_act: bool = False) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2 or out_act:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def _soft(target: nn.Module, source: nn.Module, tau: float) -> None:
    with torch.no_grad():
        torch._foreach_lerp_(list(target.parameters()), list(source.parameters()), tau)


def _tensor_batches(spaces: tuple, batch: int) -> list[dict]:
    """The replay batches of the rows as tensors, for the plain floors."""
    return [{k: torch.as_tensor(v) for k, v in b.items()} for b in replay_batches(spaces, batch, 0.99)]


def floor_sac(spaces: tuple, batch: int, hidden: list[int], updates: int, lr: float = 3e-4) -> Side:
    n_obs, n_act = int(np.prod(spaces[0].shape)), int(np.prod(spaces[1].shape))
    torch.manual_seed(0)
    actor = _mlp([n_obs, *hidden, 2 * n_act])
    q1, q2 = _mlp([n_obs + n_act, *hidden, 1]), _mlp([n_obs + n_act, *hidden, 1])
    q1_t, q2_t = copy.deepcopy(q1), copy.deepcopy(q2)
    log_alpha = torch.zeros((), requires_grad=True)
    opt_a, opt_q = torch.optim.Adam(actor.parameters(), lr), torch.optim.Adam([*q1.parameters(), *q2.parameters()], lr)
    opt_alpha = torch.optim.Adam([log_alpha], lr)
    data = _tensor_batches(spaces, batch)

    def sample(obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean, log_std = actor(obs).chunk(2, -1)
        log_std = log_std.clamp(-5, 2)
        u = mean + log_std.exp() * torch.randn_like(mean)
        gaussian = (-0.5 * ((u - mean) / log_std.exp()) ** 2 - log_std).sum(-1)
        logp = gaussian - (2 * (np.log(2) - u - F.softplus(-2 * u))).sum(-1)
        return torch.tanh(u), logp

    def run() -> None:
        for i in range(updates):
            b = data[i % len(data)]
            alpha = log_alpha.detach().exp()
            with torch.no_grad():
                a2, logp2 = sample(b["next_obs"])
                x2 = torch.cat([b["next_obs"], a2], -1)
                y = b["reward"] + b["discount"] * (torch.min(q1_t(x2), q2_t(x2)).squeeze(-1) - alpha * logp2)
            x = torch.cat([b["obs"], b["action"]], -1)
            loss_q = F.mse_loss(q1(x).squeeze(-1), y) + F.mse_loss(q2(x).squeeze(-1), y)
            opt_q.zero_grad()
            loss_q.backward()
            opt_q.step()
            a, logp = sample(b["obs"])
            xa = torch.cat([b["obs"], a], -1)
            loss_pi = (alpha * logp - torch.min(q1(xa), q2(xa)).squeeze(-1)).mean()
            opt_a.zero_grad()
            loss_pi.backward()
            opt_a.step()
            loss_alpha = -(log_alpha * (logp.detach() - n_act)).mean()
            opt_alpha.zero_grad()
            loss_alpha.backward()
            opt_alpha.step()
            _soft(q1_t, q1, 0.005)
            _soft(q2_t, q2, 0.005)

    return Side("floor", run, updates)


def floor_td3(spaces: tuple, batch: int, hidden: list[int], updates: int, lr: float = 1e-3) -> Side:
    n_obs, n_act = int(np.prod(spaces[0].shape)), int(np.prod(spaces[1].shape))
    torch.manual_seed(0)
    actor = nn.Sequential(_mlp([n_obs, *hidden, n_act]), nn.Tanh())
    q1, q2 = _mlp([n_obs + n_act, *hidden, 1]), _mlp([n_obs + n_act, *hidden, 1])
    actor_t, q1_t, q2_t = copy.deepcopy(actor), copy.deepcopy(q1), copy.deepcopy(q2)
    opt_a, opt_q = torch.optim.Adam(actor.parameters(), lr), torch.optim.Adam([*q1.parameters(), *q2.parameters()], lr)
    data, it = _tensor_batches(spaces, batch), {"n": 0}

    def run() -> None:
        for i in range(updates):
            b = data[i % len(data)]
            with torch.no_grad():
                a2 = (actor_t(b["next_obs"]) + (0.2 * torch.randn(batch, n_act)).clamp(-0.5, 0.5)).clamp(-1, 1)
                x2 = torch.cat([b["next_obs"], a2], -1)
                y = b["reward"] + b["discount"] * torch.min(q1_t(x2), q2_t(x2)).squeeze(-1)
            x = torch.cat([b["obs"], b["action"]], -1)
            loss_q = F.mse_loss(q1(x).squeeze(-1), y) + F.mse_loss(q2(x).squeeze(-1), y)
            opt_q.zero_grad()
            loss_q.backward()
            opt_q.step()
            it["n"] += 1
            if it["n"] % 2 == 0:
                for p in q1.parameters():
                    p.requires_grad_(False)
                loss_pi = -q1(torch.cat([b["obs"], actor(b["obs"])], -1)).mean()
                opt_a.zero_grad()
                loss_pi.backward()
                opt_a.step()
                for p in q1.parameters():
                    p.requires_grad_(True)
            _soft(actor_t, actor, 0.005)
            _soft(q1_t, q1, 0.005)
            _soft(q2_t, q2, 0.005)

    return Side("floor", run, updates)


def _minatar_net(c: int, n_out: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(c, 16, 3), nn.ReLU(), nn.Flatten(), nn.Linear(16 * 8 * 8, 128), nn.ReLU(),
                         nn.Linear(128, n_out))  # fmt: skip


def floor_dqn(spaces: tuple, batch: int, updates: int, lr: float = 2.5e-4) -> Side:
    torch.manual_seed(0)
    net = _minatar_net(spaces[0].shape[0], int(spaces[1].n))
    target = copy.deepcopy(net)
    opt = torch.optim.Adam(net.parameters(), lr)
    data, it = _tensor_batches(spaces, batch), {"n": 0}

    def run() -> None:
        for i in range(updates):
            b = data[i % len(data)]
            with torch.no_grad():
                y = b["reward"] + b["discount"] * target(b["next_obs"].float()).max(-1).values
            q = net(b["obs"].float()).gather(1, b["action"].view(-1, 1)).squeeze(1)
            loss = F.smooth_l1_loss(q, y)
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(net.parameters(), 10.0)
            opt.step()
            it["n"] += 1
            if it["n"] % 1000 == 0:
                target.load_state_dict(net.state_dict())

    return Side("floor", run, updates)


def floor_ppo(spaces: tuple, steps: int, envs: int, batch: int, epochs: int, lr: float, image: bool) -> Side:
    torch.manual_seed(0)
    c, n_act = spaces[0].shape[0], int(spaces[1].n)
    if image:
        convs = [nn.Conv2d(c, 32, 8, 4), nn.ReLU(), nn.Conv2d(32, 64, 4, 2), nn.ReLU(), nn.Conv2d(64, 64, 3, 1)]
        trunk = nn.Sequential(*convs, nn.ReLU(), nn.Flatten(), nn.Linear(3136, 512), nn.ReLU())
        width, scale = 512, 1.0 / 255.0
    else:
        trunk = nn.Sequential(nn.Conv2d(c, 16, 3), nn.ReLU(), nn.Flatten(), nn.Linear(1024, 128), nn.ReLU())
        width, scale = 128, 1.0
    heads = nn.Linear(width, n_act + 1)
    params = [*trunk.parameters(), *heads.parameters()]
    opt = torch.optim.Adam(params, lr, eps=1e-5)
    data = rollouts(spaces, steps, envs)
    state = {"i": 0}

    def forward(obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = heads(trunk(obs.float() * scale))
        return out[:, :n_act], out[:, n_act]

    def run() -> None:
        state["i"] ^= 1
        d = data[state["i"]]
        with torch.no_grad():
            last_v = forward(torch.as_tensor(d["last_obs"]))[1].numpy()
        adv = np.zeros((steps, envs), np.float32)
        running = np.zeros(envs, np.float32)
        not_done = 1.0 - d["terminated"].astype(np.float32)
        for t in reversed(range(steps)):
            nv = last_v if t == steps - 1 else d["value"][t + 1]
            delta = d["reward"][t] + 0.99 * nv * not_done[t] - d["value"][t]
            running = delta + 0.99 * 0.95 * not_done[t] * running
            adv[t] = running
        obs = torch.as_tensor(d["obs"].reshape(steps * envs, *spaces[0].shape))
        act = torch.as_tensor(d["action"].reshape(-1))
        old_logp, adv_t = torch.as_tensor(d["logp"].reshape(-1)), torch.as_tensor(adv.reshape(-1))
        ret = adv_t + torch.as_tensor(d["value"].reshape(-1))
        for _ in range(epochs):
            order = torch.randperm(steps * envs)
            for k in range(steps * envs // batch):
                idx = order[k * batch : (k + 1) * batch]
                logits, v = forward(obs[idx])
                logp_all = logits.log_softmax(-1)
                logp = logp_all.gather(1, act[idx].view(-1, 1)).squeeze(1)
                entropy = -(logp_all.exp() * logp_all).sum(-1).mean()
                a = adv_t[idx]
                a = (a - a.mean()) / (a.std() + 1e-8)
                ratio = (logp - old_logp[idx]).exp()
                pg = -torch.min(ratio * a, ratio.clamp(0.8, 1.2) * a).mean()
                loss = pg + 0.5 * 0.5 * ((v - ret[idx]) ** 2).mean() - 0.01 * entropy
                opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(params, 0.5)
                opt.step()

    return Side("floor", run, (steps * envs // batch) * epochs)


# --- the rows -------------------------------------------------------------------------------------------------------
def build(name: str, sb3: bool, compile_: bool) -> list[Side]:
    rows = bench_parity.all_rows()
    sides: list[Side] = []
    if name in ("hopper_sac", "hopper_td3"):
        from ding_dist.policy.sac import SACPolicy
        from ding_dist.policy.td3 import TD3Policy

        row = rows[name]
        cls = SACPolicy if row.algo == "sac" else TD3Policy
        hidden = list(row.ours["policy"]["model"]["critic_hidden_sizes"])
        sides.append(ours_replay(row, HOPPER, cls, 16))
        if compile_:
            sides.append(ours_replay(row, HOPPER, cls, 16, compile_=True))
        if sb3:
            sides.append(sb3_replay(row, HOPPER, per_call=1, calls=16))
        sides.append(floor_sac(HOPPER, 256, hidden, 16) if row.algo == "sac" else floor_td3(HOPPER, 256, hidden, 16))
    elif name == "breakout_dqn":
        from ding_dist.policy.dqn import DQNPolicy

        row = rows[name]
        sides.append(ours_replay(row, BREAKOUT, DQNPolicy, 64))
        if compile_:
            sides.append(ours_replay(row, BREAKOUT, DQNPolicy, 64, compile_=True))
        if sb3:
            sides.append(sb3_replay(row, BREAKOUT, per_call=4, calls=16))
        sides.append(floor_dqn(BREAKOUT, 32, 64))
    elif name == "spaceinvaders_ppo":
        row = rows[name]
        sides.append(ours_rollout(row, SPACEINVADERS, 128, 64))
        if compile_:
            sides.append(ours_rollout(row, SPACEINVADERS, 128, 64, compile_=True))
        if sb3:
            sides.append(sb3_rollout(row.ref, SPACEINVADERS, 128, 64))
        sides.append(floor_ppo(SPACEINVADERS, 128, 64, 1024, 4, 5e-4, image=False))
    elif name == "pong_ppo":
        from ding_dist.config import load_config

        cfg = load_config(str(ROOT / "configs" / "pong_ppo_config.py")).policy
        cfg.device = "cpu"
        sides.append(ours_rollout(cfg, PONG, 128, 8))
        if compile_:
            ccfg = copy.deepcopy(cfg)
            ccfg.learn.compile = True
            sides.append(ours_rollout(ccfg, PONG, 128, 8, compile_=True))
        if sb3:
            ref = {"kwargs": dict(n_steps=128, batch_size=256, n_epochs=4, learning_rate=2.5e-4, gamma=0.99,
                                  gae_lambda=0.95, clip_range=0.1, clip_range_vf=0.1, ent_coef=0.01, vf_coef=0.5,
                                  max_grad_norm=0.5)}  # fmt: skip
            sides.append(sb3_rollout(ref, PONG, 128, 8, policy="CnnPolicy"))
        sides.append(floor_ppo(PONG, 128, 8, 256, 4, 2.5e-4, image=True))
    else:
        raise SystemExit(f"bench_updates.py: unknown row {name!r}; rows: {', '.join(ROWS)}")
    return sides


ROWS = ("hopper_sac", "hopper_td3", "breakout_dqn", "spaceinvaders_ppo", "pong_ppo")
DEFAULT_ROWS = ("hopper_sac", "hopper_td3", "breakout_dqn", "spaceinvaders_ppo")


def measure(sides: list[Side], rounds: int) -> dict[str, dict[str, list[float]]]:
    """Seconds per gradient step of each side in each of ``rounds`` interleaved rounds (after one warm-up), as wall
    time and as the CPU time of this thread (which time-slicing with other processes does not inflate)."""
    for s in sides:
        if s.prepare is not None:
            s.prepare()
        s.run()  # warm-up (and compilation, where asked)
    times: dict[str, dict[str, list[float]]] = {s.name: {"wall": [], "cpu": []} for s in sides}
    for r in range(rounds):
        order = sides[r % len(sides) :] + sides[: r % len(sides)]
        for s in order:
            if s.prepare is not None:
                s.prepare()
            w0, c0 = time.perf_counter(), time.thread_time()
            s.run()
            times[s.name]["cpu"].append((time.thread_time() - c0) / s.updates)
            times[s.name]["wall"].append((time.perf_counter() - w0) / s.updates)
    return times


def _table_row(name: str, per: dict[str, float], compiled: bool) -> str:
    rate = {k: 1.0 / v for k, v in per.items()}
    cells = [f"{rate['ours']:13.1f}", f"{rate['sb3']:13.1f}" if "sb3" in rate else f"{'-':>13}",
             f"{rate['floor']:13.1f}", f"{per['sb3'] / per['ours']:13.2f}" if "sb3" in per else f"{'-':>13}",
             f"{per['floor'] / per['ours']:13.2f}"]  # fmt: skip
    if compiled:
        cells += [f"{rate['ours+compile']:13.1f}", f"{per['ours'] / per['ours+compile']:15.2f}"]
    return f"{name:<24}" + "".join(cells)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default=",".join(DEFAULT_ROWS), help=f"comma-separated, of: {', '.join(ROWS)}")
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the parity runs use 1)")
    parser.add_argument("--compile", action="store_true", help="also time ours with policy.learn.compile=True")
    parser.add_argument("--no-sb3", action="store_true", help="leave SB3 out even where it is installed")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    try:
        import stable_baselines3  # noqa: F401

        sb3 = not args.no_sb3
    except ImportError:
        sb3 = False
        print("stable-baselines3 is not installed: its column is left out (pip install -e '.[bench]')")
    print(f"torch {torch.__version__}, {args.threads} thread(s), {args.rounds} interleaved rounds, medians")
    header = f"{'row (clock)':<24}" + "".join(
        f"{c:>13}" for c in ("ours/s", "sb3/s", "floor/s", "sb3/ours", "floor/ours")
    )
    if args.compile:
        header += f"{'compiled/s':>13}{'compiled/ours':>15}"
    print(header)
    for name in args.rows.split(","):
        times = measure(build(name.strip(), sb3, args.compile), args.rounds)
        for clock in ("cpu", "wall"):
            per = {k: statistics.median(v[clock]) for k, v in times.items()}
            print(_table_row(f"{name} ({clock})", per, args.compile), flush=True)
        spread = ", ".join(f"{k} {1e3 * min(v['wall']):.1f}-{1e3 * max(v['wall']):.1f}" for k, v in times.items())
        print(f"{'':<24}wall ms per step over the rounds: {spread}", flush=True)
    print("ours/s, sb3/s, floor/s: gradient steps per second; sb3/ours, floor/ours: that side's time per step over")
    print("ours (above 1: ours is faster); cpu: this thread's CPU time, wall: wall-clock time (both medians)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
