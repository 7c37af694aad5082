#!/usr/bin/env bash
# structured_throughput.sh — output tokens/s of generation held to a JSON Schema
# (response_format json_schema) against the same generation unconstrained, at
# each concurrency of LEVELS, on one mhla-server.
#
# usage: bench/structured_throughput.sh [BUILD_DIR] [MODEL_DIR] [LEVELS] [ROUNDS]
#   defaults: build, /tmp/m340l (the 340M shape with the Llama-2 tokenizer:
#   gen_checkpoint.py --shape-340m, then tokenizer.json and
#   tokenizer_config.json copied into it), levels "1 16", 1 round.
# Environment: OUTPUT_LEN (max_tokens, default 128), INPUT_LEN (prompt tokens,
# default 32), REQUESTS_PER_STREAM (measured requests per concurrent stream,
# default 2), MIN_REQUESTS (the fewest measured requests of a level, default
# 8), SERVER_ARGS (extra mhla-server flags), OUT
# (a folder for the JSON results, default a temporary one).
#
# Both sides send the same synthesized prompts with the same max_tokens and
# without ignore_eos (the server refuses ignore_eos with a grammar), so the
# grammar is the only difference. The schema asks for an array of at least 24
# objects of three required fields, longer than OUTPUT_LEN tokens for any
# model, so constrained requests run to max_tokens as the unconstrained ones
# do (a model with random weights almost never samples its end id) and
# request turnover weighs the same on both. Each measurement first runs one
# request per stream, left out of the figures (warm-up: the grammar is
# compiled then, once per server, and most of its token classes computed,
# as the first requests of a schema pay in service). Within a round the two sides
# alternate (free, then constrained) at each level; the ratio is taken per
# round, and the table prints each round.
set -euo pipefail
build=${1:-build}
model=${2:-/tmp/m340l}
levels=${3:-1 16}
rounds=${4:-1}
output_len=${OUTPUT_LEN:-128}
input_len=${INPUT_LEN:-32}
per_stream=${REQUESTS_PER_STREAM:-2}
min_requests=${MIN_REQUESTS:-8}
server=$build/bin/mhla-server
bench=$build/bin/mhla-bench
for exe in "$server" "$bench"; do
  [ -x "$exe" ] || { echo "structured_throughput: $exe not found (build it first)" >&2; exit 2; }
done
[ -f "$model/tokenizer.json" ] || {
  echo "structured_throughput: $model has no tokenizer.json (copy one in)" >&2
  exit 2
}
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"

# Items of three required fields, at least 24 of them: no answer ends before max_tokens.
schema='{"type":"object","properties":{"orders":{"type":"array","minItems":24,"items":{"type":"object","properties":{"sku":{"type":"string","maxLength":12},"qty":{"type":"integer","minimum":1,"maximum":999},"status":{"enum":["open","paid","shipped"]}},"required":["sku","qty","status"],"additionalProperties":false}}},"required":["orders"],"additionalProperties":false}'
extra="{\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"orders\",\"schema\":$schema}}}"

srv=
stop_server() {
  [ -n "$srv" ] && { kill "$srv" 2>/dev/null || true; wait "$srv" 2>/dev/null || true; }
  srv=
}
trap stop_server EXIT

# Starts the server (--port 0: the kernel picks a free port, which the server logs).
start_server() {
  local log="$out/server.log"
  # shellcheck disable=SC2086 # SERVER_ARGS is a list of flags
  "$server" --model "$model" --port 0 ${SERVER_ARGS:-} > "$log" 2>&1 &
  srv=$!
  port=
  for _ in $(seq 600); do
    port=$(sed -n 's/.*"event":"listening".*"port":\([0-9]*\).*/\1/p' "$log" | head -1)
    [ -n "$port" ] && curl -sf "http://127.0.0.1:$port/health" > /dev/null 2>&1 && return 0
    port=
    kill -0 "$srv" 2>/dev/null || break
    sleep 0.2
  done
  echo "structured_throughput: the server did not come up: $(tail -3 "$log")" >&2
  exit 1
}

# One measurement: concurrency $1, side $2 (free or schema), round $3.
measure() {
  local c=$1 side=$2 r=$3 n=$(($1 * per_stream))
  [ "$n" -ge "$min_requests" ] || n=$min_requests
  local args=(--url "http://127.0.0.1:$port" --concurrency "$c" --requests "$n"
    --warmup-requests "$c" --input-len "$input_len" --output-len "$output_len"
    --num-prompts 64 --no-ignore-eos --no-progress --json "$out/c$c-$side-r$r.json")
  [ "$side" = schema ] && args+=(--body-extra "$extra")
  "$bench" "${args[@]}" > "$out/c$c-$side-r$r.txt" 2>&1 || {
    echo "structured_throughput: mhla-bench failed: $(tail -3 "$out/c$c-$side-r$r.txt")" >&2
    exit 1
  }
}

start_server
echo "# $(date -u '+%Y-%m-%d %H:%M:%S') UTC, $model, max_tokens $output_len, prompts of $input_len tokens"
for r in $(seq "$rounds"); do
  for c in $levels; do
    measure "$c" free "$r"
    measure "$c" schema "$r"
  done
done
echo "# done $(date -u '+%Y-%m-%d %H:%M:%S') UTC; results in $out"
# One constrained answer's start, to show the grammar held the text.
body="{\"prompt\":\"Orders:\",\"max_tokens\":48,${extra:1:${#extra}-2}}"
curl -sf "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' -d "$body" |
  python3 -c 'import json,sys; print("# a constrained answer starts: %r" % json.load(sys.stdin)["choices"][0]["text"][:160])'

python3 - "$out" "$levels" "$rounds" <<'EOF'
import json, sys
out, levels, rounds = sys.argv[1], sys.argv[2].split(), int(sys.argv[3])
def level(c, side, r):
    with open("%s/c%s-%s-r%d.json" % (out, c, side, r)) as f:
        return json.load(f)["levels"][0]
print("| concurrency | round | free tok/s | schema tok/s | schema / free | tokens per request free / schema | failed |")
print("|---|---|---|---|---|---|---|")
for c in levels:
    for r in range(1, rounds + 1):
        f, s = level(c, "free", r), level(c, "schema", r)
        ft, st = f["output_token_throughput"], s["output_token_throughput"]
        per = lambda x: x["output_tokens"] / max(1, x["completed"])
        print("| %s | %d | %.2f | %.2f | %.3f | %.1f / %.1f | %d / %d |"
              % (c, r, ft, st, st / ft if ft else 0, per(f), per(s), f["failed"], s["failed"]))
EOF
