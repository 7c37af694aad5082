#!/usr/bin/python3
"""mhla-server --help against server/README.md and the server's routes.

Every flag --help lists has a row in server/README.md's flag table, and --api-key's
help names every path the key guards (the routes http.c checks it on): the help and
the table are what operators read, so a flag missing there or a wrong scope is a defect.
"""
import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# the routes behind the key (http.c, route: all but /health and /metrics)
GUARDED = ["/v1/*", "/tokenize", "/detokenize", "/apply-template"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    a = ap.parse_args()
    r = subprocess.run([os.path.join(a.bin, "mhla-server"), "--help"], capture_output=True,
                       text=True, timeout=60)
    text = r.stdout + r.stderr
    flags = set(re.findall(r"^\s+(--[a-z][a-z-]*)", text, re.M)) - {"--help"}
    readme = open(os.path.join(ROOT, "server", "README.md")).read()
    rows = set(re.findall(r"^\| `(--[a-z][a-z-]*)", readme, re.M))
    failures = []
    if len(flags) < 10:
        failures.append("--help lists only %d flags: %r" % (len(flags), text[-300:]))
    for f in sorted(flags - rows):
        failures.append("server/README.md's flag table has no row for %s" % f)
    m = re.search(r"--api-key KEY(.*?)\n  --", text, re.S)
    api = " ".join(m.group(1).split()) if m else ""
    for path in GUARDED:
        if path not in api:
            failures.append("--api-key's help does not name %s (it says: %r)" % (path, api))
    for f in failures:
        print("FAIL " + f)
    print("%d flags, %d rows" % (len(flags), len(rows)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
