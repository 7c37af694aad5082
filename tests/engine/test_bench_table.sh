#!/usr/bin/env bash
# test_bench_table.sh — bench/isa_table.sh over bench_decode on the demo model:
# every cell of its table filled and in the form the closing tables quote
# ("rate (fraction%)", and the paired batch-1 and products-alone columns
# "a% / b%"). A change to
# bench_decode's output that the table script no longer reads fails here.
# usage: test_bench_table.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1 build=$2
out=$("$src/bench/isa_table.sh" "$build" "$src/models/brown-mhla" --paths "avx2 neon" \
      --weights "f32 q8" --steps 4 2>&1) || { echo "isa_table.sh failed:"; echo "$out"; exit 1; }
echo "$out"
rows=$(grep -E '^\| (avx2|neon) \|' <<<"$out" || true)
if [ -z "$rows" ]; then
  echo "SKIP: this CPU runs neither the avx2 nor the neon path"
  exit 77
fi
n=0
while IFS= read -r row; do
  IFS='|' read -ra cells <<<"$row"
  # cells[0] is empty (before the first bar); 14 columns follow
  [ "${#cells[@]}" -eq 15 ] || { echo "FAIL: ${#cells[@]} cells in: $row"; exit 1; }
  # a build without OpenBLAS has no compute bound ("-"): its columns are bare rates
  sgemm=$(sed 's/^ *//; s/ *$//' <<<"${cells[4]}")
  for i in 5 6 7 8 9 10 11 12; do
    c=$(sed 's/^ *//; s/ *$//' <<<"${cells[$i]}")
    if [ "$sgemm" = - ] && [ "$i" != 7 ] && [ "$i" != 8 ]; then
      [[ $c =~ ^[0-9.]+$ ]] || { echo "FAIL: column $i '$c' in: $row"; exit 1; }
      continue
    fi
    [[ $c =~ ^[0-9.]+\ \(([0-9]+)%\)$ ]] || { echo "FAIL: column $i '$c' in: $row"; exit 1; }
    [ "${BASH_REMATCH[1]}" -gt 0 ] || { echo "FAIL: a zero fraction in column $i: $row"; exit 1; }
  done
  for i in 13 14; do
    c=$(sed 's/^ *//; s/ *$//' <<<"${cells[$i]}")
    [[ $c =~ ^([0-9.]+)%\ /\ ([0-9.]+)%$ ]] || { echo "FAIL: paired column $i '$c' in: $row"; exit 1; }
    awk -v a="${BASH_REMATCH[1]}" -v b="${BASH_REMATCH[2]}" 'BEGIN { exit !(a > 0 && b > 0) }' ||
      { echo "FAIL: a paired fraction of zero in column $i: $row"; exit 1; }
  done
  n=$((n + 1))
done <<<"$rows"
[ "$n" -eq 2 ] || { echo "FAIL: $n rows, expected one per weight format (f32, q8)"; exit 1; }
echo "PASS: $n rows, every cell filled"
