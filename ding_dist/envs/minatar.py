"""MinAtar (Young & Tian 2019, the ``minatar`` package: the ``minatar`` extra) through its gymnasium ids.

The package registers ``MinAtar/<Game>-v0`` (all 6 actions) and ``MinAtar/<Game>-v1`` (the game's minimal action
set) for Asterix, Breakout, Freeway, Seaquest and SpaceInvaders only when ``minatar.gym.register_envs()`` is
called; :func:`register_minatar` does that the first time such an id is made. Its observations are ``10x10xC``
boolean grids (channels last, one channel per object kind); :class:`GridChannelsFirst` turns them into ``(C, 10, 10)``
uint8 0/1 grids, the layout torch's convolutions take and
:class:`~ding_dist.policy.encoders.MinAtarCNN` is chosen for. The games keep their defaults: sticky actions with
probability 0.1, difficulty ramping, no time limit (``env.max_episode_steps`` adds one).
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import gymnasium as gym
import numpy as np

__all__ = ["GridChannelsFirst", "is_minatar_id", "register_minatar"]


def is_minatar_id(env_id: str | None) -> bool:
    """Whether ``env_id`` names a MinAtar game (``"MinAtar/Breakout-v1"``).

    Example::

        is_minatar_id("MinAtar/Breakout-v1")  # True
    """
    return isinstance(env_id, str) and env_id.partition(":")[2 if ":" in env_id else 0].startswith("MinAtar/")


def register_minatar() -> None:
    """Register MinAtar's gymnasium ids (once); a missing package is one ValueError line naming the extra.

    Example::

        register_minatar()
        gym.make("MinAtar/Breakout-v1")
    """
    if "MinAtar/Breakout-v1" in gym.registry:
        return
    try:
        with _display_modules_on_first_use():
            import minatar.gym
    except ImportError as e:
        raise ValueError(f"MinAtar ids need the minatar package: pip install 'ding_dist[minatar]' ({e})") from e
    minatar.gym.register_envs()


class _OnFirstUse(types.ModuleType):
    """Stands for a module in another module's globals until one of its attributes is asked for: then the real module
    is imported (once) and answers."""

    def __getattr__(self, attr: str) -> Any:
        return getattr(importlib.import_module(self.__name__), attr)


@contextmanager
def _display_modules_on_first_use() -> Iterator[None]:
    """``minatar`` imports seaborn (and with it pandas) and matplotlib's pyplot at its top for its displays, about as
    long as ``import torch`` itself: while it is imported they are stand-ins, which import the real modules when a
    display or an ``rgb_array`` frame first uses them; afterwards the names are free again, so any other import gets
    the real module."""
    stand_ins = {n: _OnFirstUse(n) for n in ("seaborn", "matplotlib.pyplot") if n not in sys.modules}
    sys.modules.update(stand_ins)
    try:
        yield
    finally:
        for name, module in stand_ins.items():
            if sys.modules.get(name) is module:
                del sys.modules[name]


class GridChannelsFirst(gym.ObservationWrapper):
    """``(H, W, C)`` boolean grids -> ``(C, H, W)`` uint8 0/1 grids.

    Example::

        env = GridChannelsFirst(gym.make("MinAtar/Breakout-v1"))
        env.observation_space.shape  # (4, 10, 10)
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        h, w, c = env.observation_space.shape
        self.observation_space = gym.spaces.Box(0, 1, (c, h, w), np.uint8)

    def observation(self, observation: Any) -> np.ndarray:
        # one copy: the (C, H, W) view of the grid, cast to uint8 into a contiguous array
        return np.ascontiguousarray(np.asarray(observation).transpose(2, 0, 1), dtype=np.uint8)
