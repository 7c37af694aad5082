#!/usr/bin/env bash
# check-format.sh: every C, C++ and CUDA file of the tree is formatted as
# .clang-format says (curl's checksrc is the model: one script, run by the test
# suite as ctest style.format, that names each file it refuses).
#
#   tools/check-format.sh [ROOT]         list the files clang-format would change
#                                        (and the start of each change); exit 1 if any
#   tools/check-format.sh --fix [ROOT]   reformat those files in place
#
# ROOT (default: the repository this script is in) must hold the .clang-format.
# In a git work tree the files are those git knows or would add (tracked and
# untracked, not ignored), so build folders and node_modules never count;
# elsewhere every matching file under ROOT except .git, build* and node_modules.
# clang-format: $CLANG_FORMAT, else clang-format-14 (the reference version,
# Debian 12's), else clang-format; exit 77 (ctest: skipped) when there is none.
set -uo pipefail

fix=0
if [ "${1:-}" = "--fix" ]; then
    fix=1
    shift
fi
root=${1:-"$(cd "$(dirname "$0")/.." && pwd)"}
if [ ! -f "$root/.clang-format" ]; then
    echo "check-format: $root/.clang-format is missing" >&2
    exit 2
fi

cf=${CLANG_FORMAT:-}
if [ -z "$cf" ]; then
    for c in clang-format-14 clang-format; do
        if command -v "$c" >/dev/null 2>&1; then
            cf=$c
            break
        fi
    done
fi
if [ -z "$cf" ] || ! command -v "$cf" >/dev/null 2>&1; then
    echo "check-format: clang-format not found (Debian: apt-get install clang-format); skipped" >&2
    exit 77
fi

cd "$root" || exit 2
patterns=('*.c' '*.h' '*.cu' '*.cuh' '*.cpp' '*.hpp')
list_files() {
    if git rev-parse --show-toplevel >/dev/null 2>&1 &&
        [ "$(git rev-parse --show-toplevel)" = "$(pwd -P)" ]; then
        git ls-files -z --cached --others --exclude-standard -- "${patterns[@]}"
    else
        find . \( -name .git -o -name 'build*' -o -name node_modules \) -prune -o \
            -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \
            -o -name '*.cpp' -o -name '*.hpp' \) -printf '%P\0'
    fi
}

files=()
while IFS= read -r -d '' f; do
    [ -f "$f" ] && files+=("$f") # a tracked file deleted but not yet committed is skipped
done < <(list_files | sort -z)
n=${#files[@]}
if [ "$n" -eq 0 ]; then
    echo "check-format: no C, C++ or CUDA files under $root" >&2
    exit 2
fi

# One clang-format run over every file; it names each change it would make.
report=$(printf '%s\0' "${files[@]}" | xargs -0 "$cf" --style=file --dry-run -Werror 2>&1)
rc=$?
mapfile -t bad < <(sed -n 's/^\(.*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' \
    <<<"$report" | sort -u)
if [ $rc -ne 0 ] && [ ${#bad[@]} -eq 0 ]; then
    echo "check-format: $cf failed:" >&2
    echo "$report" | head -20 >&2
    exit 2
fi

if [ ${#bad[@]} -eq 0 ]; then
    echo "check-format: $n files, all formatted ($("$cf" --version | head -1))"
    exit 0
fi
if [ $fix -eq 1 ]; then
    for f in "${bad[@]}"; do
        "$cf" --style=file -i "$f" && echo "reformatted: $f"
    done
    exit 0
fi
for f in "${bad[@]}"; do
    echo "not formatted: $f"
    "$cf" --style=file "$f" | diff -u --label "$f" --label "$f (clang-format)" "$f" - | sed -n '3,14p'
done
echo "check-format: ${#bad[@]} of $n files are not formatted as .clang-format says;" \
    "tools/check-format.sh --fix reformats them"
exit 1
