#!/usr/bin/env bash
# A 60-second mixed load against mhla-server with the bundled mhla-bench:
# a closed loop of 8 streams with prompts of 16-1,024 tokens and outputs of
# 16-128 tokens, plus Poisson arrivals at 2 req/s of long prompts (1,500
# tokens) with short outputs. Reports completed/failed requests (5xx among
# them), throughput, and the server's peak resident memory.
# usage: bench/load/load_mixed.sh [BUILD_DIR] [SECONDS] [MODEL_DIR]
set -euo pipefail
build=${1:-build} secs=${2:-60} model=${3:-models/brown-mhla}
port=$((20000 + RANDOM % 20000))
out=$(mktemp -d)
"$build/bin/mhla-server" --model "$model" --port "$port" --state-memory 512 \
  > "$out/server.log" 2>&1 &
srv=$!
trap 'kill "$srv" 2>/dev/null || true' EXIT
for _ in $(seq 50); do
  curl -sf "http://127.0.0.1:$port/health" > /dev/null 2>&1 && break
  sleep 0.2
done
peak=0
( while kill -0 "$srv" 2>/dev/null; do
    rss=$(awk '/VmRSS/ {print $2}' "/proc/$srv/status" 2>/dev/null || echo 0)
    echo "$rss"
    sleep 1
  done ) > "$out/rss.txt" &
sampler=$!
url="http://127.0.0.1:$port"
"$build/bin/mhla-bench" --url "$url" --concurrency 8 --duration "$secs" --warmup 2 \
  --input-len 520 --input-dist uniform --input-spread 504 --output-len 72 \
  --output-dist uniform --output-spread 56 --temperature 0.8 --no-progress \
  --json "$out/closed.json" > "$out/closed.txt" 2>&1 &
b1=$!
"$build/bin/mhla-bench" --url "$url" --rate 2 --arrivals poisson --duration "$secs" \
  --warmup 2 --input-len 1500 --output-len 16 --num-prompts 4 --no-progress \
  --json "$out/open.json" > "$out/open.txt" 2>&1 &
b2=$!
rc=0
wait "$b1" || rc=1
wait "$b2" || rc=1
hwm=$(awk '/VmHWM/ {print $2}' "/proc/$srv/status")
kill "$sampler" 2>/dev/null || true
kill -TERM "$srv"
wait "$srv" || true
trap - EXIT
echo "== closed loop, concurrency 8, mixed lengths"
cat "$out/closed.txt"
echo "== open loop, Poisson 2 req/s, 1,500-token prompts"
cat "$out/open.txt"
fives=$(grep -c '"status":5' "$out/server.log" || true)
echo "== server: peak RSS $((hwm / 1024)) MiB (VmHWM); responses with a 5xx status: $fives"
echo "   log and results in $out"
[ "$fives" -eq 0 ] || rc=1
exit "$rc"
