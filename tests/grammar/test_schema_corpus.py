#!/usr/bin/env python3
"""grammar.schema_corpus: JSON Schemas compiled and sampled, every sample
validated with python3-jsonschema.

For each schema file (the folders given, and with --generate the schemas the
generator writes into a temporary folder), the driver (schema_sample)
compiles it and prints --samples seeded samples. Each sample must parse as
JSON and validate against its schema (the validator of the schema's draft,
with that draft's format checker). Schemas refused as unsupported or over a
cap are listed with the reason, not failed.

Fails when a sample is not valid JSON, does not validate, is not a string of
its own grammar (the driver says so), or fewer than --min-compiled schemas
compile.

usage: test_schema_corpus.py --driver PATH [--generate GEN] [--samples N]
                             [--min-compiled N] DIR...
"""
import argparse
import collections
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

import jsonschema

CODES = {-1: "syntax", -2: "unsupported", -3: "limit", -4: "nomem"}


def run_driver(driver, files, n, seed):
    """{file: (status, detail, [sample bytes], [driver complaints])}"""
    out = subprocess.run([driver, str(n), str(seed)] + files, capture_output=True, timeout=600)
    if out.returncode != 0:
        sys.exit("driver failed (%d): %s" % (out.returncode, out.stderr.decode()[-2000:]))
    res, cur, data, i = {}, None, out.stdout, 0
    while i < len(data):
        j = data.index(b"\n", i)
        line = data[i:j].decode("utf-8", "replace")
        i = j + 1
        if line.startswith("# "):
            m = re.match(r"# (.*) (ok|error (-?\d+)\t(.*))$", line)
            cur = m.group(1)
            res[cur] = ("ok", "", [], []) if m.group(2) == "ok" else \
                (CODES.get(int(m.group(3)), m.group(3)), m.group(4), [], [])
        elif line.startswith("S "):
            size = int(line[2:])
            res[cur][2].append(data[i:i + size])
            i += size + 1
        elif line.startswith("M "):
            res[cur][3].append(line[2:])
    return res


def validate(path, samples):
    """The first problem with a sample, or None."""
    with open(path, encoding="utf-8") as f:
        schema = json.load(f)
    cls = jsonschema.validators.validator_for(schema)
    v = cls(schema, format_checker=cls.FORMAT_CHECKER)
    for s in samples:
        try:
            inst = json.loads(s.decode("utf-8"))
        except ValueError as e:
            return "not JSON (%s): %r" % (e, s[:200])
        err = next(iter(v.iter_errors(inst)), None)
        if err is not None:
            return "invalid (%s): %r" % (err.message[:200], s[:200])
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--driver", required=True)
    ap.add_argument("--generate")
    ap.add_argument("--samples", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--min-compiled", type=int, default=0)
    ap.add_argument("dirs", nargs="*")
    a = ap.parse_args()
    tmp = tempfile.TemporaryDirectory()
    dirs = list(a.dirs)
    if a.generate:
        subprocess.run([sys.executable, a.generate, "--seed", "1", "--count", "240", tmp.name],
                       check=True)
        dirs.append(tmp.name)
    compiled, refused, failed, n_samples = 0, collections.Counter(), [], 0
    for d in dirs:
        files = sorted(glob.glob(os.path.join(d, "*.json")))
        res = {}
        for k in range(0, len(files), 50):
            res.update(run_driver(a.driver, files[k:k + 50], a.samples, a.seed))
        ok = 0
        for f in files:
            status, detail, samples, complaints = res[f]
            if status != "ok":
                refused["%s: %s" % (status, detail.split("\t")[0][:110])] += 1
                continue
            ok += 1
            n_samples += len(samples)
            problem = complaints[0] if complaints else validate(f, samples)
            if problem:
                failed.append("%s: %s" % (f, problem))
        compiled += ok
        print("%s: %d schemas, %d compiled" % (d if d != tmp.name else "generated", len(files), ok))
    print("compiled: %d; samples checked: %d; invalid: %d" % (compiled, n_samples, len(failed)))
    print("refused (%d):" % sum(refused.values()))
    for reason, n in sorted(refused.items(), key=lambda kv: (-kv[1], kv[0])):
        print("  %4d  %s" % (n, reason))
    for f in failed:
        print("FAIL", f)
    if failed or compiled < a.min_compiled:
        if compiled < a.min_compiled:
            print("FAIL: %d compiled, fewer than %d" % (compiled, a.min_compiled))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
