"""The one thing pyproject.toml cannot say: its ``[tool.setuptools]`` takes a find rule or a fixed package list,
not both, and ding_dist needs both: every ``ding_dist.*`` package found, plus the top-level ``configs/`` folder
shipped as ``ding_dist.configs`` (read with ``importlib.resources``: ding_dist/config/presets.py). All the
metadata (version, dependencies, extras, the ``ding-dist`` command) is in pyproject.toml.

Install: ``pip install -e .`` (add ``[test]`` for the test tools), or ``pip install .`` / a wheel.
"""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["ding_dist", "ding_dist.*"]), "ding_dist.configs"],
    package_dir={"ding_dist.configs": "configs"},
)
