#!/usr/bin/python3
"""Structured outputs through the server (docs/api.md "Structured outputs").

A small random checkpoint (byte-level vocabulary) behind mhla-server: whatever
the model would say, its answer under a constraint is a string of it.

- grammar (GBNF): every answer of 12 seeds at temperature 1 is accepted whole by
  `mhla-grammar match`, and finishes by stop;
- llama.cpp's grammars (tests/grammar/gbnf): an answer that stops is a whole
  string of its grammar, one cut by max_tokens a prefix;
- response_format json_schema, bounded schemas (enums, maxLength, integer
  ranges, maxItems, nested objects, anyOf): every answer parses and validates
  with python3-jsonschema, none runs to length at a generous max_tokens; the
  same through /v1/chat/completions;
- response_format json_object: answers that finish are JSON objects;
- streaming gives the text of the whole answer;
- a seeded constrained answer is the same, token for token, alone and among 16
  requests at once;
- a repeated schema is compiled once (the cache's hits in /metrics), the mask
  histogram counts the steps;
- tool_choice required or a named function on /v1/chat/completions (the
  built-in template, hermes calls): every reply is tool calls whose arguments
  validate against their tool's parameters;
- refusals naming the param: bad GBNF (with its line and column), a schema
  keyword not served, two constraints at once, ignore_eos with a grammar, an
  unknown response_format type.
"""
import glob
import json
import os
import subprocess
import sys
import threading

import jsonschema

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_server as ts  # noqa: E402
from test_server import check  # noqa: E402

GBNF = r'''root ::= "{\"verdict\": \"" verdict "\", \"count\": " count ", \"tags\": [" tags "]}"
verdict ::= "guilty" | "not guilty" | "hung"
count ::= [1-9] [0-9]?
tags ::= ( tag ( ", " tag ){0,2} )?
tag ::= "\"" [a-z]{1,6} "\""
'''

SCHEMAS = [
    {"type": "object", "properties": {"verdict": {"enum": ["guilty", "not guilty"]},
                                      "count": {"type": "integer", "minimum": 1, "maximum": 12}},
     "required": ["verdict", "count"], "additionalProperties": False},
    {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
                                      "ok": {"type": "boolean"}},
     "required": ["name", "ok"], "additionalProperties": False},
    {"type": "array", "items": {"type": "integer", "minimum": -5, "maximum": 5}, "maxItems": 4},
    {"type": "object", "properties": {"who": {"type": "object", "properties": {
        "first": {"type": "string", "maxLength": 5}, "age": {"type": "integer", "minimum": 0,
                                                            "maximum": 120}},
        "required": ["first", "age"], "additionalProperties": False}},
     "required": ["who"], "additionalProperties": False},
    {"anyOf": [{"type": "null"}, {"enum": ["a", "b", 3]}, {"type": "boolean"}]},
    {"type": "object", "properties": {"tags": {"type": "array", "maxItems": 3,
                                               "items": {"type": "string", "maxLength": 4}}},
     "required": ["tags"], "additionalProperties": False},
]


def complete(s, body):
    st, _, data = s.request("POST", "/v1/completions", body)
    return st, (json.loads(data) if data else None)


def grammar_matches(tool, gbnf_path, text):
    r = subprocess.run([tool, "match", gbnf_path, "--text", text], capture_output=True)
    return r.returncode == 0


def check_gbnf(s, tool, work):
    path = os.path.join(work, "verdict.gbnf")
    with open(path, "w") as f:
        f.write(GBNF)
    ok = finished = 0
    for seed in range(12):
        st, r = complete(s, {"prompt": "The jury said", "max_tokens": 120, "temperature": 1.0,
                             "seed": seed, "grammar": GBNF})
        c = r["choices"][0] if st == 200 else {}
        finished += c.get("finish_reason") == "stop"
        ok += st == 200 and grammar_matches(tool, path, c["text"])
    check(ok == 12 and finished == 12,
          "grammar: %d of 12 seeded answers are whole strings of it, %d finish by stop" %
          (ok, finished))


def check_llamacpp_grammars(s, tool, gbnf_dir):
    """llama.cpp's grammars unchanged: an answer that stops is a whole string
    of its grammar, one cut by max_tokens a prefix of one."""
    good = total = 0
    bad = []
    for path in sorted(glob.glob(os.path.join(gbnf_dir, "*.gbnf"))):
        with open(path) as f:
            gbnf = f.read()
        for seed in range(2):
            st, r = complete(s, {"prompt": "Go:", "max_tokens": 150, "temperature": 1.0,
                                 "seed": seed, "grammar": gbnf})
            total += 1
            if st != 200:
                bad.append("%s: %d %s" % (os.path.basename(path), st, r))
                continue
            c = r["choices"][0]
            rc = subprocess.run([tool, "match", path, "--text", c["text"]],
                                capture_output=True).returncode
            want = 0 if c["finish_reason"] == "stop" else 3
            if rc == want:
                good += 1
            else:
                bad.append("%s seed %d: %s, match says %d: %r" % (
                    os.path.basename(path), seed, c["finish_reason"], rc, c["text"][:80]))
    check(good == total and total >= 16,
          "llama.cpp's grammars: %d of %d answers whole (stop) or a prefix (length)%s" %
          (good, total, "\n    " + "\n    ".join(bad[:4]) if bad else ""))


