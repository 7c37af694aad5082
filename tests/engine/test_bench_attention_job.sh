#!/usr/bin/env bash
# test_bench_attention_job.sh — bench/attention_job.sh over bench_decode on the
# demo model: a row of tokens/s for each pair (never, then auto, at batch 16
# and 32) and the medians of auto / never, every one a positive number. A
# change to bench_decode's output or to MHLA_ATTENTION_JOB that the script no
# longer reads fails here.
# usage: test_bench_attention_job.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1 build=$2
out=$("$src/bench/attention_job.sh" "$build" "$src/models/brown-mhla" --pairs 2 --steps 4 2>&1) ||
  { echo "attention_job.sh failed:"; echo "$out"; exit 1; }
echo "$out"
num='[0-9]+(\.[0-9]+)?'
rows=$(grep -cE "^\| [0-9]+ \| $num / $num \| $num / $num \| $num / $num \| $num / $num \|$" <<<"$out" || true)
[ "$rows" -eq 2 ] || { echo "FAIL: $rows rows of four filled cells, expected 2"; exit 1; }
med=$(grep '^median auto / never over 2 pairs:' <<<"$out" || true)
[ -n "$med" ] || { echo "FAIL: no median line"; exit 1; }
n=0
for r in $(grep -oE "[0-9]+\.[0-9]{3}" <<<"${med#*:}"); do
  awk -v r="$r" 'BEGIN { exit !(r > 0) }' || { echo "FAIL: a ratio of $r"; exit 1; }
  n=$((n + 1))
done
[ "$n" -eq 4 ] || { echo "FAIL: $n medians, expected 4: $med"; exit 1; }
echo "PASS: 2 pairs, 4 medians"
