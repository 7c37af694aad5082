#!/bin/sh
# runtime-deps.sh BINARY: the Debian packages that hold the shared libraries BINARY links
# (one per line), for the image's runtime stage. Libraries of the base image's CUDA
# toolkit (/usr/local/cuda) are left out: the runtime base provides them.
set -eu
pkgs=""
for lib in $(ldd "$1" | awk '/=> \// {print $3}'); do
  case "$lib" in /usr/local/cuda*) continue ;; esac
  real=$(readlink -f "$lib")
  owner=$(dpkg -S "$lib" 2>/dev/null || dpkg -S "$real" 2>/dev/null ||
          dpkg -S "${real#/usr}" 2>/dev/null || true)
  [ -n "$owner" ] || { echo "runtime-deps: no package holds $lib" >&2; exit 1; }
  pkgs="$pkgs ${owner%%:*}"
done
printf '%s\n' $pkgs | sort -u
