#!/bin/sh
# Fails when a file of the tree holds a line that starts a merge conflict's
# marker (a merge resolved in a hurry leaves them in text files, where no
# compiler sees them). usage: check_merge_markers.sh SOURCE_DIR
# Without git (a source tarball) there is no list of files: skipped (77).
cd "$1" || exit 2
command -v git >/dev/null 2>&1 && git rev-parse --git-dir >/dev/null 2>&1 || exit 77
found=$(git grep -n -I -E '^(<{7} |>{7} |={7}$)' -- . ':!tests/template/templates' ':!tests/template/unseen' || true)
if [ -n "$found" ]; then
  echo "merge conflict markers in the tree:"
  echo "$found"
  exit 1
fi
echo "no merge conflict markers in $(git ls-files | wc -l) tracked files"
