"""MinAtar ids through make_env / make_vec_env: registered on first use, grids channels first."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("minatar", reason="the minatar extra")

from ding_dist.envs import make_env, make_vec_env  # noqa: E402
from ding_dist.envs.minatar import is_minatar_id  # noqa: E402


@pytest.mark.parametrize(
    "game, channels, actions",
    [("Breakout", 4, 3), ("SpaceInvaders", 6, 4), ("Asterix", 4, 5), ("Freeway", 7, 3), ("Seaquest", 10, 6)],
)
def test_games_observe_channels_first_uint8_grids(game, channels, actions):
    env = make_env(f"MinAtar/{game}-v1")
    obs, _ = env.reset(seed=0)
    assert env.observation_space.shape == obs.shape == (channels, 10, 10)
    assert obs.dtype == np.uint8 and set(np.unique(obs)) <= {0, 1}
    assert env.action_space.n == actions  # v1: the game's minimal action set
    raw = env.unwrapped.game.state()  # (10, 10, C) bool, channels last
    np.testing.assert_array_equal(obs, np.moveaxis(raw, -1, 0).astype(np.uint8))


def test_seeded_vector_envs_repeat_and_time_limit_applies():
    def rollout():
        venv = make_vec_env({"id": "MinAtar/Breakout-v1", "max_episode_steps": 7}, 2)
        obs, _ = venv.reset(seed=[3, 4])
        seen, truncated = [obs], 0
        for t in range(20):
            obs, _, _, trunc, _ = venv.step(np.array([t % 3, (t + 1) % 3]))
            seen.append(obs)
            truncated += int(trunc.sum())
        venv.close()
        return np.stack(seen), truncated

    (a, ta), (b, tb) = rollout(), rollout()
    np.testing.assert_array_equal(a, b)
    assert ta == tb and ta > 0


def test_id_detection():
    assert is_minatar_id("MinAtar/Seaquest-v0") and not is_minatar_id("ALE/Breakout-v5")


def test_registering_imports_no_display_library_and_rgb_frames_still_render():
    """minatar imports seaborn (pandas) and pyplot for its displays: they load when a frame first needs them."""
    import subprocess
    import sys

    code = (
        "import sys, gymnasium as gym\n"
        "from ding_dist.envs.minatar import register_minatar\n"
        "register_minatar()\n"
        "env = gym.make('MinAtar/Breakout-v1', render_mode='rgb_array', disable_env_checker=True)\n"
        "env.reset(seed=0)\n"
        "before = sorted(m for m in ('seaborn', 'pandas', 'matplotlib.pyplot') if m in sys.modules)\n"
        "frame = env.render()\n"
        "import seaborn\n"
        "print(before, frame.shape, type(seaborn).__name__, hasattr(seaborn, 'color_palette'))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[] (10, 10, 3) module True"
