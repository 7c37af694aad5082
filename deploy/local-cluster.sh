#!/usr/bin/env bash
# N mhla-server replicas behind HAProxy on this machine (loopback).
#
#   deploy/local-cluster.sh N [options] [-- server flags]      run until Ctrl-C / SIGTERM
#   deploy/local-cluster.sh up N [options] [-- server flags]   start, return once all are UP
#   deploy/local-cluster.sh restart K [--dir DIR]              drain replica K (SIGTERM), start it again
#   deploy/local-cluster.sh status [--dir DIR]                 HAProxy's view of the replicas
#   deploy/local-cluster.sh down [--dir DIR]                   stop everything `up` started
#
# Options:
#   --dir DIR            state folder: pids, ports, logs, haproxy.cfg (default /tmp/mhla-cluster);
#                        HAProxy's runtime API socket lives in a private mktemp folder under
#                        /tmp instead (its path in DIR/lb.sock), short whatever DIR's length
#   --port P             port clients use, 0 = a free one (default 8000)
#   --bin DIR            folder holding mhla-server (default build/bin)
#   --model DIR          checkpoint (default models/brown-mhla)
#   --threads N          engine threads per replica (default: CPUs / N, at least 1)
#   --balance B          hash (prefix affinity, default) or roundrobin
#   --hash-bytes N       bytes of the prompt the hash reads (default 256)
#   --start-timeout S    longest wait for a replica to load and for HAProxy to see it UP
#                        (default 300)
#   --state-dir DIR      one state tier on disk for every replica (mhla-server --state-dir):
#                        blocks one replica computed are loaded by the others and after restarts
# Server flags after `--` go to every replica (default: --state-memory 256, which turns on
# the prefix cache that hash routing is for).
#
# Everything started is tracked by PID in the state folder and stopped by PID: a PID is
# signalled only while /proc says it is still the program this script started.
set -Eeuo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CFG_TEMPLATE="$ROOT/deploy/haproxy/mhla-haproxy.cfg"

die() { echo "local-cluster: error: $*" >&2; exit 1; }
say() { echo "local-cluster: $*" >&2; }

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# pid_is PID NAME: PID is alive and is NAME (the executable's base name), or is this
# shell's own child (which may not have exec'd NAME yet).
pid_is() {
  local pid=$1 name=$2 exe
  [ -n "$pid" ] && [ -d "/proc/$pid" ] || return 1
  [ "$(awk '{print $4}' "/proc/$pid/stat" 2>/dev/null)" = "$$" ] && return 0
  exe=$(tr '\0' '\n' < "/proc/$pid/cmdline" 2>/dev/null | head -n1) || return 1
  [ "$(basename -- "$exe")" = "$name" ]
}

# stop_pid PIDFILE NAME GRACE: SIGTERM, wait up to GRACE s, then SIGKILL.
stop_pid() {
  local file=$1 name=$2 grace=$3 pid
  [ -f "$file" ] || return 0
  pid=$(cat "$file")
  if pid_is "$pid" "$name"; then
    kill -TERM "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + grace))
    while pid_is "$pid" "$name" && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
    if pid_is "$pid" "$name"; then
      say "$name (pid $pid) still running after ${grace}s: SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  rm -f "$file"
}

# lb_stat: "name status" per replica, from HAProxy's runtime API.
lb_stat() {
  [ -f "$DIR/lb.sock" ] || return 1
  python3 - "$(cat "$DIR/lb.sock")" <<'EOF'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(5)
s.connect(sys.argv[1])
s.sendall(b"show stat\n")
data = b""
while True:
    b = s.recv(65536)
    if not b:
        break
    data += b
lines = data.decode().splitlines()
head = lines[0].lstrip("# ").split(",")
for line in lines[1:]:
    f = dict(zip(head, line.split(",")))
    if f.get("pxname") == "mhla_replicas" and f.get("svname") not in ("BACKEND", None):
        print(f["svname"], f["status"])
EOF
}

# wait_lb_status NAME WANT: until HAProxy reports replica NAME with status WANT.
wait_lb_status() {
  local name=$1 want=$2 deadline=$((SECONDS + START_TIMEOUT)) st
  while [ $SECONDS -lt $deadline ]; do
    st=$(lb_stat 2>/dev/null | awk -v n="$name" '$1 == n {print $2}')
    # exactly: "UP 1/2" is a replica on its way down
    [ "$st" = "$want" ] && return 0
    sleep 0.2
  done
  die "HAProxy did not report $name $want within ${START_TIMEOUT}s (last: ${st:-none})"
}

