#!/usr/bin/env bash
# Measures the README's path on a fresh Debian 12 box: a bookworm root made with
# debootstrap, then inside it (chroot) what the README tells a new user, each phase timed:
#   prerequisites  apt-get install git make curl (the README's first line)
#   clone          git clone SOURCE mhla-serve
#   make run       `make run` until the server's "listening" log line
#   first answer   the README's first curl request until its answer
# then the packages installed and the programs built, checked against what `make run`
# promises (no PyTorch, Node, qemu or HAProxy; only the six programs).
#
# usage: tools/freshbox.sh [-p PORT] [-v VARIANT] [-k] DIR MIRROR SOURCE
#   DIR      a new or empty directory for the root (DIR/root) and the record (DIR/*.log,
#            DIR/times.tsv, DIR/packages.txt); nothing outside it is written
#   MIRROR   the Debian mirror, e.g. http://deb.debian.org/debian
#   SOURCE   the repository to clone: a local git directory (bind-mounted read-only and
#            cloned as file:///mnt/source) or a URL (cloned as is)
#   -p PORT  the server's port (MHLA_PORT; default 8080; the chroot shares the network)
#   -v       debootstrap's variant: default (the Priority: important set, as an installed
#            server has) or minbase (default: default)
#   -k       keep DIR/root afterwards (removed by default: about 1.5 GB)
# Runs as root, in its own mount namespace: the mounts it makes (proc, sys, dev, dev/pts,
# the source) are invisible to the host and unmounted on exit by a trap. Needs network
# to the mirror; takes minutes. Not a ctest test.
set -euo pipefail

# The mounts live in a private mount namespace: re-executed inside one, once.
if [ "${FRESHBOX_NS:-}" != 1 ]; then
  [ "$(id -u)" -eq 0 ] || { echo "freshbox: run as root (debootstrap, chroot, mounts)" >&2; exit 1; }
  exec env FRESHBOX_NS=1 unshare --mount --propagation private -- bash "$0" "$@"
fi

port=8080 variant=default keep=0
while getopts "p:v:k" o; do
  case "$o" in
    p) port=$OPTARG ;;
    v) variant=$OPTARG ;;
    k) keep=1 ;;
    *) sed -n '/^# usage/,/^# Runs/p' "$0" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -eq 3 ] || { sed -n '/^# usage/,/^# Runs/p' "$0" >&2; exit 2; }
dir=$1 mirror=$2 source=$3
case "$variant" in default|minbase) ;; *) echo "freshbox: -v default|minbase" >&2; exit 2 ;; esac

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
root=$dir/root
[ ! -e "$root" ] || [ -z "$(ls -A "$root")" ] || {
  echo "freshbox: $root is not empty" >&2; exit 1; }
mkdir -p "$root"

server_pid=""
mounts=()
cleanup() {
  local m i
  if [ -n "$server_pid" ]; then
    kill -TERM -- "-$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
    m=${mounts[i]}
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
  done
  if [ "$keep" = 0 ] && ! findmnt -rn -o TARGET | grep -q "^$root"; then
    rm -rf "$root"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mnt() { # mnt TARGET MOUNT-ARGS...: mounts and remembers it for the trap
  local target=$1
  shift
  mkdir -p "$target"
  mount "$@" "$target"
  mounts+=("$target")
}

now() { date +%s.%N; }
times=$dir/times.tsv
printf 'phase\tseconds\n' >"$times"
phase() { # phase NAME START: one row of times.tsv
  awk -v name="$1" -v t0="$2" -v t1="$(now)" 'BEGIN { printf "%s\t%.1f\n", name, t1 - t0 }' |
    tee -a "$times"
}

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -n 1), $(nproc) CPUs"
  echo "mirror: $mirror"
  echo "variant: $variant"
  echo "source: $source"
  if [ -d "$source" ]; then echo "commit: $(git -C "$source" rev-parse HEAD)"; fi
  echo "port: $port"
  echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$dir/record.txt"

t=$(now)
vopt=()
[ "$variant" = default ] || vopt=(--variant="$variant")
debootstrap "${vopt[@]}" bookworm "$root" "$mirror" >"$dir/debootstrap.log" 2>&1 || {
  tail -n 20 "$dir/debootstrap.log" >&2; exit 1; }
phase debootstrap "$t"

