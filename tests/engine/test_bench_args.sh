#!/usr/bin/env bash
# test_bench_args.sh — bench_decode refuses what it cannot run, before it loads a model:
# an option without its value, counts that are not integers in range, malformed lists,
# unknown values, each with exit status 2 and a message naming the option. Options that
# are all valid get past the checks (the missing model is the error then).
# usage: test_bench_args.sh BUILD_DIR
set -uo pipefail
bench=$1/bin/bench_decode
model=/nonexistent-model-dir
fails=0
expect() { # expect STATUS PATTERN ARGS...
  local want=$1 pat=$2
  shift 2
  local out rc
  out=$("$bench" "$@" 2>&1)
  rc=$?
  if [ "$rc" -ne "$want" ] || ! grep -qE -- "$pat" <<<"$out"; then
    echo "FAIL: bench_decode $*: status $rc (want $want), output:"
    echo "$out" | head -5
    fails=$((fails + 1))
  else
    echo "ok: bench_decode $* -> $rc: $(head -1 <<<"$out")"
  fi
}
expect 2 "usage" --help
expect 2 "'--steps' needs a value" "$model" --steps
expect 2 "'--rounds' needs a value" "$model" --batch 1 --rounds
expect 2 "--steps takes an integer from 1" "$model" --steps 0
expect 2 "--steps takes an integer from 1" "$model" --steps 12x
expect 2 "--threads takes an integer" "$model" --threads -1
expect 2 "--rounds takes an integer" "$model" --rounds 99999999999999999999
expect 2 "--batch takes a list" "$model" --batch 1,,16
expect 2 "--batch takes an integer from 1 to 1024" "$model" --batch 1,0
expect 2 "--batch takes a list" "$model" --batch 16,
expect 2 "--prefill takes an integer" "$model" --prefill 512,abc
expect 2 "--state takes f32 or bf16" "$model" --state f16
expect 2 "--no-graphs takes an integer from 0 to 1" "$model" --no-graphs 2
expect 2 "--warmup takes an integer from 0" "$model" --warmup -1
expect 2 "unknown option '--stpes'" "$model" --stpes 4
# all valid: the checks pass, and the model directory is what fails
expect 1 "nonexistent-model-dir" "$model" --batch 1,16 --steps 4 --rounds 1 --warmup 0 \
  --threads 2 --prefill 64 --state bf16 --state-memory 64
[ "$fails" -eq 0 ] || { echo "FAIL: $fails case(s)"; exit 1; }
echo "PASS"
