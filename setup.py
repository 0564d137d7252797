"""Install ding_dist: ``pip install -e .`` (add ``[test]`` for the test tools)."""

from setuptools import find_packages, setup

ATARI = ["ale-py>=0.9", "opencv-python-headless>=4.6"]  # ale-py ships the ROMs; cv2 for AtariPreprocessing
MUJOCO = ["gymnasium[mujoco]>=1.0"]
TEST = ["pytest>=7.4", "pytest-timeout>=2.1", "hypothesis>=6.80"]

setup(
    name="ding_dist",
    version="0.1.0",
    description="Scale reinforcement-learning training from one process to many GPUs and nodes.",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=find_packages(include=["ding_dist", "ding_dist.*"]),
    install_requires=[
        "torch>=2.1",
        "numpy>=1.24",
        "gymnasium>=1.0",
        "tensorboard>=2.12",
        "easydict>=1.10",
        "tqdm>=4.60",
        "matplotlib>=3.6",
    ],
    extras_require={
        "atari": ATARI,
        "mujoco": MUJOCO,
        # create_config.env_manager.type="envpool" (Atari); ~600 MB installed with its assets, so not in "test"
        "envpool": ["envpool>=0.8"],
        # the Atari and MuJoCo tests (tests/envs, ~50 s on 2 cores) run in CI; ~265 MB installed
        "test": TEST + ATARI + MUJOCO,
        "dev": TEST + ATARI + MUJOCO + ["ruff>=0.5"],
        # ding-dist eval --video: pygame renders classic-control envs, moviepy writes RecordVideo's MP4s
        "render": ["pygame>=2.1", "moviepy>=1.0"],
        # ding-dist train --track: Weights & Biases (offline unless WANDB_MODE / WANDB_API_KEY say otherwise)
        "wandb": ["wandb>=0.15"],
    },
    entry_points={"console_scripts": ["ding-dist=ding_dist.entry.cli:run"]},
)
