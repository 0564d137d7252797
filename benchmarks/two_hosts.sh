#!/usr/bin/env bash
# Runs a 2-rank benchmark (bench_sync.py or bench_sync_algorithms.py) with one rank per network namespace across
# a veth pair limited to RATE each way, and always takes the namespaces down again (also on failure or Ctrl-C).
# Needs root and TWO_HOSTS: a script with the sub-commands `up RATE`, `run H CMD...` (CMD on host H, 0 or 1, with
# MASTER_ADDR set and gloo on the limited link) and `down`, built on `ip netns` and `tc tbf` (default:
# ../shared/tools/two-hosts beside the clone). Rank 0 prints the report (and writes --json).
#
#   bash benchmarks/two_hosts.sh bench_sync.py 100mbit --steps 8 --rounds 4 --warmup 1 --loss-check
#   bash benchmarks/two_hosts.sh bench_sync_algorithms.py 100mbit --json algos_100mbit.json
set -euo pipefail
SCRIPT=${1:?usage: $0 bench_sync.py|bench_sync_algorithms.py RATE [options...]}
RATE=${2:?usage: $0 SCRIPT RATE [options...]}
shift 2
HERE=$(cd "$(dirname "$0")" && pwd)
case "$SCRIPT" in
  bench_sync.py|bench_sync_algorithms.py) ;;
  *) echo "two_hosts.sh: SCRIPT '$SCRIPT': expected bench_sync.py or bench_sync_algorithms.py" >&2; exit 2 ;;
esac
TWO_HOSTS=${TWO_HOSTS:-$HERE/../../shared/tools/two-hosts}
[ -x "$TWO_HOSTS" ] || { echo "two_hosts.sh: TWO_HOSTS '$TWO_HOSTS': expected an executable (see the header)" >&2; exit 2; }
PY=${PYTHON:-$(command -v python)}
PORT=${MASTER_PORT:-29533}
"$TWO_HOSTS" up "$RATE"
trap '"$TWO_HOSTS" down' EXIT
MASTER_PORT=$PORT "$TWO_HOSTS" run 1 "$PY" "$HERE/$SCRIPT" --rank 1 --world-size 2 --link "$RATE" "$@" &
peer=$!
MASTER_PORT=$PORT "$TWO_HOSTS" run 0 "$PY" "$HERE/$SCRIPT" --rank 0 --world-size 2 --link "$RATE" "$@"
wait "$peer"
