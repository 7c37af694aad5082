#!/usr/bin/env bash
# Builds every libFuzzer target of tests/fuzz with clang (ASan + UBSan) into
# OUT_DIR: the engine, kvstate, tokenizer and server sources (the server's
# main.c aside) go into one instrumented archive, which each fuzz_*.c links.
# Exits 77 (skipped) without clang.
# usage: build_fuzz.sh SOURCE_DIR OUT_DIR
set -euo pipefail
src=$1 out=$2
cc=$(command -v clang || command -v clang-14 || true)
if [ -z "$cc" ]; then
  echo "fuzz: clang not installed; skipped"
  exit 77
fi
ar=$(command -v llvm-ar || command -v llvm-ar-14 || command -v ar)
mkdir -p "$out/obj"
pkgs="libcjson libpcre2-8 libutf8proc libmicrohttpd"
cflags="-std=c11 -g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined
  -fno-sanitize-recover=undefined -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE
  -Wno-unknown-pragmas -march=native -ffp-contract=off $(pkg-config --cflags $pkgs)
  -I$src/engine -I$src/kvstate -I$src/tokenizer -I$src/server"
# Every library source by folder (file names may change; the folders stay),
# without the command-line tools and the GPU backends other than none.c.
srcs=$(ls "$src"/engine/*.c "$src"/engine/cpu/*.c "$src"/engine/cuda/none.c "$src"/kvstate/*.c \
          "$src"/tokenizer/*.c "$src"/server/*.c 2>/dev/null |
       grep -v -e '/tokenizer/tokenize_cli\.c$' -e '/server/main\.c$' -e '_main\.c$')
objs=()
pids=()
jobs=$(nproc)
for f in $srcs; do
  o="$out/obj/$(echo "${f#$src/}" | tr / _).o"
  objs+=("$o")
  if [ ! -e "$o" ] || [ "$f" -nt "$o" ]; then
    # -fsanitize=fuzzer-no-link: coverage feedback from the libraries too
    "$cc" $cflags -fsanitize=fuzzer-no-link -c "$f" -o "$o" 2>"$o.log" &
    pids+=($!)
    if [ "${#pids[@]}" -ge "$jobs" ]; then
      wait "${pids[0]}" || { cat "$out"/obj/*.log; exit 1; }
      pids=("${pids[@]:1}")
    fi
  fi
done
for p in "${pids[@]}"; do wait "$p" || { cat "$out"/obj/*.log; exit 1; }; done
rm -f "$out/libmhla_fuzz.a"
"$ar" rcs "$out/libmhla_fuzz.a" "${objs[@]}"
for t in "$src"/tests/fuzz/fuzz_*.c; do
  name=$(basename "$t" .c)
  "$cc" $cflags -fsanitize=fuzzer "$t" "$out/libmhla_fuzz.a" $(pkg-config --libs $pkgs) \
    -lpthread -lm -o "$out/$name"
done
echo "fuzz: built $(ls "$out"/fuzz_* | wc -l) targets in $out"
