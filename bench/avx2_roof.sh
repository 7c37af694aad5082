#!/usr/bin/env bash
# The AVX2 path's products against OpenBLAS's AVX2 sgemm (OPENBLAS_CORETYPE=Haswell) on the
# 340M shape's projections, 512 and 2,000 rows of x, one and two threads: bench_products of
# each binary given, the binaries alternating shape by shape (an interleaved before/after).
# Prints a markdown table of each format's rate as a fraction of sgemm's, in CPU time (the
# thread's with one thread, the process's with two), and the load average at each row.
#
# usage: bench/avx2_roof.sh BENCH_PRODUCTS [BENCH_PRODUCTS ...]
#   REPS (default 5 at 512 rows, 3 at 2,000), FORMATS (default f32,bf16,q8,sgemm),
#   ROWS (default "512 2000"), SHAPES (default "2816x1024 1024x2816": N x K, the MLP's
#   up/gate and down projections), THREADS (default "1 2"), ISA (default avx2).
set -euo pipefail
[ $# -ge 1 ] || { sed -n 2,11p "$0"; exit 2; }
FORMATS=${FORMATS:-f32,bf16,q8,sgemm}
ROWS=${ROWS:-512 2000}
SHAPES=${SHAPES:-2816x1024 1024x2816}
THREADS=${THREADS:-1 2}
export MHLA_CPU_ISA=${ISA:-avx2} OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-Haswell}
echo "| rows | N x K | threads | binary | f32 | bf16 | q8 | sgemm GFLOP/s | load |"
echo "|---|---|---|---|---|---|---|---|---|"
for T in $ROWS; do
    reps=${REPS:-$([ "$T" -ge 1000 ] && echo 3 || echo 5)}
    for shape in $SHAPES; do
        N=${shape%x*} K=${shape#*x}
        for th in $THREADS; do
            for bin in "$@"; do
                out=$("$bin" "$T" "$N" "$K" "$th" "$reps" "$FORMATS")
                frac() { awk -v f="$1" '$1 == f { for (i = 1; i <= NF; i++) if ($i == "of") { print $(i - 1); exit } }' <<<"$out"; }
                gf=$(awk '$1 == "sgemm" { print $5 }' <<<"$out")
                load=$(cut -d' ' -f1 /proc/loadavg)
                echo "| $T | $N x $K | $th | $(basename "$bin") | $(frac f32) | $(frac bf16) | $(frac q8) | $gf | $load |"
            done
        done
    done
done
