#!/usr/bin/env bash
# Run benchmarks/bench_sync_algorithms.py with one rank per network namespace across a rate-limited veth
# pair (the shared tools two-hosts script: ../shared/tools/two-hosts beside the repo; needs root). Usage:
#   benchmarks/bench_sync_algorithms_two_hosts.sh RATE [bench_sync_algorithms.py options...]
# e.g. benchmarks/bench_sync_algorithms_two_hosts.sh 100mbit --json /tmp/algos_100mbit.json
#      benchmarks/bench_sync_algorithms_two_hosts.sh 100mbit --straggler --models conv
# Rank 0 prints the report (and writes --json). The hosts are always taken down again, also on failure
# or Ctrl-C.
set -euo pipefail
RATE=${1:?usage: $0 RATE [bench_sync_algorithms.py options...]}
shift
HERE=$(cd "$(dirname "$0")" && pwd)
TWO_HOSTS=${TWO_HOSTS:-$HERE/../../shared/tools/two-hosts}
PY=${PYTHON:-$(command -v python)}
PORT=${MASTER_PORT:-29534}
"$TWO_HOSTS" up "$RATE"
trap '"$TWO_HOSTS" down' EXIT
MASTER_PORT=$PORT "$TWO_HOSTS" run 1 "$PY" "$HERE/bench_sync_algorithms.py" --rank 1 --world-size 2 --link "$RATE" "$@" &
peer=$!
MASTER_PORT=$PORT "$TWO_HOSTS" run 0 "$PY" "$HERE/bench_sync_algorithms.py" --rank 0 --world-size 2 --link "$RATE" "$@"
wait "$peer"
