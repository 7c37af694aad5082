#!/bin/bash
# tests/cuda/device-check.sh — everything the CUDA backend must show, on a
# GPU machine, in one run of under 8 minutes: build the engine with the CUDA
# backend, run every CUDA test (ctest -L gpu: f32 exactness against the
# numpy reference and the CPU on the engine's exactness configs, bf16 greedy
# agreement with the CPU, graphs, batching, prefix cache, resume, snapshots
# on the device, sampling on the device with and without token masks), then the decode/prefill benchmark on the 340M shape next
# to its memory-bandwidth bound. Writes summary.txt (and the logs) to the
# output folder.
#
# usage: tests/cuda/device-check.sh [OUT_DIR]      (default: $OUT, else ./device-check-out)
# Machines without cJSON/PCRE2/utf8proc: run tests/cuda/fetch-deps.sh where
# Debian's archive is reachable and bring .devdeps/ along.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-${OUT:-$root/device-check-out}}
mkdir -p "$out"
summary=$out/summary.txt
: >"$summary"
t0=$(date +%s)
say() { echo "$*" | tee -a "$summary"; }
elapsed() { echo "$(($(date +%s) - t0)) s"; }
jobs=$(nproc 2>/dev/null || echo 4)

say "# mhla-serve CUDA device check — $(date -u '+%Y-%m-%d %H:%M UTC')"
say "commit: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
if command -v nvidia-smi >/dev/null; then
    say "gpu: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1)"
else
    say "gpu: nvidia-smi not found"
fi
say "nvcc: $(nvcc --version 2>/dev/null | tail -1 || echo 'not on PATH')"

# ---- dependencies: the system's, else the carried .debs --------------------
prefix_args=()
# MHLA_USE_DEVDEPS=1 takes the carried .debs even where the system has the libraries.
if [ "${MHLA_USE_DEVDEPS:-0}" = 1 ] || ! echo '#include <cjson/cJSON.h>' | cc -E -x c - >/dev/null 2>&1 ||
    ! echo '#include <pcre2.h>' | cc -DPCRE2_CODE_UNIT_WIDTH=8 -E -x c - >/dev/null 2>&1 ||
    ! echo '#include <utf8proc.h>' | cc -E -x c - >/dev/null 2>&1; then
    deps=$root/.devdeps
    if ! ls "$deps"/*.deb >/dev/null 2>&1; then
        say "FAIL: cJSON/PCRE2/utf8proc headers missing and no .devdeps/*.deb (run tests/cuda/fetch-deps.sh)"
        exit 1
    fi
    mkdir -p "$deps/root"
    for f in "$deps"/*.deb; do dpkg -x "$f" "$deps/root"; done
    prefix_args=(-DCMAKE_PREFIX_PATH="$deps/root/usr" -DPKG_CONFIG_EXECUTABLE=/nonexistent)
    export LD_LIBRARY_PATH="$deps/root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    say "deps: unpacked from .devdeps (system lacks them)"
fi
# a python3 with numpy (the tests' reference and checkpoint generator)
py=""
for c in python3 /usr/bin/python3 /usr/local/bin/python3; do
    if command -v "$c" >/dev/null && "$c" -c "import numpy" 2>/dev/null; then
        py=$(command -v "$c")
        break
    fi
done
if [ -z "$py" ]; then
    say "FAIL: no python3 with numpy"
    exit 1
fi
if [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH=/usr/local/cuda/bin:$PATH
fi

# ---- build -----------------------------------------------------------------
build=$root/build-device
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DMHLA_ENGINE_ONLY=ON -DMHLA_CUDA=ON \
    -DMHLA_ASAN_TOOLS=OFF -DMHLA_PYTHON="$py" "${prefix_args[@]}" \
    >"$out/build.log" 2>&1 &&
    cmake --build "$build" -j "$jobs" >>"$out/build.log" 2>&1
if [ $? -ne 0 ]; then
    say "FAIL: build (see build.log); last lines:"
    tail -25 "$out/build.log" | tee -a "$summary"
    exit 1
fi
say "build: ok ($(elapsed))"

# ---- tests -------------------------------------------------------------------
exclude=()
if [ -x "$build/bin/mhla-server" ] && ldd "$build/bin/mhla-server" | grep -q "not found"; then
    say "mhla-server: built but a shared library is missing here; cuda.server.gpu is left out"
    exclude=(-E cuda.server.gpu)
fi
(cd "$build" && timeout 330 ctest -L gpu -V -j 4 "${exclude[@]}" >"$out/ctest.log" 2>&1)
rc=$?
say "tests (ctest -L gpu, exit $rc, $(elapsed)):"
grep -E "Test +#|tests passed|tests failed" "$out/ctest.log" | tee -a "$summary"
grep -E "^[0-9]+: +(A_|B_|C_|D_|E_|F_|G_)[a-z0-9_]+ +[0-9.e-]+$|worst relative error|greedy agreement|PASS|FAIL|SKIP|graphs = eager" \
    "$out/ctest.log" | head -60 | tee -a "$summary"
# masked rows (structured outputs) sampled on the device: cuda.sampling_mask.gpu
say "masked sampling on the device (cuda.sampling_mask.gpu): $(grep -E "cuda\.sampling_mask\.gpu .*(Passed|Failed|Skipped|\*\*\*)" "$out/ctest.log" | tail -1 | sed 's/.*\.\.\. *//')"
if grep -q "Skipped" "$out/ctest.log"; then
    say "WARNING: GPU tests were skipped: no usable GPU (see SKIP lines)"
