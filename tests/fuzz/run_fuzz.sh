#!/usr/bin/env bash
# Runs one libFuzzer target (built by build_fuzz.sh) for a bounded time from
# its seed corpus, tests/fuzz/corpus/TARGET (every input there, the regression
# inputs of past findings included, runs first). Exits 0 when clean, non-zero
# when libFuzzer finds a crash, leak, hang or sanitizer error (86; not 77, which
# ctest reads as skipped); the input that
# caused it is left in WORK_DIR (crash-*, leak-*, timeout-*).
# usage: run_fuzz.sh SOURCE_DIR FUZZ_BUILD_DIR TARGET SECONDS WORK_DIR PYTHON [libFuzzer flags]
set -euo pipefail
src=$1 bin=$2 target=$3 secs=$4 work=$5 py=$6
shift 6
if [ ! -x "$bin/fuzz_$target" ]; then
  echo "fuzz: $bin/fuzz_$target not built (clang missing?); skipped"
  exit 77
fi
rm -rf "$work" && mkdir -p "$work/corpus"
if [ -d "$src/tests/fuzz/corpus/$target" ]; then
  cp "$src/tests/fuzz/corpus/$target"/* "$work/corpus/" 2>/dev/null || true
fi
export MHLA_FUZZ_MODEL_DIR="$src/models/brown-mhla"
export MHLA_FUZZ_TOKENIZERS="$work/tokenizers"
"$py" "$src/tests/fuzz/make_tokenizers.py" "$src" "$work/tokenizers"
if [ "$target" = checkpoint ]; then
  # valid checkpoint files: the seeds, and the other half of every input
  export MHLA_FUZZ_SEED_DIR="$work/seed"
  "$py" "$src/tests/tools/gen_checkpoint.py" --out "$MHLA_FUZZ_SEED_DIR" --vocab 16 --hidden 16 \
    --layers 1 --heads 2 --chunk 4 --blocks 3 --intermediate 16 --seed 5 > /dev/null
  { printf '\x00'; cat "$MHLA_FUZZ_SEED_DIR/model.safetensors"; } > "$work/corpus/weights"
  { printf '\x01'; cat "$MHLA_FUZZ_SEED_DIR/config.json"; } > "$work/corpus/config"
fi
if [ "$target" = disk_page ]; then
  # a valid page file, as this build writes it (the committed seed may predate a format change)
  MHLA_FUZZ_DISK_SEED="$work/corpus/valid_now" "$bin/fuzz_$target"
fi
cd "$work"
set +e
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 "$bin/fuzz_$target" corpus \
  -max_total_time="$secs" -max_len=65536 -timeout=10 -error_exitcode=86 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$work/" "$@" > "$work/fuzz.log" 2>&1
status=$?
set -e
tail -25 "$work/fuzz.log"
if [ "$status" -eq 0 ]; then
  echo "fuzz: $target ran ${secs}s without a finding; 1 passed, 0 failed"
else
  echo "fuzz: $target found a problem (exit $status); inputs: $(ls "$work" | grep -E '^(crash|leak|timeout|oom)-' | tr '\n' ' ')"
fi
exit "$status"