# start_replica K PORT: start replica rK listening on PORT (0 = a free one); records its
# PID and port once its `listening` log line appears.
start_replica() {
  local k=$1 port=$2 log="$DIR/r$1.log"
  : > "$log"
  "$BIN/mhla-server" --host 127.0.0.1 --port "$port" --model "$MODEL" --model-name "$MODEL_NAME" \
    --threads "$THREADS" "${SERVER_FLAGS[@]}" < /dev/null >> "$log" 2>&1 &
  local pid=$!
  echo "$pid" > "$DIR/r$k.pid"
  local deadline=$((SECONDS + START_TIMEOUT)) line=""
  while [ $SECONDS -lt $deadline ]; do
    # the whole line: a line still being written may not hold the port yet
    line=$(grep -m1 '"event":"listening".*"port":[0-9]*,' "$log" || true)
    [ -n "$line" ] && break
    # kill -0, not pid_is: right after the fork the child may not have exec'd yet
    kill -0 "$pid" 2>/dev/null || die "replica r$k exited at start: $(tail -n 3 "$log")"
    sleep 0.1
  done
  [ -n "$line" ] || die "replica r$k did not listen within ${START_TIMEOUT}s"
  port=$(printf '%s' "$line" | grep -o '"port":[0-9]*' | cut -d: -f2)
  echo "$port" > "$DIR/r$k.port"
  say "replica r$k: pid $pid, port $port"
}

write_haproxy_cfg() {
  local cfg="$DIR/haproxy.cfg"
  if [ "$BALANCE" = roundrobin ]; then
    sed -e 's/^\( *\)balance hash .*/\1balance roundrobin/' "$CFG_TEMPLATE" > "$cfg"
  else
    cp "$CFG_TEMPLATE" "$cfg"
  fi
  for k in $(seq 1 "$N"); do
    echo "    server r$k 127.0.0.1:$(cat "$DIR/r$k.port")" >> "$cfg"
  done
}

start_haproxy() {
  command -v haproxy >/dev/null || die "haproxy is not installed (Debian: apt-get install haproxy)"
  local tries=1 port
  [ "$LB_PORT" = 0 ] && tries=5
  # A UNIX socket path holds at most 107 bytes (sun_path) and HAProxy allows fewer; a
  # state folder deep in a build tree passes that. A private folder under /tmp keeps the
  # path short; `down` removes it.
  local sock_dir
  sock_dir=$(mktemp -d "${TMPDIR:-/tmp}/mhla-lb.XXXXXX") || die "cannot create a socket folder"
  echo "$sock_dir/haproxy.sock" > "$DIR/lb.sock"
  export MHLA_LB_STATS_SOCK="$sock_dir/haproxy.sock" MHLA_LB_HASH_BYTES="$HASH_BYTES"
  for _ in $(seq 1 $tries); do
    port=$LB_PORT
    [ "$port" = 0 ] && port=$(free_port)
    export MHLA_LB_BIND="127.0.0.1:$port"
    haproxy -c -q -f "$DIR/haproxy.cfg" || die "haproxy refused $DIR/haproxy.cfg"
    : > "$DIR/haproxy.log"
    haproxy -db -f "$DIR/haproxy.cfg" < /dev/null >> "$DIR/haproxy.log" 2>&1 &
    echo $! > "$DIR/haproxy.pid"
    local deadline=$((SECONDS + START_TIMEOUT))
    while [ $SECONDS -lt $deadline ]; do
      kill -0 "$(cat "$DIR/haproxy.pid")" 2>/dev/null || break
      if lb_stat > /dev/null 2>&1; then
        echo "$port" > "$DIR/lb.port"
        say "haproxy: pid $(cat "$DIR/haproxy.pid"), http://127.0.0.1:$port ($BALANCE)"
        return 0
      fi
      sleep 0.1
    done
    stop_pid "$DIR/haproxy.pid" haproxy 5
    say "haproxy did not start on port $port: $(tail -n 2 "$DIR/haproxy.log")"
  done
  die "haproxy could not start"
}

