"""``ding-dist eval --video OUT.mp4`` / ``--gif OUT.gif``: greedy episodes of a checkpoint, recorded into one file.

The env renders ``rgb_array`` frames (the reset frame, then one per step); several episodes play back to back
in the one file named. ``--video`` streams them to an H.264 MP4 through moviepy's ffmpeg writer, ``--gif``
writes an animated GIF with Pillow (a dependency of matplotlib). Rendering classic-control envs needs
pygame, MP4s need moviepy: both are the ``render`` extra (the missing-module message says how to install it:
``pip install -e "<checkout>[render]"`` for an editable install, else the extra's packages). While rendering,
SDL (under pygame) gets its ``dummy`` video and audio drivers where the user has set none, so no display or
sound server is needed and SDL prints nothing about them.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ding_dist.utils.install import install_hint

__all__ = ["record_episodes", "record_gif", "write_gif", "write_mp4"]

_RENDER_MODULES = ("pygame", "moviepy")  # what the render extra installs
_SDL_DRIVERS = ("SDL_VIDEODRIVER", "SDL_AUDIODRIVER")


def _needs(what: str, module: str) -> ValueError:
    return ValueError(f"{what} needs {module}, part of the render extra: {install_hint('render')}")


@contextlib.contextmanager
def _headless_sdl() -> Iterator[None]:
    """SDL's ``dummy`` video and audio drivers for off-screen rendering, only where unset, restored after.

    Without them pygame's SDL looks for a display and a sound server and prints
    ``XDG_RUNTIME_DIR is invalid or not set`` (and ALSA errors) on machines without one.
    """
    added = [name for name in _SDL_DRIVERS if name not in os.environ]
    os.environ.update(dict.fromkeys(added, "dummy"))
    try:
        yield
    finally:
        for name in added:
            os.environ.pop(name, None)


@contextlib.contextmanager
def _rendering(cfg: Any) -> Iterator[Any]:
    """The config's env, rendering ``rgb_array`` frames, closed after the block; headless SDL meanwhile, and
    our one-line message when the env's rendering package is missing."""
    import gymnasium as gym

    from ding_dist.envs import make_env

    env_kwargs = {**(cfg.env.get("env_kwargs") or {}), "render_mode": "rgb_array"}
    with _headless_sdl():
        try:
            env = make_env(cfg.env.get("id"), entry_point=cfg.env.get("entry_point"), env_kwargs=env_kwargs,
                           max_episode_steps=cfg.env.get("max_episode_steps"))  # fmt: skip
            try:
                yield env
            finally:
                env.close()
        except gym.error.DependencyNotInstalled as e:
            module = (getattr(e.__cause__, "name", None) or "").split(".")[0]
            if module in _RENDER_MODULES:  # not gymnasium's advice (pip install "gymnasium[classic-control]")
                raise _needs(f"rendering {cfg.env.get('id')!r}", module) from None
            raise ValueError(f"rendering {cfg.env.get('id')!r} failed: {e}") from None


def _fps(env: Any) -> float:
    return float(env.metadata.get("render_fps") or 30)


def _frames(env: Any, policy: Any, episodes: int, seed: int) -> Iterator[Any]:
    """The frames of ``episodes`` greedy episodes of ``policy`` (seeds ``seed``, ``seed + 1``, ...), back to
    back: each episode's reset frame, then one per step."""
    import numpy as np

    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")

    def frame() -> Any:
        image = env.render()
        if image is None:
            raise ValueError(f"env {env.spec.id if env.spec else env!r} returned no rgb_array frame from render()")
        return image

    for k in range(episodes):
        obs, _ = env.reset(seed=seed + k)
        yield frame()
        done = False
        while not done:
            action = policy.eval_action(np.asarray(obs)[None])[0]
            obs, _, terminated, truncated, _ = env.step(action)
            yield frame()
            done = terminated or truncated


def _checked_path(out: str | Path, suffix: str, flag: str) -> Path:
    out = Path(out)
    if out.suffix.lower() != suffix:
        raise ValueError(f"{flag} must end in {suffix}, got {str(out)!r}")
    return out


def _replace_when_done(out: Path) -> contextlib.AbstractContextManager[Path]:
    """A temporary path beside ``out`` (same suffix) that becomes ``out`` when the block ends without error."""

    @contextlib.contextmanager
    def manager() -> Iterator[Path]:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(f".{out.stem}.tmp{out.suffix}")
        try:
            yield tmp
            os.replace(tmp, out)
        finally:
            tmp.unlink(missing_ok=True)

    return manager()


