#!/usr/bin/env bash
# Builds the checkpoint-loader fuzz target with clang's libFuzzer and runs it
# for a bounded time from a seed corpus of valid files. Exits 0 when clean,
# non-zero when libFuzzer finds a crash, leak or sanitizer error.
# usage: run_fuzz.sh SOURCE_DIR WORK_DIR SECONDS PYTHON
set -euo pipefail
src=$1 work=$2 secs=$3 py=$4
cc=$(command -v clang || command -v clang-14 || true)
if [ -z "$cc" ]; then
  echo "fuzz: clang not installed; skipped"
  exit 77
fi
rm -rf "$work" && mkdir -p "$work/corpus"
# The engine (CPU backend only: backend_registry.c without MHLA_BACKEND_CUDA), kvstate
# and base, without the CLI tools; the CPU kernels'
# instruction-set paths of this architecture, each with its own target flags.
cflags="-std=c11 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
  -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -Wno-unknown-pragmas -ffp-contract=off
  -I$src/base/include -I$src/engine -I$src/engine/include -I$src/kvstate -I$src/kvstate/include $(pkg-config --cflags libcjson)"
srcs=$(ls "$src"/base/*.c "$src"/engine/*.c "$src"/engine/cpu/*.c "$src"/kvstate/*.c \
  2>/dev/null | grep -v '/cpu/isa_\(avx2\|avx512\|neon\)\.c$')
isa_objs=""
isa_flags() {
  case $1 in
    avx2) echo "-mavx2 -mfma" ;;
    avx512) echo "-mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx2 -mfma" ;;
    neon) echo "" ;;
  esac
}
case $(uname -m) in x86_64) isas="avx2 avx512" ;; aarch64) isas="neon" ;; *) isas="" ;; esac
for isa in $isas; do
  # shellcheck disable=SC2086
  "$cc" $cflags $(isa_flags $isa) -fsanitize=fuzzer-no-link -c "$src/engine/cpu/isa_$isa.c" \
    -o "$work/isa_$isa.o"
  isa_objs="$isa_objs $work/isa_$isa.o"
done
# shellcheck disable=SC2086
"$cc" $cflags "$src/tests/fuzz/fuzz_checkpoint.c" $srcs $isa_objs \
  $(pkg-config --libs libcjson) -lm -lpthread -o "$work/fuzz_checkpoint"
seed="$work/seed"
"$py" "$src/tests/tools/gen_checkpoint.py" --out "$seed" --vocab 16 --hidden 16 --layers 1 \
  --heads 2 --chunk 4 --blocks 3 --intermediate 16 --seed 5 > /dev/null
{ printf '\x00'; cat "$seed/model.safetensors"; } > "$work/corpus/weights"
{ printf '\x01'; cat "$seed/config.json"; } > "$work/corpus/config"
cd "$work"
MHLA_FUZZ_SEED_DIR="$seed" ASAN_OPTIONS=detect_leaks=1 ./fuzz_checkpoint corpus \
  -max_total_time="$secs" -max_len=65536 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 2>&1 |
  tail -25
status=${PIPESTATUS[0]}
[ "$status" -eq 0 ] && echo "fuzz: ${secs}s without a finding; 1 passed, 0 failed"
exit "$status"