# A replica's drain lasts up to its --shutdown-timeout (the server's default 30 s): wait
# that long and 10 s more before SIGKILL.
drain_grace() {
  local t=30 i
  for ((i = 0; i < ${#SERVER_FLAGS[@]}; i++)); do
    case "${SERVER_FLAGS[$i]}" in
      --shutdown-timeout) t=${SERVER_FLAGS[$((i + 1))]:-30} ;;
      --shutdown-timeout=*) t=${SERVER_FLAGS[$i]#*=} ;;
    esac
  done
  echo $((t + 10))
}

cmd_down() {
  [ -d "$DIR" ] || return 0
  stop_pid "$DIR/haproxy.pid" haproxy 10
  if [ -f "$DIR/lb.sock" ]; then
    # the folder start_haproxy made: only a mhla-lb.* folder is removed
    local sock_dir
    sock_dir=$(dirname "$(cat "$DIR/lb.sock")")
    case "$(basename "$sock_dir")" in mhla-lb.*) rm -rf "$sock_dir" ;; esac
    rm -f "$DIR/lb.sock"
  fi
  local grace
  grace=$(drain_grace)
  for f in "$DIR"/r*.pid; do
    [ -e "$f" ] || continue
    stop_pid "$f" mhla-server "$grace"
  done
  say "stopped"
}

cmd_up() {
  mkdir -p "$DIR"
  if ls "$DIR"/*.pid > /dev/null 2>&1; then
    die "$DIR already holds a running cluster (local-cluster.sh down --dir $DIR)"
  fi
  [ -x "$BIN/mhla-server" ] || die "$BIN/mhla-server not found (build first, or --bin DIR)"
  {
    echo "N=$N"; echo "BIN='$BIN'"; echo "MODEL='$MODEL'"; echo "MODEL_NAME='$MODEL_NAME'"
    echo "THREADS=$THREADS"; echo "START_TIMEOUT=$START_TIMEOUT"
    declare -p SERVER_FLAGS
  } > "$DIR/cluster.env"
  trap 'say "start failed (line $LINENO): stopping what was started"; trap - ERR EXIT; cmd_down' \
    ERR EXIT
  for k in $(seq 1 "$N"); do start_replica "$k" 0; done
  write_haproxy_cfg
  start_haproxy
  for k in $(seq 1 "$N"); do wait_lb_status "r$k" UP; done
  trap - ERR EXIT
  echo "http://127.0.0.1:$(cat "$DIR/lb.port")"
}

cmd_restart() {
  local k=$1
  [ -f "$DIR/r$k.port" ] || die "no replica r$k in $DIR"
  # drain: /health turns 503 and HAProxy takes the replica out; running requests finish
  stop_pid "$DIR/r$k.pid" mhla-server "$(drain_grace)"
  start_replica "$k" "$(cat "$DIR/r$k.port")"
  wait_lb_status "r$k" UP
  say "replica r$k restarted"
}

# ---- arguments ----
DIR=/tmp/mhla-cluster
LB_PORT=8000
BIN="$ROOT/build/bin"
MODEL="$ROOT/models/brown-mhla"
MODEL_NAME=""
THREADS=""
BALANCE=hash
HASH_BYTES=256
START_TIMEOUT=300
SERVER_FLAGS=()
have_flags=0
STATE_DIR=""

cmd=run
case "${1:-}" in
  up|down|restart|status|run) cmd=$1; shift ;;
  -h|--help|"") sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
N=""
K=""
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) DIR=$2; shift 2 ;;
    --port) LB_PORT=$2; shift 2 ;;
    --bin) BIN=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --balance) BALANCE=$2; shift 2 ;;
    --hash-bytes) HASH_BYTES=$2; shift 2 ;;
    --start-timeout) START_TIMEOUT=$2; shift 2 ;;
    --state-dir) STATE_DIR=$2; shift 2 ;;
    --) shift; SERVER_FLAGS=("$@"); have_flags=1; break ;;
    [0-9]*) if [ "$cmd" = restart ]; then K=$1; else N=$1; fi; shift ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
DIR=$(mkdir -p "$DIR" && cd "$DIR" && pwd)

case "$cmd" in
  up|run)
    [[ "$N" =~ ^[1-9][0-9]*$ ]] || die "give the number of replicas (see --help)"
    [[ "$BALANCE" =~ ^(hash|roundrobin)$ ]] || die "--balance is hash or roundrobin"
    [ $have_flags = 1 ] || SERVER_FLAGS=(--state-memory 256)
    if [ -n "$STATE_DIR" ]; then
      mkdir -p "$STATE_DIR"
      SERVER_FLAGS+=(--state-dir "$(cd "$STATE_DIR" && pwd)")
    fi
    BIN=$(cd "$BIN" && pwd)
    MODEL=$(cd "$MODEL" && pwd)
    MODEL_NAME=$(basename "$MODEL")
    if [ -z "$THREADS" ]; then
      THREADS=$(( $(nproc) / N ))
      [ "$THREADS" -ge 1 ] || THREADS=1
    fi
    ;;
  *)
    [ -f "$DIR/cluster.env" ] || die "no cluster in $DIR"
    # shellcheck disable=SC1091
    source "$DIR/cluster.env"
    ;;
esac

case "$cmd" in
  up) cmd_up ;;
  down) cmd_down ;;
  status) lb_stat ;;
  restart)
    [[ "$K" =~ ^[1-9][0-9]*$ ]] || die "give the replica number"
    cmd_restart "$K"
    ;;
  run)
    cmd_up
    SLEEPER=""
    trap '[ -z "$SLEEPER" ] || kill "$SLEEPER" 2>/dev/null; cmd_down; exit 0' INT TERM
    say "serving; Ctrl-C stops everything"
    # wait for a signal: `wait` returns as soon as one arrives
    while :; do sleep 3600 & SLEEPER=$!; wait "$SLEEPER" || true; done
    ;;
esac
