#!/usr/bin/env bash
# The mhla-server image without a container registry, built and checked on this machine.
#
#   deploy/container/build-offline.sh [--work DIR] [--keep] [--chroot]
#
# 1. A Debian 12 base root filesystem made from Debian's packages (mmdebstrap, else
#    debootstrap), from the mirrors this machine's apt is configured with.
# 2. podman path: the base imported as localhost/mhla-debian:12, deploy/container/Containerfile
#    built on it, the image run, /health and a completion asked from inside the container,
#    the image size printed, the container stopped with SIGTERM (it must exit 0).
# 3. chroot path, where this machine cannot build or run containers (user namespaces,
#    overlay, cgroups, networking), or with --chroot: the Containerfile's two stages as two
#    chroots made from the same base. The build stage runs the project's bootstrap
#    (--build-only) and the build; the runtime stage gets only the runtime packages, the
#    user 10001, the binary and the model; the server runs in it with chroot as that user,
#    with the image's ENV and ENTRYPOINT, and is asked the same questions from inside.
# It says which path it took. Needs root (chroot, mounts) and the tools of
# `deploy/bootstrap-debian.sh --container-tools`. Not part of `make test`: it downloads a
# Debian base system and the packages the build needs.
set -Eeuo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=/tmp/mhla-image
KEEP=0
FORCE_CHROOT=0
while [ $# -gt 0 ]; do
  case "$1" in
    --work) WORK=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --chroot) FORCE_CHROOT=1; shift ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "build-offline: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "build-offline: run as root (chroot, mounts)" >&2; exit 1; }

say() { echo "build-offline: $*"; }
die() { echo "build-offline: error: $*" >&2; exit 1; }
IMAGE=localhost/mhla-server:latest
BASE_IMAGE=localhost/mhla-debian:12
NAME=mhla-offline-$$
MOUNTS=()
SERVER_PID=""

