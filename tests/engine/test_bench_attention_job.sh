#!/usr/bin/env bash
# test_bench_attention_job.sh — bench_attention_job on the demo model: a row
# per batch and position, each with two positive median step times and their
# ratio, the ratio the one the times give. A change to the engine's
# attention_job option or to the benchmark's table that breaks it fails here.
# usage: test_bench_attention_job.sh BUILD_DIR MODEL_DIR
set -euo pipefail
build=$1 model=$2
out=$("$build/bin/bench_attention_job" "$model" --batch 16,20 --positions 10,40 --steps 6 2>&1) ||
  { echo "bench_attention_job failed:"; echo "$out"; exit 1; }
echo "$out"
num='[0-9]+\.[0-9]+'
rows=$(grep -E "^\| [0-9]+ \| [0-9]+ \| $num \| $num \| $num \|$" <<<"$out" || true)
n=0
while IFS='|' read -r _ b p never auto ratio _; do
  awk -v n="$never" -v a="$auto" -v r="$ratio" \
    'BEGIN { d = n / a - r; exit !(n > 0 && a > 0 && r > 0 && d * d < 1e-4 * r * r) }' ||
    { echo "FAIL: batch $b position $p: $never / $auto is not $ratio"; exit 1; }
  n=$((n + 1))
done <<<"$rows"
[ "$n" -eq 4 ] || { echo "FAIL: $n rows, expected 4 (2 batches x 2 positions)"; exit 1; }
echo "PASS: 4 rows"