def check_schemas(s):
    valid = stopped = total = 0
    bad = []
    for i, schema in enumerate(SCHEMAS):
        for seed in range(4):
            rf = {"type": "json_schema", "json_schema": {"name": "s%d" % i, "schema": schema,
                                                          "strict": True}}
            chat = seed % 2 == 1
            body = {"max_tokens": 400, "temperature": 1.0, "seed": seed, "response_format": rf}
            if chat:
                st, _, data = s.request("POST", "/v1/chat/completions",
                                        dict(body, messages=[{"role": "user", "content": "Go"}]))
                r = json.loads(data) if st == 200 else None
                text = r["choices"][0]["message"]["content"] if r else None
            else:
                st, r = complete(s, dict(body, prompt="Answer:"))
                text = r["choices"][0]["text"] if st == 200 else None
            total += 1
            if st != 200:
                bad.append("schema %d seed %d: %d %s" % (i, seed, st, r))
                continue
            stopped += r["choices"][0]["finish_reason"] == "stop"
            try:
                jsonschema.validate(json.loads(text), schema)
                valid += 1
            except Exception as e:  # noqa: BLE001 - any failure is the finding
                bad.append("schema %d seed %d: %r: %s" % (i, seed, text, str(e)[:120]))
    check(valid == total and stopped == total,
          "json_schema: %d of %d answers validate, %d finish by stop (none by length)%s" %
          (valid, total, stopped, "\n    " + "\n    ".join(bad[:5]) if bad else ""))


def check_json_object(s):
    good = stopped = 0
    for seed in range(6):
        st, r = complete(s, {"prompt": "{", "max_tokens": 300, "temperature": 1.0, "seed": seed,
                             "response_format": {"type": "json_object"}})
        c = r["choices"][0] if st == 200 else {}
        if c.get("finish_reason") == "stop":
            stopped += 1
            try:
                good += isinstance(json.loads(c["text"]), dict)
            except ValueError:
                pass
    check(stopped > 0 and good == stopped,
          "json_object: %d of the %d answers that finished are JSON objects" % (good, stopped))