cleanup() {
  set +e
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -KILL "$SERVER_PID"
  fi
  command -v podman >/dev/null && podman rm -f "$NAME" >/dev/null 2>&1
  for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do umount -l "${MOUNTS[$i]}" 2>/dev/null; done
  # never delete through a mount that is still there
  if [ "$KEEP" = 0 ] && ! grep -q " $WORK/" /proc/mounts; then rm -rf "$WORK/build-stage"; fi
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# The image's ENTRYPOINT + CMD, its ENV (NAME=VALUE a line) and HEALTHCHECK command, read
# from the Containerfile.
containerfile_json() {
  python3 - "$ROOT/deploy/container/Containerfile" "$1" <<'EOF'
import json, re, shlex, sys
text = re.sub(r"\\\n", " ", open(sys.argv[1]).read())
final = text[text.rindex("\nFROM "):]
def all_of(ins):
    return [l[len(ins) + 1:].strip() for l in final.splitlines() if l.startswith(ins + " ")]
def last(ins):
    return all_of(ins)[-1]
if sys.argv[2] == "command":
    print("\n".join(json.loads(last("ENTRYPOINT")) + sum(map(json.loads, all_of("CMD")[-1:]), [])))
elif sys.argv[2] == "env":
    print("\n".join(w for v in all_of("ENV") for w in shlex.split(v)))
else:
    print("\n".join(json.loads(re.search(r"CMD\s+(\[.*\])\s*$", last("HEALTHCHECK")).group(1))))
EOF
}

# ---- 1. the Debian base ----
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
BASE_TAR="$WORK/debian-12-base.tar"
if [ ! -s "$BASE_TAR" ]; then
  sources=""
  for f in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list; do
    [ -s "$f" ] && grep -q bookworm "$f" && { sources=$f; break; }
  done
  if command -v mmdebstrap >/dev/null; then
    say "making the Debian 12 base with mmdebstrap (mirrors: ${sources:-the default})"
    # as Debian's slim images: no manuals, documentation or translations (dpkg keeps
    # leaving them out for packages installed later)
    mmdebstrap --variant=minbase --format=tar --include=ca-certificates \
      --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
      --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
      --dpkgopt='path-exclude=/usr/share/locale/*' \
      --dpkgopt='path-include=/usr/share/locale/locale.alias' \
      bookworm "$BASE_TAR.part" ${sources:+"$sources"}
  elif command -v debootstrap >/dev/null; then
    mirror=$(grep -m1 -E '^(URIs:|deb) ' "${sources:-/etc/apt/sources.list}" | grep -oE 'https?://[^ ]+')
    say "making the Debian 12 base with debootstrap ($mirror)"
    rm -rf "$WORK/debootstrap"
    debootstrap --variant=minbase bookworm "$WORK/debootstrap" "$mirror"
    tar -C "$WORK/debootstrap" -cf "$BASE_TAR.part" .
    rm -rf "$WORK/debootstrap"
  else
    die "neither mmdebstrap nor debootstrap (deploy/bootstrap-debian.sh --container-tools)"
  fi
  mv "$BASE_TAR.part" "$BASE_TAR"
fi
say "base: $BASE_TAR ($(du -h "$BASE_TAR" | cut -f1))"

ask_inside() {  # ask_inside RUNNER... : /health and a completion, asked with bash's /dev/tcp
  local port=$1; shift
  local body='{"prompt": "The jury said", "max_tokens": 16, "temperature": 0}'
  "$@" bash -c "exec 3<>/dev/tcp/127.0.0.1/$port && printf 'GET /health HTTP/1.0\r\n\r\n' >&3 && head -n 1 <&3"
  "$@" bash -c "exec 3<>/dev/tcp/127.0.0.1/$port && printf 'POST /v1/completions HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: ${#body}\r\n\r\n%s' '$body' >&3 && cat <&3 | tail -n 1"
  echo
}

# ---- 2. podman ----
# Both paths run as `bash -e` child processes (run_path): a shell function called in an
# `if` would run with -e switched off and carry on past a failed step.
podman_path() {
  command -v podman >/dev/null || { say "podman is not installed"; return 1; }
  local store=()
  if ! podman info >/dev/null 2>&1; then
    store=(--storage-driver vfs)
    podman "${store[@]}" info >/dev/null 2>&1 || { say "podman cannot run here: $(podman info 2>&1 | tail -n 1)"; return 1; }
  fi
  local P=(podman "${store[@]}")
  say "podman path: importing the base as $BASE_IMAGE"
  "${P[@]}" import "$BASE_TAR" "$BASE_IMAGE" >/dev/null
  say "podman path: building $IMAGE from deploy/container/Containerfile"
  # docker format: the OCI format has no HEALTHCHECK
  "${P[@]}" build --format docker --isolation chroot --network host \
    --build-arg BASE_IMAGE="$BASE_IMAGE" -f "$ROOT/deploy/container/Containerfile" \
    -t "$IMAGE" "$ROOT"
  local size
  size=$("${P[@]}" image inspect --format '{{.Size}}' "$IMAGE")
  say "image $IMAGE: $size bytes ($((size / 1048576)) MiB)"
  local port
  port=$(free_port)
  # host networking (no bridge needed); the CMD's --port moves the server off 8080
  if ! "${P[@]}" run -d --name "$NAME" --network host --stop-timeout 10 "$IMAGE" \
      --model /models/brown-mhla --port "$port" --host 127.0.0.1 >/dev/null; then
    say "podman cannot run containers here: the image is built, its file system is checked"
    say "with chroot instead"
    "${P[@]}" rm -f "$NAME" >/dev/null 2>&1 || true
    rm -rf "$WORK/image-rootfs"
    mkdir -p "$WORK/image-rootfs"
    "${P[@]}" create --name "$NAME" "$IMAGE" >/dev/null
    "${P[@]}" export "$NAME" | tar -C "$WORK/image-rootfs" -xf -
    "${P[@]}" rm -f "$NAME" >/dev/null
    say "the image's root filesystem: $(du -sm "$WORK/image-rootfs" | cut -f1) MiB in $WORK/image-rootfs"
    chroot_run "$WORK/image-rootfs"
    return 3
  fi
  local t0=$SECONDS
  until "${P[@]}" exec "$NAME" bash -c "exec 3<>/dev/tcp/127.0.0.1/$port" 2>/dev/null; do
    [ $((SECONDS - t0)) -lt 120 ] || { "${P[@]}" logs "$NAME" | tail -n 5; return 1; }
    sleep 0.5
  done
  local health
  mapfile -t health < <(containerfile_json healthcheck)
  health[2]=${health[2]//8080/$port}
  "${P[@]}" exec "$NAME" "${health[@]}"
  say "the image's HEALTHCHECK command passes inside the container"
  say "asked from inside the container (podman exec):"
  ask_inside "$port" "${P[@]}" exec "$NAME"
  say "podman stop (SIGTERM, --stop-timeout 10)"
  "${P[@]}" stop -t 10 "$NAME" >/dev/null
  local code
  code=$("${P[@]}" inspect --format '{{.State.ExitCode}}' "$NAME")
  say "container exited with status $code"
  "${P[@]}" logs "$NAME" 2>&1 | grep -E '"event":"(listening|draining|stopped)"' | cut -c1-200
  [ "$code" = 0 ]
}

# ---- 3. chroot ----
mount_in() {  # mount_in ROOTFS: /proc, /sys, /dev for apt and the server
  local r=$1
  for d in proc sys dev; do
    mkdir -p "$r/$d"
    mount --rbind "/$d" "$r/$d"
    mount --make-rslave "$r/$d"
    MOUNTS+=("$r/$d")
  done
  cp /etc/resolv.conf "$r/etc/resolv.conf"
}

umount_in() {
  local r=$1
  for d in dev sys proc; do umount -l "$r/$d" 2>/dev/null || true; done
}

chroot_path() {
  say "chroot path: the Containerfile's two stages as chroots of the same base"
  rm -rf "$WORK/build-stage" "$WORK/runtime-rootfs"
  mkdir -p "$WORK/build-stage" "$WORK/runtime-rootfs"
  tar -C "$WORK/build-stage" -xf "$BASE_TAR"
  tar -C "$WORK/runtime-rootfs" -xf "$BASE_TAR"

  # build stage: the sources (as the build context: .dockerignore's exclusions), the
  # bootstrap's build tools, the build, /out
  say "build stage: bootstrap --build-only and the build"
  mkdir -p "$WORK/build-stage/src"
  tar -C "$ROOT" --exclude=./.git --exclude=./build --exclude='./build-*' \
      --exclude=node_modules --exclude=__pycache__ --exclude=./.devdeps \
      --exclude=./device-check-out -cf - . | tar -C "$WORK/build-stage/src" -xf -
  mount_in "$WORK/build-stage"
  chroot "$WORK/build-stage" /bin/bash -c '
    set -e
    cd /src
    bash deploy/bootstrap-debian.sh --build-only
    cmake -S . -B /build -DCMAKE_BUILD_TYPE=Release -DMHLA_CUDA=OFF -DMHLA_NATIVE=OFF \
          -DMHLA_ASAN_TOOLS=OFF > /build.log
    cmake --build /build -j"$(nproc)" --target mhla-server >> /build.log
    install -D -m 0755 /build/bin/mhla-server /out/usr/local/bin/mhla-server
    mkdir -p /out/models && cp -r models/brown-mhla /out/models/
    sh deploy/container/runtime-deps.sh /build/bin/mhla-server > /out/runtime-packages'
  umount_in "$WORK/build-stage"

  # runtime stage: only the runtime packages, the user, the binary and the model
  say "runtime stage: $(tr '\n' ' ' < "$WORK/build-stage/out/runtime-packages")"
  local R="$WORK/runtime-rootfs"
  cp "$WORK/build-stage/out/runtime-packages" "$R/tmp/runtime-packages"
  mount_in "$R"
  chroot "$R" /bin/bash -c '
    set -e
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        $(cat /tmp/runtime-packages) > /dev/null
    rm -rf /var/lib/apt/lists/* /tmp/runtime-packages
    groupadd --gid 10001 mhla
    useradd --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin mhla'
  install -D -m 0755 "$WORK/build-stage/out/usr/local/bin/mhla-server" "$R/usr/local/bin/mhla-server"
  cp -r "$WORK/build-stage/out/models" "$R/models"
  umount_in "$R"
  say "runtime root filesystem: $(du -sb "$R" | cut -f1) bytes ($(du -sm "$R" | cut -f1) MiB)"

  chroot_run "$R"
}

# chroot_run ROOTFS: the server as the image runs it (ENV, ENTRYPOINT + CMD, as user 10001), on
# loopback and a free port; the HEALTHCHECK command, /health and a completion from inside;
# SIGTERM, which must end it with status 0.
chroot_run() {
  local R=$1
  mount_in "$R"
  local port cmd envs health
  port=$(free_port)
  mapfile -t cmd < <(containerfile_json command)
  mapfile -t envs < <(containerfile_json env)
  say "running in the chroot as 10001:10001: ${envs[*]} ${cmd[*]} --host 127.0.0.1 --port $port"
  env "${envs[@]}" chroot --userspec=10001:10001 "$R" "${cmd[@]}" --host 127.0.0.1 \
    --port "$port" > "$WORK/server.log" 2>&1 &
  SERVER_PID=$!
  local t0=$SECONDS
  until grep -q '"event":"listening"' "$WORK/server.log"; do
    kill -0 "$SERVER_PID" 2>/dev/null || { cat "$WORK/server.log"; return 1; }
    [ $((SECONDS - t0)) -lt 120 ] || return 1
    sleep 0.2
  done
  mapfile -t health < <(containerfile_json healthcheck)
  # the image's ENV with the port the server was given (a container's HEALTHCHECK has it)
  env "${envs[@]}" MHLA_PORT="$port" chroot --userspec=10001:10001 "$R" "${health[@]}"
  say "the image's HEALTHCHECK command passes inside the chroot"
  say "asked from inside the runtime root filesystem (chroot as 10001):"
  ask_inside "$port" chroot --userspec=10001:10001 "$R"
  say "SIGTERM (the image's STOPSIGNAL)"
  kill -TERM "$SERVER_PID"
  local code=0
  wait "$SERVER_PID" || code=$?
  SERVER_PID=""
  say "server exited with status $code"
  grep -E '"event":"(listening|draining|stopped)"' "$WORK/server.log" | cut -c1-200
  umount_in "$R"
  [ "$code" = 0 ]
}

# run_path FUNCTION: FUNCTION in a child shell with -e in force and its own cleanup.
run_path() {
  local rc=0
  bash -Eeuo pipefail -c "$(declare -p ROOT WORK KEEP IMAGE BASE_IMAGE NAME BASE_TAR)
    MOUNTS=(); SERVER_PID=''
    $(declare -f say die cleanup free_port containerfile_json ask_inside podman_path \
                 mount_in umount_in chroot_path chroot_run)
    trap cleanup EXIT
    $1" || rc=$?
  return $rc
}

# podman_path: 0 = built and run; 3 = built, and its file system run with chroot
rc=1
if [ "$FORCE_CHROOT" = 0 ]; then
  rc=0
  run_path podman_path || rc=$?
fi
if [ "$FORCE_CHROOT" = 0 ] && [ "$rc" = 0 ]; then
  say "PATH TAKEN: podman (image $IMAGE built from the Containerfile and run)"
elif [ "$FORCE_CHROOT" = 0 ] && [ "$rc" = 3 ]; then
  say "PATH TAKEN: podman build + chroot (image $IMAGE built from the Containerfile; this"
  say "machine cannot run containers, so its root filesystem was run with chroot)"
else
  [ "$FORCE_CHROOT" = 1 ] || say "podman path not possible here: falling back to chroot"
  run_path chroot_path || die "chroot path failed"
  say "PATH TAKEN: chroot (the runtime stage's root filesystem at $WORK/runtime-rootfs)"
fi
