#!/usr/bin/env bash
# Atari Pong PPO throughput side by side with Stable-Baselines3 (see bench_vs_sb3.py). Creates SB3's venv
# once (torch first, pinned: a CPU build these machines hold, an unpinned torch pulls a CUDA build), then runs.
# Usage: bash benchmarks/bench_vs_sb3.sh [--steps 20480] [--sb3-vec dummy|subproc] [--json OUT.json]
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${SB3_VENV:-.venvs/sb3}"  # relative to the repo: a venv holding Stable-Baselines3
if ! "$VENV/bin/python" -c "import stable_baselines3, ale_py" 2>/dev/null; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q torch==2.13.0
    "$VENV/bin/pip" install -q stable-baselines3 gymnasium ale-py opencv-python-headless
fi
exec python benchmarks/bench_vs_sb3.py --sb3-venv "$VENV" "$@"