def check_stream_and_batch(s):
    rf = {"type": "json_schema", "json_schema": {"name": "v", "schema": SCHEMAS[0]}}
    base = {"prompt": "Verdict:", "max_tokens": 200, "temperature": 1.0, "response_format": rf,
            "return_token_ids": True}
    st, alone = complete(s, dict(base, seed=7))
    st2, chunks, _ = s.stream(dict(base, seed=7))
    text, ids, finish = ts.stream_text(chunks or [])
    a = alone["choices"][0] if st == 200 else {}
    check(st2 == 200 and text == a.get("text") and ids == a.get("token_ids") and finish == "stop",
          "a constrained stream equals the whole answer")
    results = [None] * 16

    def one(k):
        results[k] = complete(s, dict(base, seed=7 if k == 5 else 100 + k))

    threads = [threading.Thread(target=one, args=(k,)) for k in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    st5, b = results[5]
    check(st5 == 200 and b["choices"][0]["token_ids"] == a.get("token_ids"),
          "a seeded constrained answer is the same alone and among 16 at once")
    check(all(r[0] == 200 for r in results), "the 16 constrained requests at once all answer")


def check_cache_and_metrics(s):
    m0 = s.metrics()
    rf = {"type": "json_schema", "json_schema": {"name": "c", "schema": SCHEMAS[1]}}
    for seed in range(3):
        complete(s, {"prompt": "x", "max_tokens": 60, "seed": seed, "response_format": rf})
    m1 = s.metrics()
    hits = m1["mhla_grammar_cache_hits_total"] - m0["mhla_grammar_cache_hits_total"]
    compiled = m1["mhla_grammar_compiled_total"] - m0["mhla_grammar_compiled_total"]
    check(hits == 3 and compiled == 0,
          "a schema seen before is not compiled again (%d hits, %d compiled)" % (hits, compiled))
    check(m1["mhla_grammar_mask_seconds_count"] > m0["mhla_grammar_mask_seconds_count"] and
          m1["mhla_grammar_rows_total"] >= m0["mhla_grammar_rows_total"] + 3,
          "/metrics counts the masks and the constrained rows")


FORCED_TOOLS = [
    {"type": "function", "function": {"name": "light", "parameters": {
        "type": "object", "properties": {"room": {"enum": ["hall", "attic"]},
                                         "on": {"type": "boolean"}},
        "required": ["room", "on"], "additionalProperties": False}}},
    {"type": "function", "function": {"name": "volume", "parameters": {
        "type": "object", "properties": {"level": {"type": "integer", "minimum": 0,
                                                   "maximum": 11}},
        "required": ["level"], "additionalProperties": False}}}]


def forced_calls(s, seed, **extra):
    body = dict({"messages": [{"role": "user", "content": "Do it"}], "tools": FORCED_TOOLS,
                 "max_tokens": 300, "temperature": 1.0, "seed": seed}, **extra)
    st, _, data = s.request("POST", "/v1/chat/completions", body)
    r = json.loads(data) if data else None
    return st, (r["choices"][0] if st == 200 else r)


def check_forced_calls(s):
    """tool_choice required or named: a random model's reply is held to calls
    of the tools, whose arguments follow each tool's parameters."""
    params = {t["function"]["name"]: t["function"]["parameters"] for t in FORCED_TOOLS}
    good = 0
    for seed in range(6):
        st, ch = forced_calls(s, seed, tool_choice="required", parallel_tool_calls=False)
        calls = ch.get("message", {}).get("tool_calls", []) if st == 200 else []
        ok = st == 200 and ch["finish_reason"] == "tool_calls" and len(calls) == 1
        for c in calls if ok else []:
            try:
                jsonschema.validate(json.loads(c["function"]["arguments"]),
                                    params[c["function"]["name"]])
            except Exception:  # noqa: BLE001 - any failure is the finding
                ok = False
        good += ok
    check(good == 6, "tool_choice required: %d of 6 random replies are one call whose arguments "
          "validate against its tool's parameters" % good)
    st, ch = forced_calls(s, 1, tool_choice={"type": "function", "function": {"name": "volume"}})
    calls = ch.get("message", {}).get("tool_calls", []) if st == 200 else []
    check(len(calls) == 1 and calls[0]["function"]["name"] == "volume" and
          0 <= json.loads(calls[0]["function"]["arguments"])["level"] <= 11,
          "a named tool_choice: one call of that function (%s)" % json.dumps(calls)[:200])


def err(s, body, param, words, path="/v1/completions"):
    st, _, data = s.request("POST", path, body)
    e = json.loads(data).get("error", {}) if data else {}
    check(st == 400 and e.get("param") == param and words in e.get("message", ""),
          "%s -> 400 %s" % (param, json.dumps(e)[:200]))


def check_refusals(s):
    err(s, {"prompt": "x", "grammar": "root ::= \"a\" foo"}, "grammar", "undefined rule 'foo'")
    err(s, {"prompt": "x", "grammar": "root ::= [a-"}, "grammar", "line 1")
    err(s, {"prompt": "x", "response_format": {"type": "json_schema", "json_schema": {
        "name": "n", "schema": {"type": "string", "contentEncoding": "base64"}}}},
        "response_format.json_schema.schema", "contentEncoding")
    err(s, {"prompt": "x", "grammar": "root ::= \"a\"", "response_format": {"type": "json_object"}},
        "grammar", "one of")
    err(s, {"prompt": "x", "grammar": "root ::= \"a\"", "ignore_eos": True}, "ignore_eos",
        "cannot go with a grammar")
    err(s, {"prompt": "x", "response_format": {"type": "yaml"}}, "response_format.type",
        "json_schema")
    err(s, {"messages": [{"role": "user", "content": "x"}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "n"}}},
        "response_format.json_schema.schema", "missing", path="/v1/chat/completions")


def main():
    a = ts.parse_args()
    model = os.path.join(a.work, "model")
    ts.gen_checkpoint.main(["--out", model, "--vocab", "256", "--hidden", "64", "--layers", "2",
                            "--heads", "4", "--chunk", "16", "--blocks", "128", "--seed", "5"])
    s = ts.Server(os.path.join(a.bin, "mhla-server"), model, a.work, "structured",
                  "--threads", "2", "--max-batch-tokens", "64")
    try:
        check_gbnf(s, os.path.join(a.bin, "mhla-grammar"), a.work)
        check_llamacpp_grammars(s, os.path.join(a.bin, "mhla-grammar"),
                                os.path.join(HERE, "..", "grammar", "gbnf"))
        check_schemas(s)
        check_json_object(s)
        check_stream_and_batch(s)
        check_cache_and_metrics(s)
        check_forced_calls(s)
        check_refusals(s)
    finally:
        rc = s.stop()
        check(rc == 0, "SIGTERM: exit 0 (rc=%s)" % rc)


if __name__ == "__main__":
    ts.run_test(main, "structured-output")
