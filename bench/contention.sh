#!/usr/bin/env bash
# contention.sh — CPU engine throughput with competing busy processes on the
# machine: the default thread count against --threads 1, under the same
# competition, for 0, 1 and 2 busy loops (`while :; do :; done`) per core.
#
# usage: bench/contention.sh [BUILD_DIR] [MODEL_DIR] [ROUNDS] [PROMPT_TOKENS] [NEW_TOKENS]
#   defaults: build, models/brown-mhla (the demo model: short steps, where
#   waiting for a descheduled thread costs the most), 3 rounds, 128, 1900
#   (the demo model's decode of 256 tokens lasts 40-70 ms, a few of the
#   scheduler's time slices: too short to measure a share of the CPU).
#
# Each round runs mhla-generate with the default threads, with the default
# threads and --thread-adapt off, and with --threads 1, back to back (greedy,
# the same prompt ids); the median of the rounds is printed for prefill and
# decode tokens/s, with default / --threads 1 ("ratio") and adapt off /
# --threads 1 ("off"). The
# busy loops are started before and killed after each competition level.
set -euo pipefail
build=${1:-build}
model=${2:-models/brown-mhla}
rounds=${3:-3}
plen=${4:-128}
gen=${5:-1900}
exe=$build/bin/mhla-generate
[ -x "$exe" ] || { echo "contention: $exe not found (build mhla-generate first)" >&2; exit 2; }
cores=$(nproc)
ids=$(seq 1 "$plen" | awk '{printf "%s%d", (NR > 1 ? "," : ""), ($1 * 7919) % 1000}')

source "$(dirname "${BASH_SOURCE[0]}")/busy_loops.sh"
trap stop_busy EXIT

# prints "prefill_tok_s decode_tok_s" of one run
one_run() {
  local err
  err=$("$exe" --model "$model" --prompt-ids "$ids" --max-tokens "$gen" --ignore-eos \
        --print-ids "$@" 2>&1 >/dev/null)
  local p d
  p=$(sed -n 's/.*prompt [0-9]* tokens in [0-9.]* s (\([0-9.]*\) tokens\/s.*/\1/p' <<<"$err")
  d=$(sed -n 's/.*generated [0-9]* tokens in [0-9.]* s (\([0-9.]*\) tokens\/s.*/\1/p' <<<"$err")
  [ -n "$p" ] && [ -n "$d" ] || { echo "contention: mhla-generate failed: $err" >&2; exit 1; }
  echo "$p $d"
}

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $cores CPUs; $(date -u '+%Y-%m-%d %H:%M UTC')"
"$exe" --model "$model" --prompt-ids 1 --max-tokens 0 2>&1 | grep -E "device|cpu " | sed 's/^/  /'
echo "model $model, prompt $plen tokens, $gen generated; median of $rounds rounds"
# "adapt off": the default thread count with every thread in every job
# (--thread-adapt off), to show what the adaptation does
printf '%-22s | %10s %10s %10s %6s %6s | %10s %10s %10s %6s %6s\n' "busy loops" "prefill" \
  "prefill" "prefill" "" "" "decode" "decode" "decode" "" ""
printf '%-22s | %10s %10s %10s %6s %6s | %10s %10s %10s %6s %6s\n' "" "default" "adapt off" \
  "threads 1" "ratio" "off" "default" "adapt off" "threads 1" "ratio" "off"
for per_core in 0 1 2; do
  n=$((per_core * cores))
  start_busy "$n"
  dp=() dd=() fp=() fd=() sp=() sd=()
  for ((r = 0; r < rounds; r++)); do
    read -r a b < <(one_run)
    dp+=("$a") dd+=("$b")
    read -r a b < <(one_run --thread-adapt off)
    fp+=("$a") fd+=("$b")
    read -r a b < <(one_run --threads 1)
    sp+=("$a") sd+=("$b")
  done
  stop_busy
  mdp=$(printf '%s\n' "${dp[@]}" | median) mdd=$(printf '%s\n' "${dd[@]}" | median)
  mfp=$(printf '%s\n' "${fp[@]}" | median) mfd=$(printf '%s\n' "${fd[@]}" | median)
  msp=$(printf '%s\n' "${sp[@]}" | median) msd=$(printf '%s\n' "${sd[@]}" | median)
  ratio() { awk -v a="$1" -v b="$2" 'BEGIN {print a / b}'; }
  printf '%-22s | %10.1f %10.1f %10.1f %6.2f %6.2f | %10.1f %10.1f %10.1f %6.2f %6.2f\n' \
    "$n ($per_core per core)" "$mdp" "$mfp" "$msp" "$(ratio "$mdp" "$msp")" \
    "$(ratio "$mfp" "$msp")" "$mdd" "$mfd" "$msd" "$(ratio "$mdd" "$msd")" \
    "$(ratio "$mfd" "$msd")"
done
