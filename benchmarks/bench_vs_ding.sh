#!/usr/bin/env bash
# Side by side with DI-engine on its own config files (see bench_vs_ding.py). Creates DI-engine's venv
# once (torch first, pinned, so pip does not pull a CUDA build), then runs the comparison.
# Usage: bash benchmarks/bench_vs_ding.sh [--seeds 0,1,2] [--configs cartpole_dqn,cartpole_ppo,cartpole_dqn_ddp]
#        bash benchmarks/bench_vs_ding.sh --configs cartpole_a2c,cartpole_rainbow,pendulum_td3,pendulum_ddpg \
#            --timeout 600 --ours-first --json bench_vs_ding_zoo.json    (or --configs all)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${DING_VENV:-.venvs/di-engine}"  # relative to the repo: a venv holding DI-engine
if [ ! -x "$VENV/bin/ding" ]; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q torch==2.13.0
    "$VENV/bin/pip" install -q di-engine || echo "bench_vs_ding.sh: pip install di-engine failed" >&2
fi
exec python benchmarks/bench_vs_ding.py --ding-venv "$VENV" "$@"
