#!/usr/bin/env python3
"""Functions stay small.

Two checks, one parser:
  --server (the default): no function in server/*.c longer than --max-lines
    lines (from its opening to its closing brace) or with its braces nested
    deeper than --max-depth inside the body.
  --tree: every function in the modules of TREE_MODULES (.c, .h, .cu, .cuh)
    is at most --tree-lines long, except those named in the allowlist
    (tests/tree/function_size_allowlist.txt: "path function lines"), each at
    most the lines its entry allows. An entry may only shrink: a function that
    grows past its entry, a new long function, an entry that no longer
    matches a function over the limit (remove it) or one that allows more
    than the function has (lower it) all fail, and so do more entries than
    --max-allowed, more than --max-allowed-long entries over --long lines, or
    any function over --hard-max.
Lists every offender and exits 1; --self-test checks that the checks report
a long, a deep and a grown function and an unlisted one.

The tree is clang-formatted, so a function body opens with "{" alone in
column 0 and closes with "}" in column 0; braces inside strings and character
literals are skipped, and a namespace or extern "C" block is looked into, not
counted as a function."""
import argparse
import glob
import os
import re
import sys
import tempfile

STRING = re.compile(r'"(\\.|[^"\\])*"|\'(\\.|[^\'\\])*\'')
NOT_NAMES = {"__attribute__", "always_inline", "noinline", "format", "aligned", "__launch_bounds__",
             "target", "if", "while", "for", "switch", "sizeof", "defined"}
TREE_MODULES = ["server", "engine", "kvstate", "tokenizer", "template", "grammar", "client", "base", "tools"]
TREE_EXTS = (".c", ".h", ".cu", ".cuh")


def function_name(header):
    for m in re.finditer(r"(\w+)\s*\(", header):
        if m.group(1) not in NOT_NAMES:
            return m.group(1)
    return "?"


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
        while k > 0 and lines[k - 1].strip() and not lines[k - 1].rstrip().endswith((";", "}", "*/", "{")) \
                and not lines[k - 1].startswith("#"):
            k -= 1
        header = " ".join(l.strip() for l in lines[k:i])
        if re.fullmatch(r"(namespace(\s+\w+)?|extern\s+\"C\")\s*", header):
            i += 1  # a wrapper: its functions are inside
            continue
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
        out.append((function_name(header), i + 1, end - i + 1, deepest - 1))
        i = end + 1
    return out


def check(paths, max_lines, max_depth):
    bad = []
    for p in paths:
        for name, line, n, depth in functions(p):
            if n > max_lines or depth > max_depth:
                bad.append("%s:%d: %s: %d lines, nesting %d" % (p, line, name, n, depth))
    return bad


def tree_paths(root):
    paths = []
    for mod in TREE_MODULES:
        for dirpath, _, files in os.walk(os.path.join(root, mod)):
            paths += [os.path.join(dirpath, f) for f in files if f.endswith(TREE_EXTS)]
    return sorted(paths)


