#!/usr/bin/env bash
# Learning parity with Stable-Baselines3 (see bench_parity.py). Uses this interpreter when it holds SB3 (pip install
# '.[bench]'); otherwise creates the reference venv once (torch first, pinned: a CPU build these machines hold, an
# unpinned torch pulls a CUDA build; then SB3, sb3-contrib, MinAtar and MuJoCo) and passes it as --ref-python.
# Usage: bash benchmarks/bench_parity.sh --out /work/bench_parity_runs [--rows default|all|a,b] [--seeds 0,1,2] ...
set -euo pipefail
cd "$(dirname "$0")/.."
if python -c "import stable_baselines3, minatar" 2>/dev/null; then
    exec python benchmarks/bench_parity.py "$@"
fi
VENV="${BENCH_VENV:-/tmp/bench-parity-venv}"
if ! "$VENV/bin/python" -c "import stable_baselines3, sb3_contrib, minatar, mujoco" 2>/dev/null; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q torch==2.13.0
    "$VENV/bin/pip" install -q stable-baselines3 sb3-contrib minatar "gymnasium[mujoco]" tqdm
fi
exec python benchmarks/bench_parity.py --ref-python "$VENV/bin/python" "$@"
