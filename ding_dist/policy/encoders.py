"""Observation encoders chosen from the observation space: Nature-CNN for images, the MinAtar network for small
0/1 grids, flat vectors otherwise.

Images (a uint8 ``Box`` of shape ``(C, H, W)``, e.g. 4 stacked 84x84 Atari frames) stay uint8 on the
wire and in memory (rollouts, replay); :class:`NatureCNN` converts them to float and scales them by
1/255 on the policy's device, inside ``forward``. Grids (a uint8 or bool ``Box`` ``(C, H, W)`` of 0/1 values,
channels first, e.g. MinAtar's ``(4, 10, 10)`` as :mod:`ding_dist.envs.minatar` makes them) stay uint8 too;
:class:`MinAtarCNN` converts them to float unscaled. :func:`conv_encoder` picks the one for a space.
"""

from __future__ import annotations

from collections.abc import Sequence

import gymnasium as gym
import numpy as np
import torch
from torch import nn

__all__ = [
    "MinAtarCNN",
    "NatureCNN",
    "conv_channels",
    "conv_encoder",
    "is_conv_space",
    "is_grid_space",
    "is_image_space",
    "obs_tensor",
]


def is_image_space(space: gym.Space) -> bool:
    """Whether ``space`` is a channels-first uint8 image ``Box`` ``(C, H, W)`` (H, W >= 36).

    Example::

        is_image_space(gym.spaces.Box(0, 255, (4, 84, 84), np.uint8))  # True
    """
    return (
        isinstance(space, gym.spaces.Box)
        and space.dtype == np.uint8
        and len(space.shape) == 3
        and min(space.shape[1:]) >= 36
    )


def is_grid_space(space: gym.Space) -> bool:
    """Whether ``space`` is a channels-first 0/1 grid ``Box`` ``(C, H, W)`` (uint8 or bool, high 1, H, W < 36).

    Example::

        is_grid_space(gym.spaces.Box(0, 1, (4, 10, 10), np.uint8))  # True: MinAtar Breakout
    """
    return (
        isinstance(space, gym.spaces.Box)
        and space.dtype in (np.uint8, np.bool_)
        and len(space.shape) == 3
        and min(space.shape[1:]) < 36
        and int(np.max(space.high)) == 1
    )


def is_conv_space(space: gym.Space) -> bool:
    """Whether ``space`` gets a convolutional encoder (:func:`is_image_space` or :func:`is_grid_space`).

    Example::

        is_conv_space(gym.spaces.Box(-1, 1, (4,)))  # False
    """
    return is_image_space(space) or is_grid_space(space)


def obs_tensor(obs: np.ndarray, space: gym.Space, device: torch.device | str) -> torch.Tensor:
    """Observations as a tensor on ``device``: uint8 for image and grid spaces (floated in the encoder), else float32.

    Example::

        x = obs_tensor(obs, venv.single_observation_space, "cpu")
    """
    return torch.as_tensor(obs, dtype=_obs_dtype(space), device=device)


_OBS_DTYPES: dict[int, tuple[gym.Space, torch.dtype]] = {}  # id(space) -> (space, dtype): acting asks every step


def _obs_dtype(space: gym.Space) -> torch.dtype:
    """:func:`obs_tensor`'s dtype for ``space``, decided once per space object (the space is held, so its id stays
    its own)."""
    known = _OBS_DTYPES.get(id(space))
    if known is not None and known[0] is space:
        return known[1]
    dtype = torch.uint8 if is_conv_space(space) else torch.float32
    if len(_OBS_DTYPES) >= 256:
        _OBS_DTYPES.clear()
    _OBS_DTYPES[id(space)] = (space, dtype)
    return dtype


def conv_channels(channels: Sequence[int] | None) -> tuple[int, int, int]:
    """``model.conv_channels`` checked: three positive ints (None: the Nature CNN's 32, 64, 64).

    Example::

        conv_channels(None)  # (32, 64, 64)
    """
    if channels is None:
        return 32, 64, 64
    ok = isinstance(channels, Sequence) and len(channels) == 3
    if not ok or not all(isinstance(c, int) and not isinstance(c, bool) and c >= 1 for c in channels):
        raise ValueError(f"model.conv_channels must be three ints >= 1 (or None), got {channels!r:.80}")
    return int(channels[0]), int(channels[1]), int(channels[2])


