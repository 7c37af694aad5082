#!/usr/bin/env bash
# Installs what mhla-serve needs to build and test on Debian, when missing,
# then the test-only npm packages of each test suite that has a setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
# --build-only: just what compiling needs (the container image's build stage: no test
# tools, no PyTorch, no npm packages). --container-tools: only what
# deploy/container/build-offline.sh uses to make and run the image without a registry.
mode=${1:-all}
case "$mode" in
  all|--build-only|--container-tools) ;;
  *) echo "usage: $0 [--build-only|--container-tools]" >&2; exit 2 ;;
esac

pkgs=(build-essential cmake pkg-config python3 python3-numpy python3-pytest python3-jinja2 python3-jsonschema
      libmicrohttpd-dev libcjson-dev libjemalloc-dev libopenblas-dev libxxhash-dev
      libpcre2-dev libutf8proc-dev libcurl4-openssl-dev valgrind
      clang libclang-rt-14-dev clang-format)
# Node.js may already come from elsewhere; Debian's is used only when absent.
command -v node >/dev/null 2>&1 || pkgs+=(nodejs)
command -v npm >/dev/null 2>&1 || pkgs+=(npm)
# PyTorch (CPU) for train/ and its tests (tests/train: the training forward vs the numpy
# reference, C engine vs PyTorch perplexity, a train.py run). Large (hundreds of MB with
# its dependencies), but the first of those tests is about the torch model itself.
pkgs+=(python3-torch)
# deploy/: HAProxy for the local cluster of replicas (deploy/local-cluster.sh, tests/deploy);
# systemd for `systemd-analyze verify` of deploy/systemd (tests/deploy).
pkgs+=(haproxy systemd)
# Debian's Chromium for the playground's browser test (tests/webui: headless, driven by
# playwright-core, which downloads no browser of its own), and a font for its screenshot.
pkgs+=(chromium fonts-dejavu-core)
if [ "$mode" = --container-tools ]; then
  pkgs=(mmdebstrap debootstrap podman buildah uidmap slirp4netns fuse-overlayfs curl)
fi
if [ "$mode" = --build-only ]; then
  # python3: CMake's configure looks for it (the tests' scripts); numpy is the tests' only.
  pkgs=(build-essential cmake pkg-config python3 libmicrohttpd-dev
        libcjson-dev libjemalloc-dev libpcre2-dev libutf8proc-dev libcurl4-openssl-dev
        libxxhash-dev)
fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
if [ ${#missing[@]} -gt 0 ]; then
  echo "bootstrap: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The aarch64 cross toolchain, qemu-user and the arm64 libraries the engine needs, for the
# NEON kernels' test under qemu (engine.isa_aarch64_qemu, about a minute of `make test`).
# MHLA_CROSS=1: required (an install that fails fails the bootstrap); MHLA_CROSS=0: left
# out; unset: tried in the default mode only. A try that fails (a mirror without arm64
# packages) says so, takes the arm64 architecture back out of dpkg where it put it in,
# and the test then skips.
cross_pkgs=(gcc-aarch64-linux-gnu g++-aarch64-linux-gnu qemu-user
            libcjson-dev:arm64 libpcre2-dev:arm64 libutf8proc-dev:arm64 libxxhash-dev:arm64)
install_cross() {
  local need=() added=0 p
  for p in "${cross_pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || need+=("$p")
  done
  [ ${#need[@]} -gt 0 ] || return 0
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    $sudo dpkg --add-architecture arm64 || return 1
    added=1
  fi
  echo "bootstrap: installing ${need[*]}"
  if $sudo apt-get update -qq &&
     DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
       "${need[@]}"; then
    return 0
  fi
  if [ "$added" = 1 ]; then
    $sudo dpkg --remove-architecture arm64 && $sudo apt-get update -qq || true
  fi
  return 1
}
cross=${MHLA_CROSS:-}
[ -n "$cross" ] || { [ "$mode" = all ] && cross=try || cross=0; }
if [ "$cross" != 0 ] && ! install_cross; then
  [ "$cross" != 1 ] || { echo "bootstrap: the aarch64 cross tools failed to install" >&2; exit 1; }
  echo "bootstrap: the aarch64 cross tools could not be installed;" \
       "engine.isa_aarch64_qemu will be skipped" >&2
fi

[ "$mode" = all ] || exit 0
for setup in tests/*/setup.sh; do
  [ -f "$setup" ] || continue
  echo "bootstrap: $setup"
  bash "$setup"
done
