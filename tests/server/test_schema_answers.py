#!/usr/bin/python3
"""A model's answers under JSON Schemas, through the server: every answer that
finishes by stop validates, and where the schema bounds every repetition
(string lengths, item counts, closed objects, enums, no recursion) none runs
to max_tokens.

The schemas: the generated set (tests/grammar/gen_schemas.py, 240 seeded), the
real ones of tests/grammar/schemas/real and the hidden set (schemas/hidden,
never used while the compiler was written). Each is sent once to
/v1/completions as response_format json_schema, with its own seed, at
temperature 1, by 8 clients at once, to a random byte-level checkpoint with a
2,048-token context. Schemas the server refuses (a 400 naming a keyword it does
not serve) are counted, not failed. Prints the counts; fails on an answer that
stops and does not validate, or one of a bounded schema that runs to length.

usage: test_schema_answers.py --bin BIN_DIR --work DIR --schemas GRAMMAR_TEST_DIR
"""
import argparse
import concurrent.futures
import glob
import json
import os
import subprocess
import sys

import jsonschema

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_server as ts  # noqa: E402
from test_server import check  # noqa: E402

MAX_TOKENS = 1500


def bounded(s, seen_ref=False):
    """True when every string of s is length-bounded, every array has
    maxItems, every object is closed, and s has no $ref (recursion)."""
    if not isinstance(s, dict):
        return s is not True
    if "$ref" in s:
        return False
    if "enum" in s or "const" in s:
        return True
    t = s.get("type")
    types = t if isinstance(t, list) else [t]
    if "string" in types and not ({"maxLength", "format"} & set(s)):
        return False
    if "array" in types and "maxItems" not in s:
        return False
    if "object" in types or "properties" in s:
        if s.get("additionalProperties", True) is not False:
            return False
    if t is None and not ({"anyOf", "oneOf", "allOf", "properties"} & set(s)):
        return False
    subs = list((s.get("properties") or {}).values())
    subs += [s[k] for k in ("items",) if isinstance(s.get(k), dict)]
    subs += s.get("prefixItems", []) + s.get("anyOf", []) + s.get("oneOf", []) + s.get("allOf", [])
    return all(bounded(x) for x in subs)


def set_of(path):
    return os.path.basename(os.path.dirname(path))


def ask(s, i, path):
    schema = json.load(open(path))
    body = {"prompt": "Answer:", "max_tokens": MAX_TOKENS, "temperature": 1.0, "seed": i,
            "response_format": {"type": "json_schema",
                                "json_schema": {"name": "s", "schema": schema}}}
    st, _, data = s.request("POST", "/v1/completions", body)
    r = json.loads(data) if data else {}
    if st != 200:
        return path, schema, st, r.get("error", {}).get("message", ""), None
    c = r["choices"][0]
    return path, schema, st, c["finish_reason"], c["text"]


def verdict(counts, bad, path, schema, st, finish, text):
    if st != 200:
        counts["refused" if st == 400 else "error"] += 1
        if st != 400:
            bad.append("%s: HTTP %d %s" % (path, st, finish))
        return
    counts["answered"] += 1
    counts[finish] += 1
    if finish == "length":
        counts["length_unbounded" if not bounded(schema) else "length_bounded"] += 1
        if bounded(schema):
            bad.append("%s: a bounded schema ran to length: %r" % (path, text[:120]))
        return
    try:
        jsonschema.validate(json.loads(text), schema)
        counts["valid"] += 1
    except Exception as e:  # noqa: BLE001 - any failure is the finding
        bad.append("%s: %r: %s" % (os.path.basename(path), text[:150], str(e)[:150]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--schemas", required=True)
    a = ts.parse_args(ap)
    gen = os.path.join(a.work, "generated")
    subprocess.run([sys.executable, os.path.join(a.schemas, "gen_schemas.py"), gen], check=True)
    files = sorted(glob.glob(os.path.join(gen, "*.json")))
    for d in ("real", "hidden"):
        files += sorted(glob.glob(os.path.join(a.schemas, "schemas", d, "*.json")))
    model = os.path.join(a.work, "model")
    ts.gen_checkpoint.main(["--out", model, "--vocab", "256", "--hidden", "64", "--layers", "2",
                            "--heads", "4", "--chunk", "16", "--blocks", "128", "--seed", "9"])
    s = ts.Server(os.path.join(a.bin, "mhla-server"), model, a.work, "answers", "--threads", "2")
    counts = {k: 0 for k in ("answered", "refused", "error", "stop", "length", "valid",
                             "length_bounded", "length_unbounded")}
    bad, per_set = [], {}
    try:
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            for res in pool.map(lambda p: ask(s, p[0], p[1]), enumerate(files)):
                verdict(counts, bad, *res)
                one = per_set.setdefault(set_of(res[0]), {k: 0 for k in counts})
                verdict(one, [], *res)
    finally:
        rc = s.stop()
    n_bounded = sum(bounded(json.load(open(f))) for f in files)
    print("schemas %d (%d bounded): %s" % (len(files), n_bounded, json.dumps(counts)))
    for name, c in sorted(per_set.items()):
        print("  %s: %s" % (name, json.dumps(c)))
    check(counts["valid"] == counts["stop"] and not bad and counts["answered"] >= 300,
          "%d answers that stop, %d valid; %d of bounded schemas ran to length%s" %
          (counts["stop"], counts["valid"], counts["length_bounded"],
           "\n    " + "\n    ".join(bad[:8]) if bad else ""))
    check(rc == 0, "SIGTERM: exit 0 (rc=%s)" % rc)


if __name__ == "__main__":
    ts.run_test(main, "schema-answer")
