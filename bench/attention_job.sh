#!/usr/bin/env bash
# attention_job.sh — batch 16 and 32 decode with the attention as one job of
# the pool (MHLA_ATTENTION_JOB=auto, the default: from 16 sequences a step)
# against the in-turn form (never), in alternating bench_decode runs, so both
# see the same minutes of a shared host.
#
# usage: bench/attention_job.sh [BUILD_DIR] [MODEL_DIR] [options]
#   --pairs N        runs of each form, alternating (default 5)
#   --weights W      f32, bf16 or q8 (default bf16)
#   --cpu-isa P      the kernel path (default: the best the CPU runs)
#   --steps N        decode steps a run (default 24)
#   --threads N      (default 2)
# Defaults: BUILD_DIR build, MODEL_DIR /tmp/m340 (gen_checkpoint.py
# --shape-340m --seed 7; batch 32 at ~1,900 holds about 13 GB of state).
#
# Prints each pair's tokens/s, never then auto, at batch 16 and 32, positions
# ~100 and ~1,900, and per cell the median over the pairs of auto / never.
set -euo pipefail
build=${1:-build}
model=${2:-/tmp/m340}
shift $(($# >= 2 ? 2 : $#))
pairs=5 weights=bf16 isa=auto steps=24 threads=2
while [ $# -gt 0 ]; do
  case $1 in
    --pairs) pairs=$2 ;;
    --weights) weights=$2 ;;
    --cpu-isa) isa=$2 ;;
    --steps) steps=$2 ;;
    --threads) threads=$2 ;;
    *) echo "attention_job: unknown option '$1'" >&2; exit 2 ;;
  esac
  shift 2
done
exe=$build/bin/bench_decode
[ -x "$exe" ] || { echo "attention_job: $exe not found (build bench_decode first)" >&2; exit 2; }
[ -d "$model" ] || { echo "attention_job: model $model not found" >&2; exit 2; }

# "b16@100 b16@1900 b32@100 b32@1900" tokens/s of one run
one_run() {
  local out
  out=$(MHLA_ATTENTION_JOB=$1 "$exe" "$model" --batch 16,32 --steps "$steps" --rounds 1 \
        --threads "$threads" --weights "$weights" --cpu-isa "$isa" --prefill 1 2>&1) || {
    echo "attention_job: bench_decode failed: $(tail -1 <<<"$out")" >&2
    exit 1
  }
  awk '($1 == 16 || $1 == 32) && $5 == "|" { r[$1] = $2 " " $3 }
       END { if (!(16 in r) || !(32 in r)) exit 1; print r[16], r[32] }' <<<"$out" || {
    echo "attention_job: no batch 16/32 rows in bench_decode's output" >&2
    exit 1
  }
}

echo "weights $weights, path $isa, $threads threads, $steps steps a run, $(date -u +%FT%TZ)"
echo "| pair | never b16 @~100 / @~1,900 | auto b16 | never b32 @~100 / @~1,900 | auto b32 |"
echo "|---|---|---|---|---|"
ratios=()
for i in $(seq "$pairs"); do
  read -r n1 n2 n3 n4 <<<"$(one_run never)"
  read -r a1 a2 a3 a4 <<<"$(one_run auto)"
  echo "| $i | $n1 / $n2 | $a1 / $a2 | $n3 / $n4 | $a3 / $a4 |"
  ratios+=("$(awk -v a="$a1 $a2 $a3 $a4" -v n="$n1 $n2 $n3 $n4" \
    'BEGIN { split(a, x); split(n, y); for (k = 1; k <= 4; k++) printf "%s%.4f", (k > 1 ? " " : ""), x[k] / y[k] }')")
done
line="median auto / never over $pairs pairs:"
names=("b16 @~100" "b16 @~1,900" "b32 @~100" "b32 @~1,900")
for k in 1 2 3 4; do
  m=$(printf '%s\n' "${ratios[@]}" | awk -v k="$k" '{ print $k }' | sort -g |
      awk '{ a[NR] = $1 } END { printf "%.3f", NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }')
  if [ "$k" -lt 4 ]; then m="$m,"; fi
  line="$line ${names[k - 1]} $m"
done
echo "$line"
