#!/bin/sh
# Builds llama.cpp's llama-bench, llama-batched-bench and llama-server twice
# with llama.cpp's own CMake: build-native (-march=native, its default ISA
# path here) and build-avx2 (AVX2/FMA/F16C, no AVX-512), so the AVX2-only
# comparison runs both engines restricted to the same instructions.
# Usage: build_llama.sh LLAMA_DIR [JOBS]   (or LLAMA_CPP_DIR=...)
set -eu
dir=${1:-${LLAMA_CPP_DIR:-}}
jobs=${2:-2}
if [ -z "$dir" ] || [ ! -f "$dir/CMakeLists.txt" ]; then
	echo "build_llama.sh: no llama.cpp tree given (argument or LLAMA_CPP_DIR); nothing built" >&2
	exit 0
fi
targets="llama-bench llama-batched-bench llama-server"
common="-DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DGGML_CCACHE=ON"
cd "$dir"
# shellcheck disable=SC2086 # option lists are word lists
cmake -B build-native $common -DGGML_NATIVE=ON >/dev/null
# shellcheck disable=SC2086
cmake --build build-native -j"$jobs" --target $targets
# shellcheck disable=SC2086
cmake -B build-avx2 $common -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON \
	-DGGML_BMI2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX_VNNI=OFF \
	-DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF \
	-DGGML_AVX512_BF16=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF \
	-DGGML_AMX_BF16=OFF >/dev/null
# shellcheck disable=SC2086
cmake --build build-avx2 -j"$jobs" --target $targets
echo "built: $dir/build-native/bin and $dir/build-avx2/bin" >&2
