"""Install hints for ding_dist's extras: right for an editable checkout and for a wheel, quoted for the shell."""

from __future__ import annotations

import json
import shlex
from importlib import metadata
from pathlib import Path

import pytest

from ding_dist.utils.install import install_hint

METADATA = """Metadata-Version: 2.1
Name: ding_dist
Version: 0.1.0
Provides-Extra: render
Provides-Extra: wandb
Requires-Dist: torch>=2.1
Requires-Dist: pygame>=2.1; extra == "render"
Requires-Dist: moviepy>=1.0; extra == 'render'
Requires-Dist: wandb>=0.15; extra == "wandb"
Requires-Dist: gymnasium[mujoco]<2,>=1.0; extra == "mujoco"
"""


def _dist(tmp_path: Path, direct_url: dict | None) -> metadata.Distribution:
    info = tmp_path / "ding_dist-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(METADATA)
    if direct_url is not None:
        (info / "direct_url.json").write_text(json.dumps(direct_url))
    return metadata.PathDistribution(info)


def test_a_wheel_install_gets_the_extras_packages_quoted(tmp_path):
    for direct in (None, {"url": "file:///tmp/ding_dist-0.1.0-py3-none-any.whl", "archive_info": {}}):
        dist = _dist(tmp_path / str(bool(direct)), direct)
        assert install_hint("render", dist) == 'pip install "pygame>=2.1" "moviepy>=1.0"'
        assert install_hint("mujoco", dist) == 'pip install "gymnasium[mujoco]<2,>=1.0"'
        assert shlex.split(install_hint("wandb", dist)) == ["pip", "install", "wandb>=0.15"]  # no glob, no redirect
    with pytest.raises(ValueError, match="ding_dist has no extra 'gpu'"):
        install_hint("gpu", dist)


def test_an_editable_install_points_at_its_checkout(tmp_path):
    checkout = tmp_path / "my clone"
    dist = _dist(tmp_path, {"url": checkout.as_uri(), "dir_info": {"editable": True}})
    assert install_hint("wandb", dist) == f'pip install -e "{checkout}[wandb]"'
    assert shlex.split(install_hint("wandb", dist)) == ["pip", "install", "-e", f"{checkout}[wandb]"]
    not_editable = _dist(tmp_path / "plain", {"url": checkout.as_uri(), "dir_info": {}})  # pip install ./clone
    assert install_hint("render", not_editable) == 'pip install "pygame>=2.1" "moviepy>=1.0"'
