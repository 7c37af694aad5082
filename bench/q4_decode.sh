#!/usr/bin/env bash
# q4_decode.sh — prefill and batch-1 decode of the 340M shape with bf16, q8 and q4 weights
# side by side, alternated round by round so that each round's ratios come from the same
# minutes of a shared machine. One bench_decode run per round and format (--batch 1 --steps
# 16 --rounds 1 --prefill PREFILL); prints per row: prefill tok/s, batch-1 tok/s (the
# 16-step window at ~100), both against the round's bf16, the paired fraction of the
# memory-bandwidth bound (each step's rate against a read-bandwidth reading right after it,
# median), the same for the step's products alone, the bandwidth readings' median, the
# process CPU time of a batch-1 step (every thread; the wall clock of a shared machine counts
# others' time, this does not) against bf16's, the load average, the kernel path and the
# q8/q4 kernel.
#
# usage: bench/q4_decode.sh [BUILD_DIR] [MODEL_DIR] [ROUNDS] [PREFILL] [THREADS] [FORMATS]
#   defaults: build /tmp/m340 (gen_checkpoint.py --shape-340m --dtype bf16) 3 512 2
#   "bf16 q8 q4"; MHLA_Q4_GROUP and MHLA_CPU_ISA pass through to bench_decode
set -euo pipefail
build=${1:-build} model=${2:-/tmp/m340} rounds=${3:-3} plen=${4:-512} threads=${5:-2}
formats=${6:-bf16 q8 q4}
exe=$build/bin/bench_decode
[ -x "$exe" ] || { echo "q4_decode: $exe not found (build bench_decode first)" >&2; exit 2; }
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'); $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "| round | weights | prefill $plen tok/s | / first | batch 1 tok/s | / first | paired fraction of the bandwidth bound | products alone | bandwidth GB/s (median) | CPU ms a step | first ÷ this | load (1 min) | path | kernel |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for r in $(seq 1 "$rounds"); do
  base_pre="" base_dec="" base_cpu=""
  for w in $formats; do
    load=$(cut -d' ' -f1 /proc/loadavg)
    out=$("$exe" "$model" --weights "$w" --batch 1 --steps 16 --rounds 1 \
      --threads "$threads" --prefill "$plen" 2>&1) || { echo "$out" >&2; exit 1; }
    pre=$(echo "$out" | sed -n 's/^prefill: [0-9]*-token prompt in [0-9.]* s: \([0-9.]*\) tokens\/s.*/\1/p')
    dec=$(echo "$out" | awk '$1 == "1" && NF > 8 { print $2; exit }')
    paired=$(echo "$out" | sed -n 's/.*paired:.*@~100 \([0-9.]*%\).*/\1/p' | head -1)
    alone=$(echo "$out" | sed -n "s/.*step's products \([0-9.]*%\).*/\1/p" | head -1)
    bw=$(echo "$out" | sed -n "s/.*paired:.*readings' median \([0-9.]*\) .*/\1/p" | head -1)
    cpu=$(echo "$out" | sed -n 's/.*process CPU time a step.*@~100 \([0-9.]*\) ms.*/\1/p' | head -1)
    path=$(echo "$out" | sed -n 's/.*kernels \([a-z0-9]*\).*/\1/p' | head -1)
    kern=$(echo "$out" | grep -o 'q[48] products with [a-z0-9() -]*[a-z0-9)]' | head -1 || true)
    [ -z "$base_pre" ] && base_pre=$pre base_dec=$dec base_cpu=$cpu
    rp=$(awk -v a="$pre" -v b="$base_pre" 'BEGIN { if (b > 0) printf "%.2f", a / b }')
    rd=$(awk -v a="$dec" -v b="$base_dec" 'BEGIN { if (b > 0) printf "%.2f", a / b }')
    rc=$(awk -v a="$base_cpu" -v b="$cpu" 'BEGIN { if (b > 0) printf "%.2f", a / b }')
    echo "| $r | $w | $pre | $rp | ${dec:-?} | $rd | ${paired:-?} | ${alone:-?} | ${bw:-?} | ${cpu:-?} | $rc | $load | ${path:-?} | ${kern:--} |"
  done
done
