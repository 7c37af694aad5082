#!/usr/bin/env bash
# Builds every libFuzzer target of tests/fuzz with clang (ASan + UBSan) into
# OUT_DIR: the base, engine, kvstate, tokenizer, template, grammar and server sources (every main()
# is in tools/) go into one instrumented archive, which each fuzz_*.c links.
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
mkdir -p "$out/obj" "$out/gen"
# base/version.c reads build_info.h, which CMake writes into its build tree
# (cmake/BuildInfo.cmake); this build writes its own, with the same fields.
version=$(sed -n 's/^project(mhla-serve VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
commit=$(git -C "$src" describe --always --dirty --abbrev=12 2>/dev/null || echo unknown)
info="/* written by tests/fuzz/build_fuzz.sh */
#define MHLA_BUILD_VERSION \"${version:-unknown}\"
#define MHLA_BUILD_COMMIT \"$commit\"
#define MHLA_BUILD_TYPE \"fuzz\""
[ "$(cat "$out/gen/build_info.h" 2>/dev/null)" = "$info" ] || printf '%s\n' "$info" > "$out/gen/build_info.h"
pkgs="libcjson libpcre2-8 libutf8proc libmicrohttpd libxxhash"
cflags="-std=c11 -g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined
  -fno-sanitize-recover=undefined -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE
  -Wno-unknown-pragmas -ffp-contract=off $(pkg-config --cflags $pkgs)
  -I$src/base/include -I$src/engine -I$src/engine/include -I$src/kvstate -I$src/kvstate/include
  -I$src/tokenizer -I$src/tokenizer/include -I$src/template -I$src/template/include
  -I$src/grammar -I$src/grammar/include -I$src/server -I$src/server/include -I$out/gen"
# Every library source by folder (file names may change; the folders stay),
# without the GPU backend (backend_registry.c without MHLA_BACKEND_CUDA is the
# CPU's alone) and the CPU kernel paths of other architectures.
case $(uname -m) in
  x86_64) other_isas='/cpu/isa_neon\.c$' ;;
  aarch64) other_isas='/cpu/isa_avx(2|512)\.c$' ;;
  *) other_isas='/cpu/isa_(avx2|avx512|neon)\.c$' ;;
esac
srcs=$(ls "$src"/base/*.c "$src"/engine/*.c "$src"/engine/cpu/*.c "$src"/kvstate/*.c \
          "$src"/tokenizer/*.c "$src"/template/*.c "$src"/grammar/*.c "$src"/server/*.c 2>/dev/null | grep -Ev "$other_isas")
# each instruction-set path's kernels with their own target flags, as the build gives them
isa_flags() {
  case $1 in
    */isa_avx2.c) echo "-mavx2 -mfma" ;;
    */isa_avx512.c) echo "-mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx2 -mfma" ;;
  esac
}
# An object is rebuilt when its source or any header of these folders is newer: a changed
# struct in a header must not leave objects built against the old layout in the archive.
newest_h=$(ls -t "$src"/base/include/*.h "$src"/engine/*.h "$src"/engine/include/*.h \
              "$src"/engine/cpu/*.h "$src"/kvstate/*.h "$src"/kvstate/include/*.h \
              "$src"/tokenizer/*.h "$src"/tokenizer/include/*.h "$src"/template/*.h \
              "$src"/template/include/*.h "$src"/grammar/*.h "$src"/grammar/include/*.h \
              "$src"/server/*.h \
              "$src"/server/include/*.h 2>/dev/null | head -n 1)
objs=()
pids=()
jobs=$(nproc)
for f in $srcs; do
  o="$out/obj/$(echo "${f#$src/}" | tr / _).o"
  objs+=("$o")
  if [ ! -e "$o" ] || [ "$f" -nt "$o" ] || { [ -n "$newest_h" ] && [ "$newest_h" -nt "$o" ]; }; then
    # -fsanitize=fuzzer-no-link: coverage feedback from the libraries too
    "$cc" $cflags $(isa_flags "$f") -fsanitize=fuzzer-no-link -c "$f" -o "$o" 2>"$o.log" &
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
