#!/usr/bin/env python3
"""grammar.llamacpp_json: 50 seeded samples of llama.cpp's json.gbnf and
json_arr.gbnf, written by `mhla-grammar sample`, are JSON to Python's json
module: an object for json.gbnf, an array for json_arr.gbnf. A few are
matched back through `mhla-grammar match --file`.

usage: test_json_samples.py MHLA_GRAMMAR GBNF_DIR
"""
import json
import os
import subprocess
import sys
import tempfile


def samples(tool, gbnf, count):
    out = subprocess.run([tool, "sample", gbnf, "--seed", "1", "--count", str(count),
                          "--max-bytes", "2048"], check=True, capture_output=True).stdout
    lines = out.decode("utf-8").split("\n")
    assert lines[-1] == "", "output does not end in a newline"
    return [json.loads(line) for line in lines[:-1]]


def check(tool, gbnf, kind):
    got = samples(tool, gbnf, 50)
    failures = 0
    if len(got) != 50:
        print(f"FAIL {gbnf}: {len(got)} samples, expected 50")
        failures += 1
    for i, s in enumerate(got):
        try:
            v = json.loads(s)
        except ValueError as e:
            print(f"FAIL {gbnf} sample {i}: not JSON ({e}): {s!r}")
            failures += 1
            continue
        if not isinstance(v, kind):
            print(f"FAIL {gbnf} sample {i}: a {type(v).__name__}, expected {kind.__name__}")
            failures += 1
    with tempfile.TemporaryDirectory() as d:
        for i, s in enumerate(got[:5]):
            path = os.path.join(d, f"s{i}")
            with open(path, "wb") as f:
                f.write(s.encode("utf-8"))
            rc = subprocess.run([tool, "match", gbnf, "--file", path],
                                capture_output=True).returncode
            if rc != 0:
                print(f"FAIL {gbnf} sample {i}: match exit {rc}")
                failures += 1
    return failures, len(got)


def main():
    tool, gdir = sys.argv[1], sys.argv[2]
    failures = total = 0
    for name, kind in (("json.gbnf", dict), ("json_arr.gbnf", list)):
        f, n = check(tool, os.path.join(gdir, name), kind)
        failures += f
        total += n
    print(f"grammar.llamacpp_json: {total} samples, {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
