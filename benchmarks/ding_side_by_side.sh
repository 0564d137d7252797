#!/usr/bin/env bash
# DI-engine 0.5.3's pong_dqn_config.py and hopper_sac_config.py, unchanged, under DI-engine and ding_dist for the
# same env steps (see ding_side_by_side.py). Builds DI-engine's venv once: torch first (pinned, CPU), DI-engine
# without its deps, then only what its serial pipeline needs for the two files (gym 0.25.1 with ale-py 0.8.1 and
# mujoco 2.3.3, the last versions that work with it; the Pong ROM imported from this venv's ale-py).
# Usage: bash benchmarks/ding_side_by_side.sh [--env-steps 20000] [--seeds 0] [--files pong_dqn,hopper_sac]
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${DING_VENV:-.venvs/di-engine-zoo}"
if [ -x "$VENV/bin/python" ] && ! "$VENV/bin/python" -c "import ding, gym, ale_py, mujoco" 2>/dev/null; then
    # never reinstall over an existing venv (a second mujoco, e.g. mujoco-core 4.x, breaks 2.3.3's library)
    echo "ding_side_by_side: $VENV exists but 'import ding, gym, ale_py, mujoco' fails; repair it with" \
        "'$VENV/bin/pip uninstall -y mujoco mujoco-core mujoco-studio mujoco-studio-wasm &&" \
        "$VENV/bin/pip install --no-deps mujoco==2.3.3', or remove it to rebuild" >&2
    exit 2
fi
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q torch==2.13.0
    "$VENV/bin/pip" install -q --no-deps DI-engine==0.5.3
    "$VENV/bin/pip" install -q "numpy<2" "gym==0.25.1" gymnasium DI-treetensor DI-toolkit tensorboardX easydict \
        pyyaml tabulate click cloudpickle hickle "setuptools<=66.1.1" enum-tools einops mpire trueskill requests \
        responses URLObject sniffio "yapf==0.29.0" pynng redis "flask<=2.0.3" "werkzeug<=2.0.3" \
        "opencv-python-headless<4.11" "ale-py==0.8.1" imageio
    "$VENV/bin/pip" install -q --no-deps "mujoco==2.3.3"  # its deps (absl-py, glfw, pyopengl) below, no newer mujoco
    "$VENV/bin/pip" install -q absl-py glfw pyopengl
    ROMS="$(mktemp -d)"
    cp "$(python -c 'import ale_py, os; print(os.path.dirname(ale_py.__file__))')/roms/pong.bin" "$ROMS/"
    "$VENV/bin/ale-import-roms" "$ROMS"
fi
exec nice -n 10 python benchmarks/ding_side_by_side.py --ding-venv "$VENV" "$@"
