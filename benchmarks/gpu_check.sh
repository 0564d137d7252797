#!/usr/bin/env bash
# GPU check of ding_dist: every CUDA path, one markdown table, about 5 minutes on one GPU.
#
#   bash benchmarks/gpu_check.sh                        # on a GPU machine, from the repository root
#   bash benchmarks/gpu_check.sh --device cpu --quick   # the checks that run on a CPU, tiny sizes (CI)
#
# The table goes to stdout and to $OUT/gpu_check.md ($OUT set) or to a temporary file it names.
# Exit status: 0 every row ok or skipped, 1 a row failed, 2 no GPU (without --device cpu).
# Installs nothing but the repository itself, and only when ding_dist cannot be imported
# (--no-deps: torch and the rest must be there; --no-build-isolation: no download of build tools).
set -u
cd "$(dirname "$0")/.."
PY="${PYTHON:-$(command -v python || command -v python3)}"
if ! "$PY" -c "import ding_dist" >/dev/null 2>&1; then
    echo "gpu_check: ding_dist is not importable; pip install -e . --no-deps --no-build-isolation -q"
    "$PY" -m pip install -e . --no-deps --no-build-isolation -q || exit 1
fi
exec "$PY" benchmarks/gpu_check.py "$@"
