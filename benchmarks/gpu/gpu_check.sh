#!/usr/bin/env bash
# GPU check of ding_dist: every CUDA path that one GPU can run, one markdown table, at most 8 minutes on one
# H200 with the wheel install (benchmarks/gpu/README.md).
#
# On a GPU machine without network access, after `bash benchmarks/gpu/gpu_prepare.sh` on a machine with one
# (it fills .whl/; copy .whl/ with the repository):
#   DEVICE: bash benchmarks/gpu/gpu_check.sh --out-dir gpu_results
# The failed rows again, on the same machine (else the first run's last line gives --only IDS):
#   RERUN: bash benchmarks/gpu/gpu_check.sh --out-dir gpu_results --rerun-failed
#
# Elsewhere:
#   bash benchmarks/gpu/gpu_check.sh                        # on a GPU machine, from the repository root
#   bash benchmarks/gpu/gpu_check.sh --device cpu --quick   # the rows that run on a CPU, tiny sizes (CI)
#
# Wheels in .whl/ are installed into a temporary target put first on PYTHONPATH (nothing else is installed);
# the repository itself goes on PYTHONPATH too (no build). The table goes to stdout and to DIR/gpu_check.md
# (--out-dir DIR) or to a temporary file it names. Exit status: 0 every row ok or skipped, 1 a row failed,
# 2 no GPU (without --device cpu) or nothing to rerun.
set -u
cd "$(dirname "$0")/../.."
TOOL=gpu_check
# shellcheck source=benchmarks/gpu/carried_wheels.sh
. benchmarks/gpu/carried_wheels.sh
"$PYTHON" benchmarks/gpu/gpu_check.py "$@"
exit $?  # not exec: the carried wheels' temporary folder is removed at exit
