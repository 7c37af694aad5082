#!/usr/bin/env bash
# isa_table.sh — bench_decode for every CPU kernel path this machine runs,
# for each weight format, printed as one markdown table: prefill of 512 and
# 2,000 tokens, decode at batch 1, 16 and 32 at positions ~100 and ~1,900,
# each rate with its fraction of its bound (batch 1: the memory-bandwidth
# bound; prefill and batch 16/32: the OpenBLAS sgemm compute bound), the
# bounds measured in the same bench_decode run.
#
# usage: bench/isa_table.sh [BUILD_DIR] [MODEL_DIR] [options]
#   --paths "avx512 avx2"   kernel paths to try (default: avx512 avx2 neon; one
#                           the CPU or binary cannot run is skipped). The
#                           portable path only when named: it computes in
#                           scalar C, and bench_decode's state at ~1,900 alone
#                           costs a 1,900-token prefill (~1.3 TFLOP)
#   --weights "f32 bf16 q8" weight formats (q8 is skipped when bench_decode
#                           does not accept it)
#   --steps N --rounds N --threads N   passed to bench_decode (64, 1, 2).
#                           A window of 64 steps holds one block close (a
#                           block is 64 tokens on the 340M shape), as decoding
#                           does on average; 32 steps from ~100 or ~1,900 hold
#                           one too, twice its share (at batch 16 that step
#                           takes ~290 ms against ~70 for the median one)
#   --portable-batch LIST   batches for the portable path, which computes in
#                           scalar C (default "1"; it runs f32 only, once)
#   --log FILE              bench_decode's full output is appended there
# The defaults: BUILD_DIR build, MODEL_DIR /tmp/m340 (gen_checkpoint.py
# --shape-340m --seed 7). Batch 32 at ~1,900 holds 32 copies of a 387 MB
# state: about 13 GB of memory.
set -euo pipefail
build=${1:-build}
model=${2:-/tmp/m340}
shift $(($# >= 2 ? 2 : $#))
paths="avx512 avx2 neon"
weights="f32 bf16 q8"
steps=64 rounds=1 threads=2 pbatch=1 log=/dev/null
while [ $# -gt 0 ]; do
  case $1 in
    --paths) paths=$2 ;;
    --weights) weights=$2 ;;
    --steps) steps=$2 ;;
    --rounds) rounds=$2 ;;
    --threads) threads=$2 ;;
    --portable-batch) pbatch=$2 ;;
    --log) log=$2 ;;
    *) echo "isa_table: unknown option '$1'" >&2; exit 2 ;;
  esac
  shift 2
done
exe=$build/bin/bench_decode
[ -x "$exe" ] || { echo "isa_table: $exe not found (build bench_decode first)" >&2; exit 2; }
[ -d "$model" ] || { echo "isa_table: model $model not found" >&2; exit 2; }
usage=$("$exe" 2>&1 || true)

# "r (p%)" of a rate against a bound; "-" without a bound
frac() { awk -v r="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.1f (%.0f%%)", r, 100 * r / b;
                                        else printf "%.1f", r }'; }

echo "| path | weights | read GB/s | sgemm GFLOP/s | prefill 512 | prefill 2,000 |" \
     "batch 1 @~100 | batch 1 @~1,900 | batch 16 @~100 | batch 16 @~1,900 |" \
     "batch 32 @~100 | batch 32 @~1,900 | batch 1 paired @~100 / @~1,900 |" \
     "products alone, step's / head |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for p in $paths; do
  for w in $weights; do
    batches="1,16,32" prefill="512,2000"
    if [ "$w" = q8 ] && ! grep -q "q8" <<<"$usage"; then
      [ -n "${q8_said:-}" ] || echo "isa_table: bench_decode does not accept --weights q8: skipped" >&2
      q8_said=1
      continue
    fi
    if [ "$p" = portable ]; then
      [ "$w" = f32 ] || continue
      batches=$pbatch prefill=512
    fi
    out=$("$exe" "$model" --batch "$batches" --steps "$steps" --rounds "$rounds" \
          --threads "$threads" --weights "$w" --cpu-isa "$p" --prefill "$prefill" 2>&1) || {
      echo "isa_table: $p $w: $(tail -1 <<<"$out")" >&2
      continue
    }
    { echo "## $p $w $(date -u +%FT%TZ)"; echo "$out"; } >>"$log"
    if ! grep -q "^model:.*($w)" <<<"$out"; then
      echo "isa_table: $p $w: bench_decode ran other weights: skipped" >&2
      continue
    fi
    bw=$(sed -n 's/^bandwidth \([0-9.]*\) GB\/s.*/\1/p' <<<"$out")
    gf=$(sed -n 's/^compute: OpenBLAS sgemm \([0-9.]*\) GFLOP\/s.*/\1/p' <<<"$out")
    cb=$(sed -n 's/^compute: .* bound \([0-9.]*\) tokens\/s.*/\1/p' <<<"$out")
    row="| $p | $w | $bw | ${gf:--} |"
    for n in 512 2000; do
      # the rate and the compute bound read around that prefill
      r=$(sed -n "s/^prefill: $n-token prompt in [0-9.]* s: \([0-9.]*\) tokens\/s.*/\1/p" <<<"$out")
      pb=$(sed -n "s/^prefill: $n-token prompt .* compute bound \([0-9.]*\) tokens\/s.*/\1/p" <<<"$out")
      row="$row ${r:+$(frac "$r" "${pb:-${cb:-0}}")} |"
    done
    for b in 1 16 32; do
      line=$(awk -v b="$b" '$1 == b && $5 == "|" { print; exit }' <<<"$out")
      if [ -z "$line" ]; then
        row="$row | |"
        continue
      fi
      read -r _ lo hi _ _ _ _ _ _ mb cbb _ <<<"$line"
      bound=$cbb
      [ "$b" = 1 ] && bound=$mb
      row="$row $(frac "$lo" "$bound") | $(frac "$hi" "$bound") |"
    done
    # each batch-1 step against a bandwidth reading right after it (the median)
    pr=$(sed -n 's/.*paired: .* @~100 \([0-9.]*%\) .* @~1900 \([0-9.]*%\) .*/\1 \/ \2/p' <<<"$out")
    # the same for the step's matrix products alone, and for its head alone
    pa=$(sed -n "s/.*products alone: .* step's products \([0-9.]*%\) .* head \([0-9.]*%\) .*/\1 \/ \2/p" \
         <<<"$out")
    echo "$row ${pr:--} | ${pa:--} |"
  done
done
echo
echo "tok/s over the whole decode window (best of $rounds round(s), $steps steps); in" \
     "parentheses the fraction of the bound: batch 1 of the memory bound (read bandwidth" \
     "over the bytes a step reads), prefill and batch 16/32 of the compute bound (the" \
     "sgemm rate over 2 flops per weight), each bound the better of its readings right" \
     "before and after that measurement; the read GB/s and sgemm columns are the readings" \
     "at start. Batch 1 paired: each of $steps batch-1 steps followed by one bandwidth" \
     "reading, the median of the steps' rates as fractions of the reading after each." \
     "Products alone: the same for a step's matrix products run alone (its jobs, no" \
     "norms, token mixer or sampling) and for its output head alone (one job)."
