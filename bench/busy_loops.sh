# busy_loops.sh — sourced by the contention benchmarks: competing busy
# processes (`while :; do :; done`) and the median of a list of numbers.
#
#   start_busy N   starts N busy loops (their pids in the array `busy`) and
#                  gives the scheduler a second to spread them
#   stop_busy      kills and reaps them (safe to call twice; use it in a trap)
#   median         the median of the numbers on standard input, one a line

busy=()

start_busy() {
  local i
  for ((i = 0; i < $1; i++)); do
    (while :; do :; done) &
    busy+=($!)
  done
  sleep 1
}

stop_busy() {
  local p
  for p in "${busy[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${busy[@]}"; do wait "$p" 2>/dev/null || true; done
  busy=()
}

median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
