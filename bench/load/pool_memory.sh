#!/usr/bin/env bash
# What the server holds besides its state pool under load, against what
# --state-memory auto leaves for it (weights, step buffers, headroom,
# sequence buffers). Starts mhla-server with its defaults (--state-memory
# auto), runs a closed loop of mhla-bench streams with long outputs and
# samples, once a second, the resident set and the pool's pages held (in use
# or cached: page storage, once made, is kept). Prints the peaks and the
# budget's arithmetic from the log.
# usage: bench/load/pool_memory.sh [BUILD_DIR] [SECONDS] [MODEL_DIR] [CONCURRENCY]
set -euo pipefail
build=${1:-build} secs=${2:-60} model=${3:-models/brown-mhla} conc=${4:-32}
port=$((20000 + RANDOM % 20000))
out=$(mktemp -d)
"$build/bin/mhla-server" --model "$model" --port "$port" > "$out/server.log" 2>&1 &
srv=$!
trap 'kill "$srv" 2>/dev/null || true' EXIT
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$port/health" > /dev/null 2>&1 && break
  sleep 0.2
done
url="http://127.0.0.1:$port"
( while kill -0 "$srv" 2>/dev/null; do
    rss=$(awk '/VmRSS/ {print $2}' "/proc/$srv/status" 2>/dev/null || echo 0)
    m=$(curl -sf "$url/metrics" || true)
    used=$(echo "$m" | awk -F' ' '/^mhla_state_pages\{kind="used"\}/ {print $2}')
    res=$(echo "$m" | awk -F' ' '/^mhla_state_pages\{kind="cached"\}/ {print $2}')
    pb=$(echo "$m" | awk -F' ' '/^mhla_state_page_bytes/ {print $2}')
    echo "$rss ${used:-0} ${res:-0} ${pb:-0}"
    sleep 1
  done ) > "$out/samples.txt" &
sampler=$!
"$build/bin/mhla-bench" --url "$url" --concurrency "$conc" --duration "$secs" --warmup 2 \
  --input-len 520 --input-dist uniform --input-spread 504 --output-len 400 \
  --output-dist uniform --output-spread 100 --temperature 0.8 --no-progress \
  --json "$out/closed.json" > "$out/closed.txt" 2>&1 || true
hwm=$(awk '/VmHWM/ {print $2}' "/proc/$srv/status")
kill "$sampler" 2>/dev/null || true
kill -TERM "$srv"
wait "$srv" || true
trap - EXIT
cat "$out/closed.txt"
grep '"event":"state_memory' "$out/server.log" | head -2
awk -v hwm="$hwm" '
  { rss = $1 * 1024; pool = ($2 + $3) * $4
    if (pool > maxpool) maxpool = pool
    if (rss - pool > maxother) maxother = rss - pool }
  END { printf "peak RSS %.0f MiB (VmHWM); peak pool pages used + cached %.0f MiB; " \
               "peak RSS - pool pages %.0f MiB\n", hwm / 1024, maxpool / 1048576, \
               maxother / 1048576 }' "$out/samples.txt"
fives=$(grep -c '"status":5' "$out/server.log" || true)
echo "responses with a 5xx status: $fives; log and samples in $out"
