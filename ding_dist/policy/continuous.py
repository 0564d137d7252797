"""Pieces the deterministic continuous-action policies share (TD3, DDPG), one place each.

- :class:`DeterministicActor`: ``obs -> tanh(MLP(obs))``, an action in ``[-1, 1]`` (DI-engine's ``regression``
  actor head); it carries ``noise_seed``, the seed of the target-smoothing noise, as a buffer, so
  :meth:`~ding_dist.policy.base.Policy.distribute` gives every rank rank 0's and checkpoints keep it;
- :class:`QCritic`: one ``(obs, action) -> Q`` network (the twin pair is :class:`~ding_dist.policy.sac.TwinQCritic`);
- :func:`gaussian_noise`: clipped Gaussian noise, for exploration (collection) and target policy smoothing;
- :class:`BoxActions`: the affine map of ``[-1, 1]`` onto a Box's finite bounds (DI-engine's ``act_scale``).

Target networks are copied after ``distribute`` and Polyak-averaged with :func:`~ding_dist.policy.base.soft_update`.
"""

from __future__ import annotations

from collections.abc import Sequence

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from ding_dist.policy.base import mlp

__all__ = ["BoxActions", "DeterministicActor", "QCritic", "gaussian_noise"]


class DeterministicActor(nn.Module):
    """``obs -> tanh(MLP(obs))`` in ``[-1, 1]``, shape ``[batch, action_size]``.

    Example::

        actor = DeterministicActor(obs_size=3, action_size=1, hidden_sizes=[64, 64])
        actor(torch.zeros(5, 3)).shape  # (5, 1)
    """

    def __init__(
        self, obs_size: int, action_size: int, hidden_sizes: Sequence[int] = (256, 256), activation: str = "relu"
    ) -> None:
        super().__init__()
        if not hidden_sizes:
            raise ValueError("model.actor_hidden_sizes must name at least one hidden layer, got []")
        self.net = mlp([obs_size, *hidden_sizes, action_size], activation)
        # Drawn from this process's RNG; distribute() replaces it with rank 0's, like the weights.
        self.register_buffer("noise_seed", torch.randint(0, 2**62, (), dtype=torch.int64))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.net(obs))


class QCritic(nn.Module):
    """One Q-network ``(obs, action) -> Q`` of shape ``[batch]``.

    Example::

        critic = QCritic(obs_size=3, action_size=1, hidden_sizes=[64, 64])
        critic(torch.zeros(5, 3), torch.zeros(5, 1)).shape  # (5,)
    """

    def __init__(
        self, obs_size: int, action_size: int, hidden_sizes: Sequence[int] = (256, 256), activation: str = "relu"
    ) -> None:
        super().__init__()
        if not hidden_sizes:
            raise ValueError("model.critic_hidden_sizes must name at least one hidden layer, got []")
        self.q = mlp([obs_size + action_size, *hidden_sizes, 1], activation)

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.q(torch.cat([obs, action], dim=-1)).squeeze(-1)


def gaussian_noise(
    shape: Sequence[int],
    sigma: float,
    clip: tuple[float, float] | None = None,
    generator: torch.Generator | None = None,
    device: str | torch.device = "cpu",
) -> torch.Tensor:
    """``sigma * N(0, 1)`` of ``shape``, clamped to ``clip = (low, high)`` when given; drawn from ``generator``
    (default: the global torch RNG).

    Example::

        noise = gaussian_noise((128, 1), sigma=0.2, clip=(-0.5, 0.5))  # TD3's target policy smoothing
    """
    noise = torch.randn(tuple(shape), generator=generator, device=device) * float(sigma)
    return noise if clip is None else noise.clamp(float(clip[0]), float(clip[1]))


class BoxActions:
    """Actions in ``[-1, 1]`` mapped affinely onto a Box's finite bounds: ``center + scale * a``, clipped.

    Example::

        box = BoxActions(gym.spaces.Box(-2.0, 2.0, (1,)), "TD3")
        box.to_env(np.array([[0.5]], dtype=np.float32))  # [[1.0]]
    """

    def __init__(self, space: gym.Space, algorithm: str) -> None:
        if not isinstance(space, gym.spaces.Box):
            raise ValueError(f"{algorithm} needs a Box action space, got {space}")
        low, high = space.low.astype(np.float64), space.high.astype(np.float64)
        if not (np.isfinite(low).all() and np.isfinite(high).all() and (high > low).all()):
            raise ValueError(f"{algorithm} needs finite action bounds with high > low, got low={low} high={high}")
        self.space = space
        self.shape = space.shape
        self.size = int(np.prod(space.shape))
        self.scale = ((high - low) / 2.0).astype(np.float32)
        self.center = ((high + low) / 2.0).astype(np.float32)

    def to_env(self, action: np.ndarray) -> np.ndarray:
        """``[-1, 1]`` actions (any leading batch shape) onto the bounds."""
        return np.clip(self.center + self.scale * action, self.space.low, self.space.high)