def read_allowlist(path):
    allowed = {}
    for no, line in enumerate(open(path, encoding="utf-8"), 1):
        line = line.split("#")[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 3 or not parts[2].isdigit():
            raise SystemExit("%s:%d: want 'path function lines'" % (path, no))
        allowed[(parts[0], parts[1])] = int(parts[2])
    return allowed


def check_tree(root, paths, allowed, a):
    """The tree's offences against the limit and the allowlist."""
    bad, seen = [], {}
    for p in paths:
        rel = os.path.relpath(p, root)
        for name, line, n, _ in functions(p):
            if n <= a.tree_lines:
                continue
            key = (rel, name)
            seen[key] = max(n, seen.get(key, 0))
            where = "%s:%d: %s: %d lines" % (rel, line, name, n)
            if n > a.hard_max:
                bad.append("%s: over the hard limit of %d" % (where, a.hard_max))
            if key not in allowed:
                bad.append("%s: over %d and not in the allowlist" % (where, a.tree_lines))
            elif n > allowed[key]:
                bad.append("%s: grew past its allowlist entry (%d)" % (where, allowed[key]))
    for key, lim in sorted(allowed.items()):
        if key not in seen:
            bad.append("allowlist: %s %s is no longer over %d lines: remove its entry" % (key[0], key[1], a.tree_lines))
        elif seen[key] < lim:
            bad.append("allowlist: %s %s has %d lines, its entry allows %d: lower it" % (key[0], key[1], seen[key], lim))
    if len(allowed) > a.max_allowed:
        bad.append("allowlist: %d entries, at most %d" % (len(allowed), a.max_allowed))
    n_long = sum(1 for v in allowed.values() if v > a.long)
    if n_long > a.max_allowed_long:
        bad.append("allowlist: %d entries over %d lines, at most %d" % (n_long, a.long, a.max_allowed_long))
    return bad


def self_test(a):
    body_long = "int long_one(void)\n{\n" + "    x++;\n" * (a.max_lines + 1) + "}\n"
    deep = "int deep_one(void)\n{\n" + "".join("    " * (d + 1) + "if (x) {\n" for d in range(a.max_depth + 1))
    deep += "".join("    " * (d + 1) + "}\n" for d in reversed(range(a.max_depth + 1))) + "}\n"
    fine = 'int fine(void)\n{\n    const char *s = "{{{{";\n    return s[0];\n}\n'
    ns = "namespace outer\n{\n\nint inside(void)\n{\n    return 1;\n}\n\n} // namespace outer\n"
    ns += 'extern "C" int c_linkage(void)\n{\n    return 2;\n}\n'
    attr = "static inline __attribute__((always_inline)) int attr_one(void)\n{\n" + "    x++;\n" * 3 + "}\n"
    ok = True
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "t.c")
        open(p, "w").write(body_long + deep + fine + ns + attr)
        bad = check([p], a.max_lines, a.max_depth)
        names = " ".join(bad)
        got = {f[0] for f in functions(p)}
        ok &= "long_one" in names and "deep_one" in names and "fine" not in names
        ok &= {"inside", "attr_one", "c_linkage"} <= got and "outer" not in got
        # the tree check: a grown entry, an unlisted function and a stale entry
        os.makedirs(os.path.join(d, "base"))
        grown = "int grown(void)\n{\n" + "    x++;\n" * 60 + "}\n"
        new = "int unlisted(void)\n{\n" + "    x++;\n" * 55 + "}\n"
        open(os.path.join(d, "base", "x.c"), "w").write(grown + new)
        allowed = {("base/x.c", "grown"): 55, ("base/x.c", "gone"): 70}
        tb = " ".join(check_tree(d, tree_paths(d), allowed, a))
        ok &= "grew past" in tb and "unlisted" in tb and "gone is no longer" in tb
        allowed = {("base/x.c", "grown"): 64, ("base/x.c", "unlisted"): 57}
        tb = " ".join(check_tree(d, tree_paths(d), allowed, a))
        ok &= "lower it" in tb and tb.count("allowlist:") == 1
    print("self-test:", "PASS" if ok else "FAIL", bad)
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=".")
    ap.add_argument("--max-lines", type=int, default=60)
    ap.add_argument("--max-depth", type=int, default=3)
    ap.add_argument("--tree", action="store_true")
    ap.add_argument("--allowlist")
    ap.add_argument("--tree-lines", type=int, default=50)
    ap.add_argument("--hard-max", type=int, default=120)
    ap.add_argument("--long", type=int, default=80)
    ap.add_argument("--max-allowed", type=int, default=27)
    ap.add_argument("--max-allowed-long", type=int, default=8)
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        return self_test(a)
    if a.tree:
        paths = tree_paths(a.root)
        allowlist = a.allowlist or os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                "function_size_allowlist.txt")
        bad = check_tree(a.root, paths, read_allowlist(allowlist), a)
        for b in bad:
            print(b)
        n = sum(len(functions(p)) for p in paths)
        print("%d functions in %d files of %s; %d offences (limit %d lines, allowlist %s)" %
              (n, len(paths), ", ".join(TREE_MODULES), len(bad), a.tree_lines, allowlist))
        return 1 if bad else 0
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