cp /etc/resolv.conf "$root/etc/resolv.conf"
mnt "$root/proc" -t proc proc
mnt "$root/sys" -t sysfs sysfs
mnt "$root/dev" --bind /dev
mnt "$root/dev/pts" --bind /dev/pts
clone_from=$source
if [ -d "$source" ]; then
  mnt "$root/mnt/source" --bind -o ro "$source"
  clone_from=file:///mnt/source
fi

# in the box: a login shell of root in /root, as a new user's first terminal
box() { chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb PATH=/usr/sbin:/usr/bin:/sbin:/bin \
  LANG=C.UTF-8 bash -lc "cd /root && $1"; }

t0=$(now)
box "apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y git make curl" \
  >"$dir/prerequisites.log" 2>&1
phase prerequisites "$t0"

t=$(now)
box "git clone $clone_from mhla-serve" \
  >"$dir/clone.log" 2>&1
phase clone "$t"
box "git -C mhla-serve log -1 --format='cloned: %H %s'" | tee -a "$dir/record.txt"

# make run, each line of its output stamped with the time it came (make flushes its own
# lines before each command), so that its parts can be told apart afterwards.
t=$(now)
# shellcheck disable=SC2016 # the inner script's $1 and $2 are its own arguments
setsid bash -c 'chroot "$1" /usr/bin/env -i HOME=/root TERM=dumb \
  PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 MHLA_PORT="$2" \
  bash -lc "cd /root/mhla-serve && exec make run" 2>&1 |
  perl -MTime::HiRes=time -ne "\$| = 1; printf qq(%.3f %s), time, \$_"' \
  freshbox-make "$root" "$port" >"$dir/make-run.log" 2>&1 &
server_pid=$!
until grep -qs '"event":"listening"' "$dir/make-run.log"; do
  kill -0 "$server_pid" 2>/dev/null || { tail -n 30 "$dir/make-run.log" >&2; exit 1; }
  sleep 0.2
done
phase "make run" "$t"
# its parts: the packages (bootstrap --build-only), cmake's configure, the compile, the
# server's start until it listens (the lines make echoes mark them)
awk -v t0="$t" '
  !c && / cmake -S / { c = $1 } !b && / cmake --build / { b = $1 }
  !r && / build\/bin\/mhla-server/ && !/"event"/ { r = $1 } /"event":"listening"/ { l = $1 }
  END { printf "  packages\t%.1f\n  configure\t%.1f\n  compile\t%.1f\n  start\t%.1f\n",
        c - t0, b - c, r - b, l - r }' "$dir/make-run.log" | tee -a "$times"

# The README's first request, its port the server's.
t=$(now)
box "curl -s http://127.0.0.1:$port/v1/completions -H 'Content-Type: application/json' \
     -d '{\"prompt\": \"The jury said\", \"max_tokens\": 24, \"temperature\": 0.8, \"seed\": 1}'" \
  >"$dir/answer.json" 2>"$dir/curl.log"
phase "first answer" "$t"
grep -q '"finish_reason"' "$dir/answer.json" || { echo "freshbox: no answer" >&2; exit 1; }
cat "$dir/answer.json"
echo
phase total "$t0"
echo "load average at the answer: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$dir/record.txt"
grep -o '"event":"cpu","message":"[^"]*' "$dir/make-run.log" | sed 's/.*"message":"/cpu: /' |
  tee -a "$dir/record.txt"

# What make run installed and built.
box "dpkg-query -W -f='\${Package}\n'" >"$dir/packages.txt"
echo "packages installed: $(wc -l <"$dir/packages.txt")" | tee -a "$dir/record.txt"
bad=$(grep -E '^(python3-torch|nodejs|npm|qemu-.*|haproxy|clang.*|valgrind)$' \
  "$dir/packages.txt" || true)
box "ls mhla-serve/build/bin" >"$dir/programs.txt"
echo "programs built: $(tr '\n' ' ' <"$dir/programs.txt")" | tee -a "$dir/record.txt"
want="mhla-bench mhla-cli mhla-generate mhla-grammar mhla-server mhla-tokenize"
ok=1
if [ -n "$bad" ]; then
  echo "freshbox: make run installed test packages: $bad" | tee -a "$dir/record.txt"
  ok=0
fi
if [ "$(sort "$dir/programs.txt" | tr '\n' ' ')" != "$want " ]; then
  echo "freshbox: build/bin is not exactly: $want" | tee -a "$dir/record.txt"
  ok=0
fi
[ "$ok" = 1 ] && echo "make run installed no test packages and built only the six programs"
[ "$ok" = 1 ]
