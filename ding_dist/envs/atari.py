"""Atari through ``ale-py`` with gymnasium's own preprocessing wrappers.

Wrapper stack, innermost first (all from ``gymnasium.wrappers`` except :class:`LifeLossTerminal` and
:class:`FireReset`)::

    ale_py AtariEnv (frameskip=1)            the raw emulator; frame skipping happens below
    AtariPreprocessing                       no-op reset (<= 30), frame skip 4 with max-pool of the last two
                                             frames, 84x84 grayscale uint8
    TimeLimit               (if configured)  env.max_episode_steps agent steps per game
    RecordEpisodeStatistics                  the true game score: info["episode"]["r"] when the game ends
    LifeLossTerminal        (training only)  terminated=True when a life is lost; the next reset continues the game
    FireReset               (fire_reset)     FIRE after each reset (and lost life) in games that have it
    TransformReward(np.sign) (training only) reward clipping for learning
    FrameStackObservation(4)                 observation (4, 84, 84) uint8

``AtariPreprocessing(terminal_on_life_loss=True)`` is not used: its ``reset`` restarts the whole game after
each lost life, so an "episode" would be one life and the logged return not the game score. The
collector reads the true score from ``info["episode"]`` (recorded below the life-loss and clipping
wrappers); evaluation envs have neither wrapper, so their summed rewards are the game score too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np

__all__ = ["EPISODE_STATS_KEY", "atari_default_config", "is_atari_id", "wrap_atari", "FireReset", "LifeLossTerminal"]

#: ``env.metadata`` key set by :func:`wrap_atari`: episode returns to log are in ``info["episode"]``.
EPISODE_STATS_KEY = "ding_dist.episode_statistics"


def atari_default_config() -> dict[str, Any]:
    """Defaults of ``env.atari`` (the preprocessing of Mnih et al. 2015 as rl-zoo/CleanRL use it).

    Example::

        cfg = atari_default_config()
        cfg["frame_stack"]  # 4
    """
    return {
        "noop_max": 30,
        "frame_skip": 4,
        "screen_size": 84,
        "frame_stack": 4,
        "terminal_on_life_loss": True,  # training envs only
        "clip_reward": True,  # training envs only
        "fire_reset": False,  # FIRE after each reset in games with a FIRE action (DI-engine's, baselines')
    }


def is_atari_id(env_id: str | None) -> bool:
    """Whether ``env_id`` names an ale-py environment (``"ALE/Pong-v5"``, ``"PongNoFrameskip-v4"``).

    Example::

        is_atari_id("ALE/Breakout-v5")  # True
    """
    if not isinstance(env_id, str):
        return False
    if env_id.startswith("ALE/"):
        return True
    spec = gym.registry.get(env_id.partition(":")[2] or env_id)
    return spec is not None and str(spec.entry_point).startswith("ale_py")


def register_ale() -> None:
    """Register ale-py's environments with gymnasium; a clear error when ale-py is missing."""
    try:
        import ale_py
    except ImportError as e:
        raise ValueError("Atari environments need ale-py: pip install -e '.[atari]'") from e
    gym.register_envs(ale_py)


class LifeLossTerminal(gym.Wrapper):
    """``terminated=True`` when the agent loses a life; the following ``reset`` continues the same game.

    Only a real game over (or a truncation) resets the emulator; after a lost life, ``reset`` takes
    one no-op step and returns its observation, so the game score keeps accumulating below this
    wrapper (where :class:`gymnasium.wrappers.RecordEpisodeStatistics` records it).

    Example::

        env = LifeLossTerminal(RecordEpisodeStatistics(AtariPreprocessing(gym.make("ALE/Breakout-v5", frameskip=1))))
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self._lives = 0
        self._game_over = True

    def _ale_lives(self) -> int:
        return int(self.env.unwrapped.ale.lives())

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._game_over = bool(terminated or truncated)
        lives = self._ale_lives()
        life_lost = 0 < lives < self._lives
        self._lives = lives
        return obs, reward, bool(terminated or life_lost), truncated, info

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        if self._game_over or seed is not None:
            obs, info = self.env.reset(seed=seed, options=options)
        else:  # a lost life: continue the game with one no-op step
            obs, _, terminated, truncated, info = self.env.step(0)
            if terminated or truncated:
                obs, info = self.env.reset(options=options)
        self._game_over = False
        self._lives = self._ale_lives()
        return obs, info


class FireReset(gym.Wrapper):
    """After each ``reset``, one FIRE step (action 1) in games whose action set has FIRE (the game starts on it).

    Above :class:`LifeLossTerminal`, so a game continued after a lost life is fired again, as DI-engine's and
    baselines' ``FireResetWrapper`` do; a game the FIRE step ends is reset once more.

    Example::

        env = FireReset(wrap_atari(gym.make("ALE/Breakout-v5", frameskip=1)))
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        meanings = env.unwrapped.get_action_meanings()
        self.fire = len(meanings) >= 3 and meanings[1] == "FIRE"

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        obs, info = self.env.reset(seed=seed, options=options)
        if self.fire:
            obs, _, terminated, truncated, info = self.env.step(1)
            if terminated or truncated:
                obs, info = self.env.reset(options=options)
        return obs, info


def wrap_atari(
    env: gym.Env,
    options: Mapping[str, Any] | None = None,
    *,
    training: bool = False,
    max_episode_steps: int | None = None,
) -> gym.Env:
    """Apply the Atari preprocessing to a raw ale-py env built with ``frameskip=1``.

    ``options`` overrides :func:`atari_default_config`; ``training`` adds life-loss termination and
    reward clipping (when enabled in ``options``); ``fire_reset`` a FIRE step after each reset;
    ``max_episode_steps`` truncates a game after that many agent steps (each ``frame_skip`` emulator frames;
    None: the emulator's own limit). Observation:
    ``(frame_stack, 84, 84)`` uint8.

    Example::

        env = wrap_atari(gym.make("ALE/Pong-v5", frameskip=1), training=True)
        env.observation_space  # Box(0, 255, (4, 84, 84), uint8)
    """
    opts = atari_default_config()
    unknown = set(options or {}) - set(opts)
    if unknown:
        raise ValueError(f"unknown env.atari keys {sorted(unknown)}; valid: {sorted(opts)}")
    opts.update(options or {})
    env = gym.wrappers.AtariPreprocessing(
        env,
        noop_max=int(opts["noop_max"]),
        frame_skip=int(opts["frame_skip"]),
        screen_size=int(opts["screen_size"]),
        terminal_on_life_loss=False,  # see the module docstring; LifeLossTerminal below instead
        grayscale_obs=True,
    )
    if max_episode_steps is not None:  # below the life-loss wrapper: the count runs over the whole game
        env = gym.wrappers.TimeLimit(env, max_episode_steps=int(max_episode_steps))
    env = gym.wrappers.RecordEpisodeStatistics(env)
    if training and opts["terminal_on_life_loss"]:
        env = LifeLossTerminal(env)
    if opts["fire_reset"]:
        env = FireReset(env)
    if training and opts["clip_reward"]:
        env = gym.wrappers.TransformReward(env, lambda r: float(np.sign(r)))
    if int(opts["frame_stack"]) > 1:
        env = gym.wrappers.FrameStackObservation(env, stack_size=int(opts["frame_stack"]))
    # Vector envs copy this: the collector then logs info["episode"] (game scores) instead of summed rewards.
    env.metadata = {**env.metadata, EPISODE_STATS_KEY: True}
    return env
