#!/usr/bin/env bash
# The NEON kernel path on aarch64, from this x86-64 machine: cross-builds the
# engine with Debian's cross toolchain, then runs the exactness and
# batch-independence tests under qemu-user and compares its logits byte for
# byte with this machine's portable path (test_isa_paths.py); and the
# vector kernels' own test (test_vector_kernels.c) on the neon path.
# Skipped (exit 77) when the cross tools are missing; deploy/bootstrap-debian.sh
# (make test's first step) installs them where the mirror has arm64 packages.
#
# Single-threaded: Debian 12's qemu-user (7.2) never returns from a guest's
# first pthread_create on some hosts (a five-line program hangs the same
# way), so the programs run pinned to one CPU — the engine then starts no
# worker threads — and the runs that ask for two threads (the exactness
# test's prefill_t2 mode, test_batch_independence) are left out. Thread
# counts do not change the kernels' arithmetic; the native paths' tests
# cover them.
# usage: test_isa_aarch64_qemu.sh SOURCE_DIR NATIVE_BIN_DIR WORK_DIR PYTHON
set -euo pipefail
src=$1 nbin=$2 work=$3 py=$4
case $(uname -m) in
  x86_64) ;;
  *) echo "SKIP: the aarch64 cross test runs on x86-64 hosts"; exit 77 ;;
esac
missing=()
command -v aarch64-linux-gnu-gcc >/dev/null || missing+=(gcc-aarch64-linux-gnu)
command -v aarch64-linux-gnu-g++ >/dev/null || missing+=(g++-aarch64-linux-gnu)
command -v qemu-aarch64 >/dev/null || missing+=(qemu-user)
for lib in libcjson libpcre2-8 libutf8proc libxxhash; do
  [ -e /usr/lib/aarch64-linux-gnu/pkgconfig/$lib.pc ] || missing+=("$lib-dev:arm64")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "SKIP: missing ${missing[*]} (deploy/bootstrap-debian.sh installs them where the mirror has arm64 packages)"
  exit 77
fi
mkdir -p "$work"
build=$work/build
cmake -S "$src" -B "$build" -DCMAKE_TOOLCHAIN_FILE="$src/cmake/aarch64-linux-gnu.cmake" \
  -DCMAKE_BUILD_TYPE=Release -DMHLA_ENGINE_ONLY=ON -DMHLA_CUDA=OFF -DMHLA_ASAN_TOOLS=OFF \
  >"$work/configure.log" 2>&1 || { tail -30 "$work/configure.log"; exit 1; }
cmake --build "$build" -j2 --target mhla-generate >"$work/build.log" 2>&1 ||
  { tail -30 "$work/build.log"; exit 1; }
# test_batch_independence is not part of the engine-only build: link it here.
libs=$build/lib
# (the table of backends, without MHLA_BACKEND_CUDA, is the CPU's alone)
aarch64-linux-gnu-gcc -std=c11 -O2 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE \
  -I"$src/base/include" -I"$src/engine" -I"$src/engine/include" -I"$src/kvstate/include" \
  -I"$src/tests/common" "$src/tests/engine/test_batch_independence.c" \
  "$src/engine/backend_registry.c" "$libs/libmhla_engine_core.a" "$libs/libmhla_kvstate.a" \
  "$libs/libmhla_base.a" -lcjson -lxxhash -lm -lpthread -o "$build/bin/test_batch_independence"
# test_vector_kernels (k_gemm_acc, k_silu_mul on the neon and portable paths) likewise
aarch64-linux-gnu-gcc -std=c11 -O2 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE \
  -I"$src/base/include" -I"$src/engine" -I"$src/engine/include" -I"$src/tests/common" \
  "$src/tests/engine/test_vector_kernels.c" "$libs/libmhla_engine_core.a" \
  "$libs/libmhla_base.a" -lm -lpthread -o "$build/bin/test_vector_kernels"
# test_bd_kernels (bf16 dot products on the neon and portable paths) likewise
aarch64-linux-gnu-gcc -std=c11 -O2 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE \
  -I"$src/base/include" -I"$src/engine" -I"$src/engine/include" -I"$src/tests/common" \
  "$src/tests/engine/test_bd_kernels.c" "$libs/libmhla_engine_core.a" \
  "$libs/libmhla_base.a" -lm -lpthread -o "$build/bin/test_bd_kernels"
# test_q4_kernels (4-bit weights on the neon and portable paths, sdot and smull) likewise
aarch64-linux-gnu-gcc -std=c11 -O2 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE \
  -I"$src/base/include" -I"$src/engine" -I"$src/engine/include" -I"$src/tests/common" \
  "$src/tests/engine/test_q4_kernels.c" "$libs/libmhla_engine_core.a" \
  "$libs/libmhla_base.a" -lm -lpthread -o "$build/bin/test_q4_kernels"
file "$build/bin/mhla-generate" | sed 's/, BuildID.*//'
# one thread: qemu-user 7.2's pthread_create never returned on the project's x86-64 machines
taskset -c 0 qemu-aarch64 -L /usr/aarch64-linux-gnu "$build/bin/test_vector_kernels" 1
taskset -c 0 qemu-aarch64 -L /usr/aarch64-linux-gnu "$build/bin/test_bd_kernels" 1
taskset -c 0 qemu-aarch64 -L /usr/aarch64-linux-gnu "$build/bin/test_q4_kernels" 1
MHLA_CPU_Q8_NO_DOT=1 taskset -c 0 qemu-aarch64 -L /usr/aarch64-linux-gnu \
  "$build/bin/test_q4_kernels" 1
# The tests run the programs in --bin: wrappers that start them under qemu.
bin=$work/bin
mkdir -p "$bin"
for p in mhla-generate test_batch_independence; do
  printf '#!/bin/sh\nexec taskset -c 0 qemu-aarch64 -L /usr/aarch64-linux-gnu %s "$@"\n' \
    "$build/bin/$p" >"$bin/$p"
  chmod +x "$bin/$p"
done
"$py" "$src/tests/engine/test_isa_paths.py" --bin "$nbin" --work "$work/native" --isa portable \
  --skip-exactness --skip-batch --save-dir "$work/native_logits"
"$py" "$src/tests/engine/test_isa_paths.py" --bin "$bin" --work "$work/neon" --isa neon \
  --ref-dir "$work/native_logits" --skip-batch --exactness-modes prefill,decode,splits1,splits2
