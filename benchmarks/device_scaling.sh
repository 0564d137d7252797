#!/usr/bin/env bash
# Scaling on the lent machine (16 cores, one GPU; issue 36): Pong PPO on 1 process (CPU, GPU), data-parallel 2-8
# processes, 1-7 CPU actors + 1 GPU learner with and without the inference rank, Ape-X with 1-8 actors; one table
# (stdout, $OUT/device_scaling.md) and its JSON ($OUT/device_scaling.json); at most 5 minutes with the wheel
# install (docs/benchmarks.md section 15).
#
# On the GPU machine through the device tool, after `bash benchmarks/gpu_prepare.sh` here (the GPU check's
# wheels and ale-py for Pong, in .whl/); in the same lent window as gpu_check.sh, after it:
#   DEVICE: set -o pipefail; PYTHONUNBUFFERED=1 bash benchmarks/device_scaling.sh 2>&1 | tee $OUT/device_scaling.log
#   carry: [".whl"]   timeout_s: 330
# A rerun of some rows (the ids of the table, e.g. those that timed out):
#   RERUN: set -o pipefail; PYTHONUNBUFFERED=1 bash benchmarks/device_scaling.sh --rows IDS 2>&1 | tee $OUT/device_scaling.log
#
# Elsewhere:
#   bash benchmarks/device_scaling.sh --dry-run      # every row, tiny budgets on the CPU (CI's quality set)
#   bash benchmarks/device_scaling.sh --device cpu   # the full budgets with the GPU rows' learners on the CPU
#   python benchmarks/device_scaling.py --help       # every option (--rows, --steps, --row-timeout, --budget)
set -u
cd "$(dirname "$0")/.."
TOOL=device_scaling
# shellcheck source=benchmarks/carried_wheels.sh
. benchmarks/carried_wheels.sh
"$PYTHON" benchmarks/device_scaling.py "$@"
exit $?  # not exec: the carried wheels' temporary folder is removed at exit
