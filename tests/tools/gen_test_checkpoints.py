#!/usr/bin/python3
"""Generates every checkpoint of a manifest (test_checkpoints.txt) in one process.

    gen_test_checkpoints.py --manifest tests/tools/test_checkpoints.txt --out DIR

Each manifest line is a name and the arguments of gen_checkpoint.py; the checkpoint
goes to DIR/<name>. Lines starting with # and blank lines are skipped. The tests'
checkpoints are declared once here instead of in each test suite's CMakeLists.txt.
"""
import argparse
import os
import shlex
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_checkpoint  # noqa: E402


def read_manifest(path):
    entries = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            words = shlex.split(line, comments=True)
            if not words:
                continue
            name, args = words[0], words[1:]
            if "/" in name or any(a == "--out" for a in args):
                sys.exit(f"{path}:{lineno}: a name without '/' and no --out, please")
            if any(name == n for n, _ in entries):
                sys.exit(f"{path}:{lineno}: checkpoint '{name}' is listed twice")
            entries.append((name, args))
    return entries


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--manifest", required=True)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    entries = read_manifest(a.manifest)
    if not entries:
        sys.exit(f"{a.manifest}: no checkpoints listed")
    for name, args in entries:
        gen_checkpoint.main(["--out", os.path.join(a.out, name)] + args)
    print(f"{len(entries)} checkpoints in {a.out}")


if __name__ == "__main__":
    main()
