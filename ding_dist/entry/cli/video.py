"""``ding-dist eval --video OUT.mp4`` / ``--gif OUT.gif``: the evaluated episodes of a checkpoint, recorded into one
file.

Each episode is played again from its reset seed (the seeds the evaluation reports) by the policy that evaluated
it, acting as the evaluator does (greedy, a batch of one, a recurrent state started afresh), on the env the
config builds for evaluation (its Atari preprocessing and channel order included), rendering ``rgb_array``
frames: the reset frame, then one per step, so an episode of L steps is L + 1 frames. Several episodes play
back to back in the one file named. ``--video`` streams them to an H.264 MP4 through moviepy's ffmpeg writer, ``--gif``
writes an animated GIF with Pillow (a dependency of matplotlib). Rendering classic-control envs needs
pygame, MP4s need moviepy: both are the ``render`` extra (the missing-module message says how to install it:
``pip install -e "<checkout>[render]"`` for an editable install, else the extra's packages). While rendering,
SDL (under pygame) gets its ``dummy`` video and audio drivers where the user has set none, so no display or
sound server is needed and SDL prints nothing about them.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from ding_dist.utils.install import install_hint

__all__ = ["Recording", "record_episodes", "record_gif", "write_gif", "write_mp4"]

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
    """The config's evaluation env (as ``make_vec_env`` builds each of an evaluator's envs: Atari preprocessing,
    channel order), rendering ``rgb_array`` frames, closed after the block; headless SDL meanwhile, and our
    one-line message when the env's rendering package is missing."""
    import gymnasium as gym

    from ding_dist.envs import make_env

    env_cfg = cfg.env
    env_kwargs = {**(env_cfg.get("env_kwargs") or {}), "render_mode": "rgb_array"}
    with _headless_sdl():
        try:
            env = make_env(
                env_cfg.get("id"),
                entry_point=env_cfg.get("entry_point"),
                env_kwargs=env_kwargs,
                max_episode_steps=env_cfg.get("max_episode_steps"),
                atari=env_cfg.get("atari"),
                channels_first=bool(env_cfg.get("channels_first", False)),
            )
            try:
                yield env
            finally:
                env.close()
        except gym.error.DependencyNotInstalled as e:
            module = (getattr(e.__cause__, "name", None) or "").split(".")[0]
            if module in _RENDER_MODULES:  # not gymnasium's advice (pip install "gymnasium[classic-control]")
                raise _needs(f"rendering {env_cfg.get('id')!r}", module) from None
            raise ValueError(f"rendering {env_cfg.get('id')!r} failed: {e}") from None


def _fps(env: Any) -> float:
    return float(env.metadata.get("render_fps") or 30)


class Recording(NamedTuple):
    """What :func:`record_episodes` and :func:`record_gif` wrote: the file, and the length (steps) and return of
    each episode played into it, in order: the evaluation's, when the policy and env are deterministic."""

    path: Path
    lengths: list[int]
    returns: list[float]


def _frames(env: Any, policy: Any, seeds: Sequence[int | None], played: list[tuple[int, float]]) -> Iterator[Any]:
    """The frames of one greedy episode of ``policy`` per reset seed of ``seeds``, back to back: each episode's
    reset frame, then one per step; ``(length, return)`` of each episode is appended to ``played`` as it ends.

    The policy acts as :class:`~ding_dist.worker.Evaluator` makes it act: ``eval_action`` on a batch (here of
    one observation, batched as a vector env batches it), a recurrent policy's state reset at the start and
    carried from step to step."""
    import numpy as np
    from gymnasium.vector.utils import batch_space, concatenate, create_empty_array, iterate

    if not seeds:
        raise ValueError("no episodes to record")
    obs_buffer = create_empty_array(env.observation_space, n=1)
    actions_space = batch_space(env.action_space, 1)
    reset_state = getattr(policy, "reset_state", None)  # a recurrent policy (R2D2): its state per env

    def frame() -> Any:
        image = env.render()
        if image is None:
            raise ValueError(f"env {env.spec.id if env.spec else env!r} returned no rgb_array frame from render()")
        return image

    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        if reset_state is not None:
            reset_state(None, eval=True)
        yield frame()
        done, length, total = False, 0, 0.0
        while not done:
            batch = concatenate(env.observation_space, [obs], obs_buffer)
            action = next(iter(iterate(actions_space, policy.eval_action(batch))))
            obs, reward, terminated, truncated, _ = env.step(action)
            done = bool(terminated or truncated)
            if reset_state is not None:
                reset_state(np.array([done]), eval=True)
            length, total = length + 1, total + float(reward)
            yield frame()
        played.append((length, total))


def _checked_path(out: str | Path, suffix: str, flag: str) -> Path:
    out = Path(out)
    if out.suffix.lower() != suffix:
        raise ValueError(f"{flag} must end in {suffix}, got {str(out)!r}")
    return out


def _replace_when_done(out: Path) -> contextlib.AbstractContextManager[Path]:
    """A temporary path beside ``out`` (same suffix) that becomes ``out`` when the block ends without error; the
    folder of ``out`` must exist (it is not created)."""

    @contextlib.contextmanager
    def manager() -> Iterator[Path]:
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


def record_episodes(cfg: Any, policy: Any, out: str | Path, seeds: Sequence[int | None]) -> Recording:
    """Play one greedy episode of ``policy`` on ``cfg.env`` per reset seed of ``seeds`` (an evaluation's
    ``seeds``: its episodes again) and write them back to back into one MP4, ``out``, at the env's
    ``render_fps``.

    Example::

        result = evaluate(cfg, "runs/cartpole_dqn", episodes=3, replay=lambda policy, result: record_episodes(
            cfg, policy, "cartpole.mp4", result["seeds"]))  # the 3 evaluated episodes
    """
    out = _checked_path(out, ".mp4", "--video")
    _mp4_writer_class()  # moviepy missing: say so before playing
    played: list[tuple[int, float]] = []
    with _rendering(cfg) as env:
        path = write_mp4(_frames(env, policy, seeds, played), out, fps=_fps(env))
    return Recording(path, [n for n, _ in played], [r for _, r in played])


def record_gif(cfg: Any, policy: Any, out: str | Path, seeds: Sequence[int | None]) -> Recording:
    """Play one greedy episode of ``policy`` on ``cfg.env`` per reset seed of ``seeds`` and write them back to
    back into one animated GIF, ``out``, at the env's ``render_fps`` (30 when it does not say).

    Example::

        record_gif(cfg, policy, "cartpole.gif", seeds=result["seeds"][:1])  # the first evaluated episode
    """
    out = _checked_path(out, ".gif", "--gif")
    played: list[tuple[int, float]] = []
    with _rendering(cfg) as env:
        path = write_gif(_frames(env, policy, seeds, played), out, fps=_fps(env))
    return Recording(path, [n for n, _ in played], [r for _, r in played])