def _mp4_writer_class() -> Any:
    """moviepy's ffmpeg writer (moviepy 1 and 2 share its first three arguments: filename, size, fps)."""
    try:
        from moviepy.video.io.ffmpeg_writer import FFMPEG_VideoWriter
    except ImportError:
        raise _needs("writing MP4 videos", "moviepy") from None
    return FFMPEG_VideoWriter


def write_mp4(frames: Iterable[Any], out: str | Path, fps: float = 30.0) -> Path:
    """Stream RGB frames (``H x W x 3`` uint8 arrays, all one size) into an H.264 MP4 at ``fps``.

    Odd widths or heights are padded by one edge pixel (H.264's 4:2:0 colour needs even sizes). Needs
    moviepy (the ``render`` extra); written through a temporary file, so ``out`` is whole or absent.

    Example:
        >>> import numpy as np, tempfile, pathlib
        >>> out = pathlib.Path(tempfile.mkdtemp()) / "a.mp4"
        >>> write_mp4([np.full((5, 7, 3), 40 * k, np.uint8) for k in range(4)], out, fps=10).name  # doctest: +SKIP
        'a.mp4'
    """
    import numpy as np

    writer_class = _mp4_writer_class()
    if not fps > 0:
        raise ValueError(f"fps must be > 0, got {fps}")
    out = Path(out)
    writer, size = None, None
    with _replace_when_done(out) as tmp:
        try:
            for frame in frames:
                image = np.ascontiguousarray(np.asarray(frame, dtype=np.uint8)[..., :3])
                if size is None:
                    size = image.shape[:2]
                    writer = writer_class(str(tmp), (size[1] + size[1] % 2, size[0] + size[0] % 2), fps)
                elif image.shape[:2] != size:
                    raise ValueError(f"frames change size: {size} then {image.shape[:2]}")
                if size[0] % 2 or size[1] % 2:
                    image = np.pad(image, ((0, size[0] % 2), (0, size[1] % 2), (0, 0)), mode="edge")
                writer.write_frame(image)
        finally:
            if writer is not None:
                writer.close()
        if writer is None:
            raise ValueError("no frames to write")
    return out


def write_gif(frames: Iterable[Any], out: str | Path, fps: float = 30.0, max_width: int = 480) -> Path:
    """Write RGB frames (``H x W x 3`` uint8 arrays) as a looping GIF; frames wider than ``max_width`` are
    scaled down as they come (GIF stores a palette image per frame: full-size frames make large files).

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
    if not fps > 0:
        raise ValueError(f"fps must be > 0, got {fps}")
    images = []
    for frame in frames:
        image = Image.fromarray(np.asarray(frame, dtype=np.uint8)).convert("RGB")
        if image.width > max_width:
            image = image.resize((max_width, max(1, round(image.height * max_width / image.width))))
        images.append(image)
    if not images:
        raise ValueError("no frames to write")
    out = Path(out)
    with _replace_when_done(out) as tmp:
        images[0].save(tmp, format="GIF", save_all=True, append_images=images[1:], duration=round(1000 / fps), loop=0)
    return out


def record_episodes(cfg: Any, policy: Any, out: str | Path, episodes: int = 1, seed: int = 0) -> Path:
    """Play ``episodes`` greedy episodes of ``policy`` on ``cfg.env`` (seeds ``seed``, ``seed + 1``, ...) and
    write them back to back into one MP4, ``out``, at the env's ``render_fps``; returns ``out``.

    Example::

        record_episodes(cfg, policy, "cartpole.mp4", episodes=3)  # -> Path("cartpole.mp4"), 3 episodes
    """
    out = _checked_path(out, ".mp4", "--video")
    _mp4_writer_class()  # moviepy missing: say so before playing
    with _rendering(cfg) as env:
        return write_mp4(_frames(env, policy, episodes, seed), out, fps=_fps(env))


def record_gif(cfg: Any, policy: Any, out: str | Path, episodes: int = 1, seed: int = 0) -> Path:
    """Play ``episodes`` greedy episodes of ``policy`` on ``cfg.env`` and write them back to back into one
    animated GIF, ``out``, at the env's ``render_fps`` (30 when it does not say); returns ``out``.

    Example::

        record_gif(cfg, policy, "cartpole.gif", episodes=2)  # -> Path("cartpole.gif"), 2 episodes
    """
    out = _checked_path(out, ".gif", "--gif")
    with _rendering(cfg) as env:
        return write_gif(_frames(env, policy, episodes, seed), out, fps=_fps(env))
