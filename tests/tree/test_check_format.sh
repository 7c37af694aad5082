#!/usr/bin/env bash
# The format check itself: on a scratch tree with the project's .clang-format, a
# formatted file passes, a misformatted .c and .cu fail and are named, the
# formatted one is not; --fix reformats them and the check then passes.
#   test_check_format.sh SOURCE_DIR WORK_DIR
set -uo pipefail
src=$1
work=$2
check=$src/tools/check-format.sh
rm -rf "$work"
mkdir -p "$work/sub"
cp "$src/.clang-format" "$work/"
fail() {
    echo "FAIL: $*"
    exit 1
}

cat >"$work/good.c" <<'C'
#include <stdio.h>

/* Formatted as .clang-format says. */
static int add(int a, int b) { return a + b; }

int main(void)
{
    for (int i = 0; i < 3; i++) {
        if (add(i, 1) > 2)
            printf("%d\n", i);
    }
    return 0;
}
C
printf 'int  main( void ){ return 0 ;}\n' >"$work/bad.c"
printf '__global__ void k(float *x)\n{\n  x[threadIdx.x] = 0;\n}\n' >"$work/sub/bad.cu"

out=$("$check" "$work" 2>&1)
rc=$?
echo "$out"
[ $rc -eq 77 ] && exit 77
[ $rc -eq 1 ] || fail "misformatted files: exit $rc, expected 1"
grep -q "^not formatted: bad.c$" <<<"$out" || fail "bad.c is not named"
grep -q "^not formatted: sub/bad.cu$" <<<"$out" || fail "sub/bad.cu is not named"
grep -q "^not formatted: good.c$" <<<"$out" && fail "good.c is named but is formatted"

"$check" --fix "$work" || fail "--fix: exit $?"
out=$("$check" "$work" 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] || fail "after --fix: exit $rc, expected 0"
[ "$(cat "$work/bad.c")" = "int main(void) { return 0; }" ] || fail "bad.c after --fix: $(cat "$work/bad.c")"
echo "PASS: the format check names misformatted files, passes formatted ones, --fix repairs"
