#!/usr/bin/env python3
"""Every token is chosen in one place: outside tests/ and the sampler itself
(engine/sampler.c), the sampler (mhla_sampler_next), the plain sampler
(mhla_sample) and the logprobs (mhla_logprobs) are called from
engine/step_choose.c only. Prints the calls found elsewhere and exits 1;
--self-test checks that a call in another file is reported."""
import argparse
import os
import re
import sys
import tempfile

CALL = re.compile(r"\b(mhla_sampler_next|mhla_sample|mhla_logprobs)\s*\(")
SITE = os.path.join("engine", "step_choose.c")
SAMPLER = os.path.join("engine", "sampler.c")
SKIP_DIRS = {"tests", "build", "build-asan", ".git", "node_modules"}
EXTS = (".c", ".h", ".cu", ".cuh", ".cpp")


def strip_comments(src):
    src = re.sub(r"/\*.*?\*/", " ", src, flags=re.S)
    return re.sub(r"//[^\n]*", " ", src)


def calls(root):
    out = []
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith("build")]
        for f in files:
            if not f.endswith(EXTS):
                continue
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, root)
            text = strip_comments(open(path, encoding="utf-8", errors="replace").read())
            for m in CALL.finditer(text):
                line = text[:m.start()].count("\n") + 1
                head = text[text.rfind("\n", 0, m.start()) + 1:m.start()]
                if re.fullmatch(r"\s*(static\s+|inline\s+|const\s+)*\w+[\s*]+", head):
                    continue  # a declaration or the definition: a type, then the name
                out.append((rel, line, m.group(1)))
    return out


def offences(root):
    return [c for c in calls(root) if c[0] not in (SITE, SAMPLER)]


def self_test():
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "engine"))
        os.makedirs(os.path.join(d, "server"))
        open(os.path.join(d, SITE), "w").write("void f(void) { mhla_sampler_next(s, l, 0, &t, &e); }\n")
        open(os.path.join(d, "server", "x.c"), "w").write(
            "int mhla_logprobs(const float *l);\n/* mhla_sample(x) */\nvoid g(void) { mhla_sample(l, V, T, r); }\n")
        bad = offences(d)
    ok = len(bad) == 1 and bad[0][0] == os.path.join("server", "x.c") and bad[0][2] == "mhla_sample"
    print("self-test:", "PASS" if ok else "FAIL", bad)
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=".")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    bad = offences(a.root)
    for rel, line, name in bad:
        print("%s:%d: %s called outside %s" % (rel, line, name, SITE))
    n = len([c for c in calls(a.root) if c[0] == SITE])
    print("%d call(s) of the sampler and logprobs in %s; %d elsewhere" % (n, SITE, len(bad)))
    return 1 if bad or n == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
