#!/usr/bin/env python3
"""The server's functions stay small: no function in server/*.c longer than
--max-lines lines (from its opening to its closing brace) or with its braces
nested deeper than --max-depth inside the body. Lists every offender and exits
1; --self-test checks that a long and a deep function are reported.

The tree is clang-formatted, so a function body opens with "{" alone in
column 0 and closes with "}" in column 0; braces inside strings and character
literals are skipped."""
import argparse
import glob
import os
import re
import sys
import tempfile

STRING = re.compile(r'"(\\.|[^"\\])*"|\'(\\.|[^\'\\])*\'')


def functions(path):
    """(name, first line, lines, depth) of every function defined in path."""
    lines = open(path, encoding="utf-8").read().split("\n")
    out = []
    i = 0
    while i < len(lines):
        if lines[i] != "{":
            i += 1
            continue
        k = i - 1
        while k > 0 and lines[k - 1].strip() and not lines[k - 1].rstrip().endswith((";", "}", "*/")) \
                and not lines[k - 1].startswith("#"):
            k -= 1
        m = re.search(r"(\w+)\s*\(", " ".join(l.strip() for l in lines[k:i]))
        depth = deepest = 0
        end = i
        for end in range(i, len(lines)):
            for ch in STRING.sub("", lines[end].split("//")[0]):
                if ch == "{":
                    depth += 1
                    deepest = max(deepest, depth)
                elif ch == "}":
                    depth -= 1
            if depth == 0:
                break
        out.append((m.group(1) if m else "?", i + 1, end - i + 1, deepest - 1))
        i = end + 1
    return out


def check(paths, max_lines, max_depth):
    bad = []
    for p in paths:
        for name, line, n, depth in functions(p):
            if n > max_lines or depth > max_depth:
                bad.append("%s:%d: %s: %d lines, nesting %d" % (p, line, name, n, depth))
    return bad


def self_test(max_lines, max_depth):
    body_long = "int long_one(void)\n{\n" + "    x++;\n" * (max_lines + 1) + "}\n"
    deep = "int deep_one(void)\n{\n" + "".join("    " * (d + 1) + "if (x) {\n" for d in range(max_depth + 1))
    deep += "".join("    " * (d + 1) + "}\n" for d in reversed(range(max_depth + 1))) + "}\n"
    fine = 'int fine(void)\n{\n    const char *s = "{{{{";\n    return s[0];\n}\n'
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "t.c")
        open(p, "w").write(body_long + deep + fine)
        bad = check([p], max_lines, max_depth)
    names = " ".join(bad)
    ok = "long_one" in names and "deep_one" in names and "fine" not in names
    print("self-test:", "PASS" if ok else "FAIL", bad)
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=".")
    ap.add_argument("--max-lines", type=int, default=60)
    ap.add_argument("--max-depth", type=int, default=3)
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        return self_test(a.max_lines, a.max_depth)
    paths = sorted(glob.glob(os.path.join(a.root, "server", "*.c")))
    if not paths:
        print("no server/*.c under", a.root)
        return 1
    bad = check(paths, a.max_lines, a.max_depth)
    for b in bad:
        print(b)
    n = sum(len(functions(p)) for p in paths)
    print("%d functions in %d files; %d over %d lines or nesting %d" %
          (n, len(paths), len(bad), a.max_lines, a.max_depth))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
