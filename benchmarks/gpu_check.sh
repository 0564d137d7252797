#!/usr/bin/env bash
# GPU check of ding_dist: every CUDA path that one GPU can run, one markdown table, at most 8 minutes on one
# H200 with the wheel install (docs/benchmarks.md section 5).
#
# On the GPU machine through the device tool, after `bash benchmarks/gpu_prepare.sh` here (it fills .whl/):
#   DEVICE: set -o pipefail; PYTHONUNBUFFERED=1 bash benchmarks/gpu_check.sh 2>&1 | tee $OUT/gpu_check.log
#   carry: [".whl"]   timeout_s: 540
# The one retry, the failed rows only (the machine still warm; else the first run's last line gives --only IDS):
#   RERUN: set -o pipefail; PYTHONUNBUFFERED=1 bash benchmarks/gpu_check.sh --rerun-failed 2>&1 | tee $OUT/gpu_check.log
#
# Elsewhere:
#   bash benchmarks/gpu_check.sh                        # on a GPU machine, from the repository root
#   bash benchmarks/gpu_check.sh --device cpu --quick   # the rows that run on a CPU, tiny sizes (CI)
#
# Wheels in .whl/ (carried there) are installed into a temporary target put first on PYTHONPATH (nothing else is
# installed); the repository itself goes on PYTHONPATH too (no build). The table goes to stdout and to
# $OUT/gpu_check.md ($OUT set) or to a temporary file it names. Exit status: 0 every row ok or skipped, 1 a row
# failed, 2 no GPU (without --device cpu) or nothing to rerun.
set -u
cd "$(dirname "$0")/.."
TOOL=gpu_check
# shellcheck source=benchmarks/carried_wheels.sh
. benchmarks/carried_wheels.sh
"$PYTHON" benchmarks/gpu_check.py "$@"
exit $?  # not exec: the carried wheels' temporary folder is removed at exit
