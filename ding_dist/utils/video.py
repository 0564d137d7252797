"""``ding-dist eval --video OUT.mp4`` / ``--gif OUT.gif``: greedy episodes of a checkpoint, recorded.

``--video`` uses gymnasium's RecordVideo; ``--gif`` collects the ``rgb_array`` frames and writes an animated
GIF with Pillow (a dependency of matplotlib, so nothing more to install). Rendering needs the ``render``
extra (``pip install -e ".[render]"``: pygame for classic-control envs, moviepy for writing MP4s).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["record_episodes", "record_gif", "write_gif"]


def record_episodes(cfg: Any, policy: Any, out: str | Path, episodes: int = 1, seed: int = 0) -> list[Path]:
    """Play ``episodes`` greedy episodes of ``policy`` on ``cfg.env`` and write them as MP4 videos.

    One episode is written to ``out``; several to ``<stem>-episode-<k><suffix>`` beside it. Returns the
    paths written.
    """
    import gymnasium as gym
    import numpy as np

    out = _checked_path(out, ".mp4", "--video")
    env = _render_env(cfg)
    with tempfile.TemporaryDirectory(prefix="ding_dist_video_") as folder:
        try:
            env = gym.wrappers.RecordVideo(env, folder, episode_trigger=lambda _: True, name_prefix="episode")
        except gym.error.DependencyNotInstalled as e:
            env.close()
            raise ValueError(f"writing videos needs the render extra (pip install 'ding_dist[render]'): {e}") from None
        try:
            for k in range(episodes):
                obs, _ = env.reset(seed=seed + k)
                done = False
                while not done:
                    action = policy.eval_action(np.asarray(obs)[None])[0]
                    obs, _, terminated, truncated, _ = env.step(action)
                    done = terminated or truncated
        finally:
            env.close()
        written = sorted(Path(folder).glob("episode-episode-*.mp4"), key=lambda p: int(p.stem.rsplit("-", 1)[1]))
        out.parent.mkdir(parents=True, exist_ok=True)
        targets = [out] if len(written) == 1 else [out.with_name(f"{out.stem}-episode-{k}{out.suffix}")
                                                    for k in range(len(written))]  # fmt: skip
        for src, dst in zip(written, targets):
            shutil.move(str(src), dst)
    return targets


def _episode_targets(out: Path, count: int) -> list[Path]:
    """``out`` for one episode; ``<stem>-episode-<k><suffix>`` beside it for several."""
    return [out] if count == 1 else [out.with_name(f"{out.stem}-episode-{k}{out.suffix}") for k in range(count)]


def write_gif(frames: Sequence[Any], out: str | Path, fps: float = 30.0, max_width: int = 480) -> Path:
    """Write RGB frames (``H x W x 3`` uint8 arrays) as a looping GIF; frames wider than ``max_width`` are
    scaled down (GIF stores a palette image per frame: full-size frames make large files).

    Example:
        >>> import numpy as np, tempfile, pathlib
        >>> out = pathlib.Path(tempfile.mkdtemp()) / "a.gif"
        >>> write_gif([np.zeros((4, 6, 3), np.uint8), np.full((4, 6, 3), 255, np.uint8)], out, fps=10).name
        'a.gif'
    """
    import numpy as np

    try:
        from PIL import Image
    except ImportError as e:  # Pillow comes with matplotlib, a dependency of ding_dist
        raise ValueError(f"writing GIFs needs Pillow (pip install pillow): {e}") from None
    if not frames:
        raise ValueError("no frames to write")
    if not fps > 0:
        raise ValueError(f"fps must be > 0, got {fps}")
    images = []
    for frame in frames:
        image = Image.fromarray(np.asarray(frame, dtype=np.uint8)).convert("RGB")
        if image.width > max_width:
            image = image.resize((max_width, max(1, round(image.height * max_width / image.width))))
        images.append(image)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    images[0].save(tmp, format="GIF", save_all=True, append_images=images[1:], duration=round(1000 / fps), loop=0)
    os.replace(tmp, out)
    return out


def record_gif(cfg: Any, policy: Any, out: str | Path, episodes: int = 1, seed: int = 0) -> list[Path]:
    """Play ``episodes`` greedy episodes of ``policy`` on ``cfg.env`` and write each as an animated GIF.

    Frames are the env's ``render()`` in ``rgb_array`` mode, played at the env's ``render_fps`` (30 when it
    does not say). One episode is written to ``out``; several to ``<stem>-episode-<k>.gif`` beside it.
    Returns the paths written.

    Example::

        record_gif(cfg, policy, "cartpole.gif", episodes=2)  # -> [cartpole-episode-0.gif, cartpole-episode-1.gif]
    """
    import gymnasium as gym
    import numpy as np

    out = _checked_path(out, ".gif", "--gif")
    env = _render_env(cfg)
    fps = float(env.metadata.get("render_fps") or 30)
    targets = _episode_targets(out, episodes)
    try:
        for k, target in enumerate(targets):
            obs, _ = env.reset(seed=seed + k)
            frames = [env.render()]
            if frames[0] is None:
                raise ValueError(f"env {cfg.env.get('id')!r} returned no rgb_array frame from render()")
            done = False
            while not done:
                action = policy.eval_action(np.asarray(obs)[None])[0]
                obs, _, terminated, truncated, _ = env.step(action)
                frames.append(env.render())
                done = terminated or truncated
            write_gif(frames, target, fps=fps)
    except gym.error.DependencyNotInstalled as e:
        raise ValueError(f"rendering needs the render extra (pip install 'ding_dist[render]'): {e}") from None
    finally:
        env.close()
    return targets


def _checked_path(out: str | Path, suffix: str, flag: str) -> Path:
    out = Path(out)
    if out.suffix.lower() != suffix:
        raise ValueError(f"{flag} must end in {suffix}, got {str(out)!r}")
    return out


def _render_env(cfg: Any) -> Any:
    """The config's env, rendering ``rgb_array`` frames (a clear error without the render extra)."""
    import gymnasium as gym

    from ding_dist.envs import make_env

    env_kwargs = {**(cfg.env.get("env_kwargs") or {}), "render_mode": "rgb_array"}
    try:
        return make_env(cfg.env.get("id"), entry_point=cfg.env.get("entry_point"), env_kwargs=env_kwargs,
                        max_episode_steps=cfg.env.get("max_episode_steps"))  # fmt: skip
    except gym.error.DependencyNotInstalled as e:
        raise ValueError(f"rendering needs the render extra (pip install 'ding_dist[render]'): {e}") from None