fi

# ---- memory checker: out-of-bounds and uninitialised device accesses ----------
# (compute-sanitizer works on some GPU machines' runtimes and not on others)
san=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
if [ -n "$san" ] && [ -x "$build/bin/test_cuda_state" ]; then
    timeout 120 "$san" --tool memcheck --error-exitcode 9 "$build/bin/test_cuda_state" \
        "$build/tests/cuda/ckpt/gqa" "$build" --tol 1e-4 >"$out/sanitizer.log" 2>&1
    say "compute-sanitizer memcheck on test_cuda_state: exit $? ($(grep -h "ERROR SUMMARY" "$out/sanitizer.log" | tail -1))"
else
    say "compute-sanitizer: not run (not found)"
fi

# ---- benchmarks ----------------------------------------------------------------
ck=$build/m340
if [ ! -f "$ck/config.json" ]; then
    "$py" "$root/tests/tools/gen_checkpoint.py" --shape-340m --out "$ck" --seed 7 >"$out/gen340m.log" 2>&1 ||
        say "FAIL: generating the 340M checkpoint (gen340m.log)"
fi
bench=$build/bin/bench_decode
say ""
say "## bench_decode, 340M shape, bf16 weights, f32 state ($(elapsed))"
timeout 150 "$bench" "$ck" --device cuda --gpu-weights bf16 --batch 1,8,64,256 --steps 64 --rounds 2 \
    --state-memory 100000 2>&1 | tee "$out/bench_bf16.txt" | tee -a "$summary"
say ""
say "## bench_decode, 340M shape, f32 weights ($(elapsed))"
timeout 90 "$bench" "$ck" --device cuda --gpu-weights f32 --batch 1,64 --steps 64 --rounds 2 \
    --state-memory 100000 2>&1 | tee "$out/bench_f32.txt" | tee -a "$summary"
say ""
say "## bench_decode, bf16 weights, no CUDA graphs ($(elapsed))"
timeout 60 "$bench" "$ck" --device cuda --gpu-weights bf16 --batch 1,8 --steps 64 --rounds 1 \
    --state-memory 100000 --no-graphs 1 2>&1 | tee "$out/bench_nographs.txt" | tee -a "$summary"
say ""
say "done in $(elapsed); tests exit $rc"
exit $rc
