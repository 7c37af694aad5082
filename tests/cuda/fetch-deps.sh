#!/bin/bash
# tests/cuda/fetch-deps.sh — downloads (here, where Debian's archive is
# reachable) the .debs an engine-only build needs (and the server's, which
# device-check.sh builds when they load), into .devdeps/, for a GPU
# check machine that has CUDA but not these libraries and no network.
# device-check.sh unpacks them there when the system lacks them.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$root/.devdeps"
cd "$root/.devdeps"
apt-get download libcjson1 libcjson-dev libpcre2-8-0 libpcre2-dev libutf8proc2 libutf8proc-dev \
    libmicrohttpd12 libmicrohttpd-dev libjemalloc2 libjemalloc-dev \
    2>&1 | grep -v "^W: Download is performed unsandboxed" || true
ls -1 *.deb
