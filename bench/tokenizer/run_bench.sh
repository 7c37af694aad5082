#!/bin/sh
# Encode MB/s of ours and of the reference on the same 10 MB text, in one run; writes
# bench/tokenizer/RESULTS.md. usage: bench/tokenizer/run_bench.sh BUILD_DIR
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
data=$build/tests/tokenizer/data
"$here/../../tests/tokenizer/setup.sh"
[ -f "$data/gpt2/tokenizer.json" ] || node "$here/../../tests/tokenizer/build_tokenizers.mjs" "$data"
text=$build/bench-tokenizer-10MB.txt
[ -f "$text" ] || node "$here/make_text.mjs" "$text"
out=$here/RESULTS.md
{
  echo "# Tokenizer encode throughput"
  echo
  echo "Date: $(date -u +%Y-%m-%dT%H:%MZ)  "
  echo "Machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) CPUs ($(lscpu | sed -n 's/^Architecture: *//p'))  "
  echo "Command: \`bench/tokenizer/run_bench.sh $build\` (one thread, 10 MB text in 64 KB newline-aligned chunks, best of 3)"
  echo
  echo "| tokenizer | ours (mhla_tokenizer) | reference (@huggingface/tokenizers, node $(node --version)) |"
  echo "|---|---|---|"
  for t in gpt2 llama3 llama2; do
    o=$("$build/bin/bench_tokenizer_encode" "$data/$t/tokenizer.json" "$text" 3)
    r=$(node "$here/bench_reference.mjs" "$data/$t/tokenizer.json" "$text" 3)
    echo "| $t | $o | $r |"
  done
} > "$out.tmp"
mv "$out.tmp" "$out"
cat "$out"
