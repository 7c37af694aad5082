#!/usr/bin/env bash
# bf16dot_prefill.sh — prefill (and batch-1 decode) of the 340M shape with the weight
# formats side by side: f32, bf16 (f32 arithmetic), bf16dot (bf16 dot products: AMX tiles
# and vdpbf16ps where the CPU has them), bf16dot with MHLA_CPU_BF16_NO_AMX=1
# MHLA_CPU_BF16_DOT=1 (vdpbf16ps alone) and with MHLA_CPU_BF16_NO_DOT=1 (the same bits from
# fmas), alternated round by round so that each round's ratios come from the same minutes of
# a shared machine. Prints one row per round and format: prefill tok/s, its ratio to the
# round's f32, batch-1 decode tok/s, the load average, the kernel path and the bf16 kernel.
#
# usage: bench/bf16dot_prefill.sh [BUILD_DIR] [MODEL_DIR] [ROUNDS] [PREFILL] [THREADS]
#   defaults: build /tmp/m340 (gen_checkpoint.py --shape-340m --seed 7) 3 512 2
set -euo pipefail
build=${1:-build} model=${2:-/tmp/m340} rounds=${3:-3} plen=${4:-512} threads=${5:-2}
exe=$build/bin/bench_decode
[ -x "$exe" ] || { echo "bf16dot_prefill: $exe not found (build bench_decode first)" >&2; exit 2; }
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'); $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "| round | weights | prefill $plen tok/s | / f32 | batch 1 tok/s | load (1 min) | path | kernel note |"
echo "|---|---|---|---|---|---|---|---|"
for r in $(seq 1 "$rounds"); do
  f32=""
  for w in f32 bf16 bf16dot bf16dot-vdpbf16ps bf16dot-fma; do
    env=() arg=$w
    [ "$w" = bf16dot-vdpbf16ps ] && env=(MHLA_CPU_BF16_NO_AMX=1 MHLA_CPU_BF16_DOT=1) arg=bf16dot
    [ "$w" = bf16dot-fma ] && env=(MHLA_CPU_BF16_NO_DOT=1) arg=bf16dot
    load=$(cut -d' ' -f1 /proc/loadavg)
    out=$(env "${env[@]}" "$exe" "$model" --weights "$arg" --batch 1 --steps 16 --rounds 1 \
      --threads "$threads" --prefill "$plen" 2>&1) || { echo "$out" >&2; exit 1; }
    pre=$(echo "$out" | sed -n 's/^prefill: [0-9]*-token prompt in [0-9.]* s: \([0-9.]*\) tokens\/s.*/\1/p')
    dec=$(echo "$out" | awk '$1 == "1" && NF > 8 { print $2; exit }')
    path=$(echo "$out" | sed -n 's/.*kernels \([a-z0-9]*\).*/\1/p' | head -1)
    note=$(echo "$out" | grep -o 'bf16 dot products with [a-z0-9+-]*' | head -1 || true)
    [ "$w" = f32 ] && f32=$pre
    ratio=$(awk -v a="$pre" -v b="$f32" 'BEGIN { if (b > 0) printf "%.2f", a / b }')
    echo "| $r | $w | $pre | $ratio | ${dec:-?} | $load | ${path:-?} | ${note:--} |"
  done
done