def _orthogonal_init(module: nn.Module) -> None:
    """Orthogonal weights with gain sqrt(2) and zero biases in every conv and linear layer (the PPO convention)."""
    for layer in module.modules():
        if isinstance(layer, nn.Conv2d | nn.Linear):
            nn.init.orthogonal_(layer.weight, gain=float(np.sqrt(2)))
            nn.init.zeros_(layer.bias)


class NatureCNN(nn.Module):
    """The convolutional trunk of Mnih et al. (2015): ``uint8 (B, C, H, W) -> float (B, features)``.

    Conv 32x8x8 stride 4, conv 64x4x4 stride 2, conv 64x3x3 stride 1, each with ReLU, then a linear
    layer to ``features`` with ReLU. Inputs are scaled by 1/255 here, on the module's device. With
    ``orthogonal=True`` the layers are orthogonally initialized with gain sqrt(2) (the PPO convention).
    ``channels``: the three convolutions' output channels (None: Nature's 32, 64, 64; DI-engine's Atari files
    use e.g. 128, 128, 512), kernels and strides unchanged.

    Example::

        cnn = NatureCNN((4, 84, 84))
        cnn(torch.zeros(2, 4, 84, 84, dtype=torch.uint8)).shape  # (2, 512)
    """

    def __init__(
        self,
        in_shape: Sequence[int],
        features: int = 512,
        *,
        orthogonal: bool = False,
        channels: Sequence[int] | None = None,
    ) -> None:
        super().__init__()
        c1, c2, c3 = conv_channels(channels)
        self.convs = nn.Sequential(
            nn.Conv2d(int(in_shape[0]), c1, 8, stride=4),
            nn.ReLU(),
            nn.Conv2d(c1, c2, 4, stride=2),
            nn.ReLU(),
            nn.Conv2d(c2, c3, 3, stride=1),
            nn.ReLU(),
            nn.Flatten(),
        )
        with torch.no_grad():
            flat = int(self.convs(torch.zeros(1, *map(int, in_shape))).shape[1])
        self.fc = nn.Sequential(nn.Linear(flat, int(features)), nn.ReLU())
        self.out_features = int(features)
        if orthogonal:
            _orthogonal_init(self)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.fc(self.convs(obs.float() / 255.0))


class MinAtarCNN(nn.Module):
    """The network of the MinAtar paper (Young & Tian 2019): ``uint8 (B, C, H, W) 0/1 grid -> float (B, features)``.

    One conv of 16 3x3 filters, stride 1, ReLU, then a linear layer to ``features`` (128 there) with ReLU. Inputs
    are converted to float on the module's device, unscaled. ``orthogonal=True``: orthogonal init, gain sqrt(2).

    Example::

        cnn = MinAtarCNN((4, 10, 10))
        cnn(torch.zeros(2, 4, 10, 10, dtype=torch.uint8)).shape  # (2, 128)
    """

    def __init__(self, in_shape: Sequence[int], features: int = 128, *, orthogonal: bool = False) -> None:
        super().__init__()
        channels, height, width = (int(s) for s in in_shape)
        self.conv = nn.Sequential(nn.Conv2d(channels, 16, 3, stride=1), nn.ReLU(), nn.Flatten())
        self.fc = nn.Sequential(nn.Linear(16 * (height - 2) * (width - 2), int(features)), nn.ReLU())
        self.out_features = int(features)
        if orthogonal:
            _orthogonal_init(self)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.fc(self.conv(obs.float()))


def conv_encoder(
    space: gym.Space,
    features: int | None = None,
    *,
    orthogonal: bool = False,
    channels: Sequence[int] | None = None,
) -> nn.Module:
    """The convolutional trunk for a :func:`is_conv_space` space: :class:`NatureCNN` for images (``features``
    default 512, ``channels`` its three convolutions' widths, None: Nature's), :class:`MinAtarCNN` for grids
    (default 128; ``channels`` must be None there: the MinAtar network has one 16-filter convolution).

    Example::

        conv_encoder(gym.spaces.Box(0, 1, (4, 10, 10), np.uint8)).out_features  # 128
    """
    if is_image_space(space):
        return NatureCNN(space.shape, 512 if features is None else features, orthogonal=orthogonal, channels=channels)
    if is_grid_space(space):
        if channels is not None:
            raise ValueError(
                f"model.conv_channels={list(channels)!r:.60} is for image observations (the Nature CNN); "
                f"0/1 grids {tuple(space.shape)} use the MinAtar network: leave it unset"
            )
        return MinAtarCNN(space.shape, 128 if features is None else features, orthogonal=orthogonal)
    raise ValueError(f"no convolutional encoder for {space}: expected uint8 images or 0/1 grids (C, H, W)")
