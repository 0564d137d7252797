"""Packaging: a wheel holds the shipped configs, the license and the metadata of pyproject.toml; installed from
it (not editable), ``ding-dist train --algo ppo --env CartPole-v1`` run from another folder uses the shipped
config; shipped configs are found by name; a generated ``--algo`` config's temporary folder is removed."""

from __future__ import annotations

import email.parser
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

import ding_dist
from ding_dist.config import ConfigError, read_config
from ding_dist.config.presets import PRESET_PREFIX, configs_dir, find_config, shipped_names

REPO = Path(__file__).resolve().parents[1]
SHIPPED = sorted(p.name for p in (REPO / "configs").glob("*_config.py"))
#: a shipped config's name with a typo: the closest names first
NOT_SHIPPED = r"'cartpol_ppo' does not exist and is not a shipped config; did you mean 'cartpole_ppo' or "


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # nothing from the checkout on the path
    return {**env, "PYTHONNOUSERSITE": "1", "OMP_NUM_THREADS": "1", **extra}


def _venv_without_ding_dist(root: Path) -> Path:
    """A venv that sees this environment's packages (torch, gymnasium, pip, setuptools: no network needed) but
    not its ding_dist (an editable install of the checkout). Returns its python.

    ``--system-site-packages`` would show the base interpreter's packages, not those of the venv the tests
    run in, so the site-packages entries are linked into a folder a ``.pth`` file adds instead."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True)
    visible = root / "visible"
    visible.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if "ding_dist" not in entry.name:  # ding_dist/, its dist-info, the editable finder and its .pth
            (visible / entry.name).symlink_to(entry)
    (site,) = (root / "venv" / "lib").glob("python3*/site-packages")
    (site / "visible.pth").write_text(f"import site; site.addsitedir({str(visible)!r})\n")
    return root / "venv" / "bin" / "python"


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict[str, Path]:
    """A wheel built from a copy of the checkout, installed (not editable) into a venv; no network."""
    root = tmp_path_factory.mktemp("packaging")
    src = root / "src"
    src.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("pyproject.toml", "setup.py", "README.md", "LICENSE"):
        shutil.copy2(REPO / name, src / name)
    for name in ("ding_dist", "configs"):
        shutil.copytree(REPO / name, src / name, ignore=ignore)
    python = _venv_without_ding_dist(root)
    pip = [str(python), "-m", "pip", "-q", "--disable-pip-version-check"]
    quiet = {"env": _env(), "capture_output": True, "text": True}
    wheel = subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", str(src), "-w",
                            str(root / "wheels")], **quiet)  # fmt: skip
    assert wheel.returncode == 0, wheel.stdout + wheel.stderr
    (path,) = (root / "wheels").glob("ding_dist-*.whl")
    done = subprocess.run([*pip, "install", "--no-deps", "--no-index", str(path)], **quiet)
    assert done.returncode == 0, done.stdout + done.stderr
    return {"root": root, "python": python, "wheel": path}


def test_wheel_holds_the_configs_the_license_and_the_metadata(installed):
    with zipfile.ZipFile(installed["wheel"]) as whl:
        names = whl.namelist()
        info = next(n for n in names if n.endswith(".dist-info/METADATA"))
        metadata = whl.read(info).decode()
    assert sorted(n.rsplit("/", 1)[1] for n in names if n.startswith("ding_dist/configs/")) == sorted(
        [*SHIPPED, "__init__.py"]
    )
    assert f"ding_dist-{ding_dist.__version__}.dist-info/licenses/LICENSE" in names
    meta = email.parser.HeaderParser().parsestr(metadata)
    assert (meta["Version"], meta["License-Expression"]) == (ding_dist.__version__, "Apache-2.0")
    requires = [Requirement(text) for text in meta.get_all("Requires-Dist")]
    plain = {r.name: r.specifier for r in requires if r.marker is None}
    assert (plain["numpy"], plain["gymnasium"]) == (SpecifierSet(">=1.24,<3"), SpecifierSet(">=1.0,<2"))

    def extra(name: str) -> set[str]:  # the names an extra pulls in, through the extras it names of ding_dist
        found = set()
        for r in requires:
            if r.marker is not None and r.marker.evaluate({"extra": name}):
                found |= set().union(*(extra(e) for e in r.extras)) if r.name == "ding_dist" else {r.name}
        return found

    assert {"pygame", "moviepy", "ale-py", "minatar", "pytest"} <= extra("test")  # the video/GIF/MinAtar tests in CI
    assert {"box2d", "pygame"} <= extra("box2d") <= extra("test")  # Box2D: DI-engine's Box2D files run in CI
    assert {"ruff", "pygame"} <= extra("dev")
    assert {"stable-baselines3", "sb3-contrib", "rliable", "minatar", "gymnasium"} <= extra("bench")
    extras = ["atari", "bench", "box2d", "dev", "envpool", "minatar", "mujoco", "render", "test", "wandb"]
    assert sorted(meta.get_all("Provides-Extra")) == extras


def test_installed_package_trains_with_the_shipped_config_from_any_folder(installed):
    root, python = installed["root"], installed["python"]
    elsewhere, tmp, run = root / "elsewhere", root / "tmp", root / "run"
    elsewhere.mkdir()
    tmp.mkdir()
    # the CLI's lookup, and the Python API's (docs/training.md section 10's script, outside the clone): the same file
    probe = ("from ding_dist.config.presets import find_config; from ding_dist.config import read_config; "
             "from ding_dist.entry.pipeline import load_config; print(find_config('cartpole_ppo')); "
             "print(read_config('configs/cartpole_ppo_config.py')[1].policy.type, "
             "load_config('cartpole_ppo').exp_name); "
             "from ding_dist.utils.install import install_hint; print(install_hint('render'))")  # fmt: skip
    found = subprocess.run([str(python), "-c", probe], cwd=elsewhere, env=_env(), capture_output=True, text=True)
    assert found.returncode == 0, found.stderr
    site = Path(sysconfig.get_paths(vars={"base": str(root / "venv")})["purelib"])
    assert found.stdout.splitlines() == [
        str(site / "ding_dist" / "configs" / "cartpole_ppo_config.py"),
        "ppo cartpole_ppo",
        'pip install "pygame>=2.1" "moviepy>=1.0"',
    ]  # a wheel: no checkout to name
    # fmt: skip

    cmd = [str(python.parent / "ding-dist"), "train", "--algo", "ppo", "--env", "CartPole-v1", "--max-env-steps",
           "256", "--exp-dir", str(run)]  # fmt: skip
    proc = subprocess.run(cmd, cwd=elsewhere, env=_env(TMPDIR=str(tmp)), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    saved, create = read_config(run / "config.py")
    shipped, _ = read_config(REPO / "configs" / "cartpole_ppo_config.py")
    assert saved.exp_name == "cartpole_ppo"  # the untuned defaults would be named cartpole_v1_ppo
    assert (saved.policy.learn.epoch_per_collect, saved.policy.collect.gae_lambda, saved.env.collector_env_num) == (
        shipped.policy.learn.epoch_per_collect,
        shipped.policy.collect.gae_lambda,
        shipped.env.collector_env_num,
    )
    assert create.policy.type == "ppo"
    assert sorted(p.name for p in tmp.iterdir() if p.name.startswith(PRESET_PREFIX)) == []


# ------------------------------------------------------------------------------------ shipped configs by name
@pytest.mark.parametrize(
    "arg", ["cartpole_ppo", "cartpole_ppo_config", "cartpole_ppo_config.py", "configs/cartpole_ppo"]
)
def test_a_shipped_config_is_found_by_name_from_any_folder(arg, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert find_config(arg) == configs_dir() / "cartpole_ppo_config.py"


@pytest.mark.parametrize("arg", ["cartpole_ppo", "configs/cartpole_ppo_config.py"])
def test_the_python_api_finds_shipped_configs_as_the_cli_does(arg, tmp_path, monkeypatch):
    """``read_config`` and ``load_config`` take what ``ding-dist train`` takes (one lookup for both)."""
    from ding_dist.entry.cli.checks import check_config
    from ding_dist.entry.pipeline import load_config

    monkeypatch.chdir(tmp_path)
    assert check_config(arg) == configs_dir() / "cartpole_ppo_config.py"
    assert read_config(arg) == read_config(configs_dir() / "cartpole_ppo_config.py")
    assert load_config(arg).exp_name == "cartpole_ppo"
    with pytest.raises(ConfigError, match=NOT_SHIPPED):
        read_config("cartpol_ppo")


def test_a_file_of_that_name_in_the_current_folder_wins(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cartpole_ppo_config.py").write_text("main_config = dict()\n")
    assert find_config("cartpole_ppo_config.py") == Path("cartpole_ppo_config.py")


def test_names_and_paths_that_are_not_shipped(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert shipped_names() == [name.removesuffix("_config.py") for name in SHIPPED]
    with pytest.raises(ConfigError, match=NOT_SHIPPED):
        find_config("cartpol_ppo")
    assert find_config("other/cartpole_ppo_config.py") == Path("other/cartpole_ppo_config.py")  # a path: as given
    assert find_config("missing_config.py") == Path("missing_config.py")  # read_config says it does not exist


def test_cli_trains_a_shipped_config_by_name(tmp_path, monkeypatch, capsys):
    from ding_dist.entry import cli

    monkeypatch.chdir(tmp_path)
    assert cli.main(["config", "show", "cartpole_dqn"]) == 0
    assert "exp_name" in capsys.readouterr().out
    assert cli.main(["train", "cartpol_dqn"]) == 2
    assert "is not a shipped config; did you mean 'cartpole_dqn' or " in capsys.readouterr().err


# ------------------------------------------------------------------------------------ generated --algo configs
def test_a_generated_config_folder_lives_as_long_as_the_process_that_made_it(tmp_path):
    code = (
        "import os, sys, types\n"
        "sys.modules['ding_dist.policy'] = types.SimpleNamespace(get_policy_cls=str)  # no torch: 4 s\n"
        "from ding_dist.config.presets import preset_config\n"
        "path = preset_config('ppo', 'MountainCar-v0')\n"
        "child = os.fork()\n"
        "if child == 0:\n"
        "    sys.exit(0)  # a forked rank's normal exit runs the atexit hooks it inherited\n"
        "os.waitpid(child, 0)\n"
        "print(path, path.is_file())\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=_env(TMPDIR=str(tmp_path)),
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    path, exists = proc.stdout.split()
    assert (Path(path).parent.parent, Path(path).parent.name.startswith(PRESET_PREFIX), exists) == (
        tmp_path,
        True,
        "True",
    )
    assert list(tmp_path.iterdir()) == []  # removed when the process that made it exited
