#!/usr/bin/env bash
# contention_server.sh — the served throughput with competing busy processes
# on the machine: mhla-server with the default thread count against
# `--threads 1`, under the same competition, for 0, 1 and 2 busy loops
# (`while :; do :; done`) per core, each loaded by mhla-bench with a closed
# loop of CONCURRENCY streams (96-token prompts, 64 tokens out).
#
# usage: bench/contention_server.sh [BUILD_DIR] [MODEL_DIR] [ROUNDS] [SECONDS] [CONCURRENCY] [LEVELS]
#   defaults: build, models/brown-mhla (the demo model: steps of a few
#   hundred microseconds, where waiting for a descheduled thread costs the
#   most), 3 rounds, 10 seconds per measurement, 4 streams, busy loops per
#   core "0 1 2".
#
# Each round starts a server with the default threads, one with the default
# threads and --thread-adapt off, and one with --threads 1, back to back, and
# measures each for SECONDS after a 1-second warm-up; the median of the rounds
# is printed for output tokens/s and the inter-token latency's p99, with
# default / --threads 1 ("ratio") and adapt off / --threads 1 ("off"). mhla-bench
# runs on the same machine (it competes too, as a client beside a server
# does). The busy loops are started before and killed after each level.
set -euo pipefail
build=${1:-build}
model=${2:-models/brown-mhla}
rounds=${3:-3}
secs=${4:-10}
conc=${5:-4}
levels=${6:-0 1 2}
server=$build/bin/mhla-server
bench=$build/bin/mhla-bench
for exe in "$server" "$bench"; do
  [ -x "$exe" ] || { echo "contention_server: $exe not found (build it first)" >&2; exit 2; }
done
cores=$(nproc)
out=$(mktemp -d)

source "$(dirname "${BASH_SOURCE[0]}")/busy_loops.sh"
srv=
stop_all() {
  [ -n "$srv" ] && { kill "$srv" 2>/dev/null || true; wait "$srv" 2>/dev/null || true; }
  srv=
  stop_busy
}
trap stop_all EXIT

# prints "output_tok_s itl_p99_ms" of one measurement; extra args go to the server
one_run() {
  local log="$out/server.log" json="$out/bench.json" port=
  # --port 0: the kernel picks a free port, and the server logs it
  "$server" --model "$model" --port 0 "$@" > "$log" 2>&1 &
  srv=$!
  for _ in $(seq 300); do
    port=$(sed -n 's/.*"event":"listening".*"port":\([0-9]*\).*/\1/p' "$log" | head -1)
    [ -n "$port" ] && curl -sf "http://127.0.0.1:$port/health" > /dev/null 2>&1 && break
    port=
    kill -0 "$srv" 2>/dev/null || break
    sleep 0.2
  done
  if [ -z "$port" ]; then
    echo "contention_server: the server did not come up: $(tail -3 "$log")" >&2
    exit 1
  fi
  if ! "$bench" --url "http://127.0.0.1:$port" --concurrency "$conc" --duration "$secs" \
      --warmup 1 --input-len 96 --output-len 64 --no-progress --json "$json" \
      > "$out/bench.txt" 2>&1; then
    echo "contention_server: mhla-bench failed: $(tail -3 "$out/bench.txt")" >&2
    exit 1
  fi
  kill "$srv"
  wait "$srv" 2>/dev/null || true
  srv=
  python3 -c 'import json, sys
lv = json.load(open(sys.argv[1]))["levels"][0]
if lv["failed"] or not lv["completed"]:
    sys.exit("contention_server: %d requests failed, %d completed" % (lv["failed"], lv["completed"]))
print("%.1f %.2f" % (lv["output_token_throughput"], lv["itl_ms"]["p99"]))' "$json"
}

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $cores CPUs; $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "model $model, $conc streams of 96-token prompts and 64 tokens out, ${secs} s each;" \
  "median of $rounds rounds"
printf '%-16s | %9s %9s %9s %6s %6s | %10s %10s %10s\n' "busy loops" "output" "output" \
  "output" "" "" "ITL p99 ms" "ITL p99 ms" "ITL p99 ms"
printf '%-16s | %9s %9s %9s %6s %6s | %10s %10s %10s\n' "" "default" "adapt off" "threads 1" \
  "ratio" "off" "default" "adapt off" "threads 1"
for per_core in $levels; do
  n=$((per_core * cores))
  start_busy "$n"
  dt=() di=() ft=() fl=() st=() si=()
  for ((r = 0; r < rounds; r++)); do
    one_run > "$out/r"
    read -r a b < "$out/r"
    dt+=("$a") di+=("$b")
    one_run --thread-adapt off > "$out/r"
    read -r a b < "$out/r"
    ft+=("$a") fl+=("$b")
    one_run --threads 1 > "$out/r"
    read -r a b < "$out/r"
    st+=("$a") si+=("$b")
  done
  stop_all
  mdt=$(printf '%s\n' "${dt[@]}" | median) mdi=$(printf '%s\n' "${di[@]}" | median)
  mft=$(printf '%s\n' "${ft[@]}" | median) mfi=$(printf '%s\n' "${fl[@]}" | median)
  mst=$(printf '%s\n' "${st[@]}" | median) msi=$(printf '%s\n' "${si[@]}" | median)
  printf '%-16s | %9.1f %9.1f %9.1f %6.2f %6.2f | %10.2f %10.2f %10.2f\n' \
    "$n ($per_core per core)" "$mdt" "$mft" "$mst" \
    "$(awk -v a="$mdt" -v b="$mst" 'BEGIN {print a / b}')" \
    "$(awk -v a="$mft" -v b="$mst" 'BEGIN {print a / b}')" "$mdi" "$mfi" "$msi"
done
rm -rf "$out"
