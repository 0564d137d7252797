#!/usr/bin/env bash
# Scaling on a machine with cores to spare (16 cores, one GPU): Pong PPO on 1 process (CPU, GPU), data-parallel
# 2-8 processes, 1-7 CPU actors + 1 GPU learner with and without the inference rank, Ape-X with 1-8 actors; one
# table (stdout, DIR/device_scaling.md) and its JSON (DIR/device_scaling.json); at most 5 minutes with the wheel
# install (benchmarks/gpu/README.md).
#
# On a GPU machine without network access, after `bash benchmarks/gpu/gpu_prepare.sh` on a machine with one (the
# GPU check's wheels and ale-py for Pong, in .whl/; copy .whl/ with the repository), after gpu_check.sh:
#   DEVICE: bash benchmarks/gpu/device_scaling.sh --out-dir scaling_results
# A rerun of some rows (the ids of the table, e.g. those that timed out):
#   RERUN: bash benchmarks/gpu/device_scaling.sh --rows IDS --out-dir scaling_results
#
# Elsewhere:
#   bash benchmarks/gpu/device_scaling.sh --dry-run      # every row, tiny budgets on the CPU (CI's quality set)
#   bash benchmarks/gpu/device_scaling.sh --device cpu   # the full budgets with the GPU rows' learners on the CPU
#   python benchmarks/gpu/device_scaling.py --help       # every option (--rows, --steps, --row-timeout, --budget)
set -u
cd "$(dirname "$0")/../.."
TOOL=device_scaling
# shellcheck source=benchmarks/gpu/carried_wheels.sh
. benchmarks/gpu/carried_wheels.sh
"$PYTHON" benchmarks/gpu/device_scaling.py "$@"
exit $?  # not exec: the carried wheels' temporary folder is removed at exit
