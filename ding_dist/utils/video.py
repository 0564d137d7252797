"""``ding-dist eval --video OUT.mp4``: greedy episodes of a checkpoint recorded with gymnasium's RecordVideo.

Rendering needs the ``render`` extra (``pip install -e ".[render]"``: pygame for classic-control envs,
moviepy for writing the video).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["record_episodes"]


def record_episodes(cfg: Any, policy: Any, out: str | Path, episodes: int = 1, seed: int = 0) -> list[Path]:
    """Play ``episodes`` greedy episodes of ``policy`` on ``cfg.env`` and write them as MP4 videos.

    One episode is written to ``out``; several to ``<stem>-episode-<k><suffix>`` beside it. Returns the
    paths written.
    """
    import gymnasium as gym
    import numpy as np

    from ding_dist.envs import make_env

    out = Path(out)
    if out.suffix.lower() != ".mp4":
        raise ValueError(f"--video must end in .mp4, got {str(out)!r}")
    env_kwargs = {**(cfg.env.get("env_kwargs") or {}), "render_mode": "rgb_array"}
    try:
        env = make_env(cfg.env.get("id"), entry_point=cfg.env.get("entry_point"), env_kwargs=env_kwargs,
                       max_episode_steps=cfg.env.get("max_episode_steps"))  # fmt: skip
    except gym.error.DependencyNotInstalled as e:
        raise ValueError(f"rendering needs the render extra (pip install 'ding_dist[render]'): {e}") from None
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
