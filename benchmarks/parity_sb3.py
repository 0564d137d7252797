"""The Stable-Baselines3 side of ``bench_parity.py``: one training run with evaluations at fixed env-step intervals.

Run by the interpreter that holds SB3 (this venv with ``.[bench]``, or the one ``bench_parity.sh`` makes), never
imported by ding_dist. It reads one JSON spec (argv[1]) and writes one JSON result (argv[2]):

    spec: {"env": id, "algo": "ppo"|"dqn"|"sac"|"td3", "kwargs": {...}, "policy_kwargs": {...}, "n_envs": int,
           "normalize": bool, "budget": env steps, "eval_every": env steps, "eval_episodes": int, "seed": int,
           "max_episode_steps": int|null, "minatar_cnn": bool, "t0": epoch seconds the harness started the run}
    result: {"curve": [[env_steps, wall_s, mean_return], ...], "wall_s": ..., "env_steps": ..., "versions": {...}}

Evaluation: ``eval_episodes`` episodes with ``deterministic=True`` (the greedy action, the Gaussian's mean) on a
separate env seeded ``seed + 10_000``; with ``normalize`` the eval env uses the training env's observation
statistics and raw rewards. ``wall_s`` counts from ``t0``: process start-up, training and evaluations.
"""

from __future__ import annotations

import json
import sys
import time

import gymnasium as gym
import numpy as np
import torch
from torch import nn


def _make(env_id: str, max_episode_steps: int | None):
    def thunk():
        if env_id.startswith("MinAtar/"):
            import minatar.gym

            if env_id not in gym.registry:
                minatar.gym.register_envs()
        env = gym.make(env_id, max_episode_steps=max_episode_steps) if max_episode_steps else gym.make(env_id)
        if env_id.startswith("MinAtar/"):  # channels first, uint8 0/1 (ding_dist.envs.minatar does the same)
            h, w, c = env.observation_space.shape
            space = gym.spaces.Box(0, 1, (c, h, w), np.uint8)
            env = gym.wrappers.TransformObservation(env, lambda o: np.moveaxis(o, -1, 0).astype(np.uint8), space)
        return env

    return thunk


def _minatar_cnn():
    from stable_baselines3.common.torch_layers import BaseFeaturesExtractor

    class MinAtarCNN(BaseFeaturesExtractor):
        """The MinAtar paper's network: conv 16 3x3 stride 1, ReLU, linear to 128, ReLU (as ding_dist's)."""

        def __init__(self, observation_space: gym.spaces.Box, features_dim: int = 128) -> None:
            super().__init__(observation_space, features_dim)
            c, h, w = observation_space.shape
            self.net = nn.Sequential(
                nn.Conv2d(c, 16, 3, stride=1), nn.ReLU(), nn.Flatten(), nn.Linear(16 * (h - 2) * (w - 2), features_dim),
                nn.ReLU(),
            )  # fmt: skip

        def forward(self, obs: torch.Tensor) -> torch.Tensor:
            return self.net(obs.float())

    return MinAtarCNN


def policy_kwargs(spec: dict) -> dict:
    """SB3's ``policy_kwargs`` for a spec (or a row's ``ref``): its own, the activation named in it resolved to the
    ``torch.nn`` class, and the MinAtar paper's conv net as features extractor where ``minatar_cnn`` asks for it."""
    out = dict(spec.get("policy_kwargs", {}))
    if "activation_fn" in out:
        out["activation_fn"] = getattr(nn, out["activation_fn"])
    if spec.get("minatar_cnn"):
        out.update(features_extractor_class=_minatar_cnn(), features_extractor_kwargs={"features_dim": 128})
    return out


def main() -> None:
    spec = json.loads(open(sys.argv[1]).read())
    torch.set_num_threads(1)
    import stable_baselines3 as sb3
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.noise import NormalActionNoise
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize, sync_envs_normalization

    make = _make(spec["env"], spec.get("max_episode_steps"))
    venv = DummyVecEnv([make for _ in range(int(spec.get("n_envs", 1)))])
    eval_env = DummyVecEnv([make])
    if spec.get("normalize"):
        venv = VecNormalize(venv, gamma=spec["kwargs"].get("gamma", 0.99))
        eval_env = VecNormalize(eval_env, training=False, norm_reward=False)
    eval_env.seed(int(spec["seed"]) + 10_000)

    kwargs = dict(spec["kwargs"])
    if "noise_std" in kwargs:  # TD3's Gaussian exploration noise, as rl-zoo's noise_type: normal
        n = venv.action_space.shape[0]
        kwargs["action_noise"] = NormalActionNoise(np.zeros(n), kwargs.pop("noise_std") * np.ones(n))
    algo = {"ppo": sb3.PPO, "dqn": sb3.DQN, "sac": sb3.SAC, "td3": sb3.TD3}[spec["algo"]]
    model = algo("MlpPolicy", venv, seed=int(spec["seed"]), device="cpu", policy_kwargs=policy_kwargs(spec), **kwargs)

    curve: list[list[float]] = []
    every, episodes, t0 = int(spec["eval_every"]), int(spec["eval_episodes"]), float(spec["t0"])

    def evaluate() -> None:
        if spec.get("normalize"):
            sync_envs_normalization(venv, eval_env)
        returns, _ = evaluate_policy(model, eval_env, n_eval_episodes=episodes, deterministic=True,
                                     return_episode_rewards=True)  # fmt: skip
        curve.append([model.num_timesteps, time.time() - t0, float(np.mean(returns))])
        print(f"env step {model.num_timesteps}: eval mean return {curve[-1][2]:.2f}", flush=True)

    class Evaluate(BaseCallback):
        """Evaluate once ``every`` env steps have passed: on-policy at the next rollout's start (after the update of
        the rollout that crossed the mark, where ding_dist evaluates too), off-policy at the step that crossed it."""

        def __init__(self) -> None:
            super().__init__()
            self.next = every

        def _due(self) -> None:
            if self.num_timesteps >= self.next:
                self.next += every * (1 + (self.num_timesteps - self.next) // every)
                evaluate()

        def _on_rollout_start(self) -> None:
            if spec["algo"] == "ppo":
                self._due()

        def _on_step(self) -> bool:
            if spec["algo"] != "ppo":
                self._due()
            return True

    model.learn(total_timesteps=int(spec["budget"]), callback=Evaluate())
    if not curve or curve[-1][0] != model.num_timesteps:
        evaluate()  # the final policy, as ding_dist's run ends with an evaluation
    result = {
        "curve": curve,
        "wall_s": time.time() - t0,
        "env_steps": int(model.num_timesteps),
        "versions": {"stable_baselines3": sb3.__version__, "torch": torch.__version__, "gymnasium": gym.__version__},
    }
    with open(sys.argv[2], "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
