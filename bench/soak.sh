#!/usr/bin/env bash
# Soak test of mhla-server: MINUTES of mixed streaming load (mhla-bench), random
# cancels and slow readers against the server with its default flags; RSS,
# /metrics and status codes every 30 s into a results file (JSON lines, written
# as it goes), and at the end its picture (RSS, TTFT and E2E p50/p99 over time)
# in the same name with .svg. Fails on any 5xx, on a failed bench request, on RSS
# growth past SOAK_RSS_SLOPE MiB/min after the warm-up, on gauges that stay above
# 0 when idle, or on a server that does not exit 0 at SIGTERM. See bench/soak.py.
#
# usage: bench/soak.sh MINUTES [soak.py flags: --model DIR --server-args "..."
#                               --concurrency N --cancellers N --slow-readers N
#                               --interval S (between samples, default 30)
#                               --memory-limit MiB (the server in a fresh memory
#                               cgroup, v2 or v1, with that limit; needs root)]
# env:   BUILD (default build), SOAK_OUT (default soak-<UTC time>.jsonl),
#        SOAK_RSS_SLOPE (MiB/min, default 2)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
if [ $# -lt 1 ]; then
  sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
minutes=$1
shift
build=${BUILD:-$root/build}
out=${SOAK_OUT:-soak-$(date -u +%Y%m%dT%H%M%SZ).jsonl}
for b in mhla-server mhla-bench; do
  [ -x "$build/bin/$b" ] || { echo "soak: $build/bin/$b not built (make build)" >&2; exit 2; }
done
py=/usr/bin/python3
[ -x "$py" ] || py=python3
echo "soak: $minutes min; results in $out (server log $out.server.log, picture ${out%.jsonl}.svg)"
exec "$py" "$here/soak.py" "$minutes" --bin "$build/bin" --out "$out" \
  --rss-slope "${SOAK_RSS_SLOPE:-2}" "$@"
