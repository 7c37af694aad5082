#!/usr/bin/python3
"""CORS (--allowed-origins) as a browser meets it.

Servers on free 127.0.0.1 ports with a small random checkpoint (always killed
at the end). Each check fails on a server without the behaviour it names: a
preflight answered 204 before the API key check, with the methods, headers
and max age a browser needs; a preflight from an origin not listed refused
(403, no CORS headers); the allow and expose headers on normal, error and
streamed answers to a listed origin, and none for another origin or without
--allowed-origins (where OPTIONS stays a 405); "*"; a malformed list refused
at start with a message naming the entry.
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
import gen_checkpoint  # noqa: E402
import test_server as ts  # noqa: E402
from test_server import Server, check  # noqa: E402

KEY = "sk-cors-test"
APP = "https://app.example"
DEV = "http://localhost:5173"
EVIL = "https://evil.example"


def req(s, method, path, body=None, headers=None):
    """(status, headers with lower-case names, body bytes)."""
    st, h, data = s.request(method, path, body, headers, timeout=60)
    return st, {k.lower(): v for k, v in h.items()}, data


def preflight(s, origin, path="/v1/chat/completions", requested=None):
    h = {"Origin": origin, "Access-Control-Request-Method": "POST"}
    if requested:
        h["Access-Control-Request-Headers"] = requested
    return req(s, "OPTIONS", path, headers=h)


def has_cors(h):
    return any(k.startswith("access-control-") for k in h)


def names(value):
    return [v.strip().lower() for v in (value or "").split(",")]


def run_preflights(s):
    st, h, data = preflight(s, APP, requested="authorization, content-type, x-stainless-os")
    check(st == 204 and data == b"", "preflight without an API key: 204, empty (got %d)" % st)
    check(h.get("access-control-allow-origin") == APP, "preflight: Allow-Origin is the origin")
    check("origin" in names(h.get("vary")), "preflight: Vary: Origin")
    methods = names(h.get("access-control-allow-methods"))
    check(all(m in methods for m in ("get", "post", "options")),
          "preflight: Allow-Methods GET, POST, OPTIONS (got %r)" % methods)
    allowed = names(h.get("access-control-allow-headers"))
    check(sorted(allowed) == ["authorization", "content-type", "x-stainless-os"],
          "preflight: Allow-Headers has the key, the body type and what was asked, once (%r)"
          % allowed)
    check(int(h.get("access-control-max-age", "0")) > 0, "preflight: a Max-Age")
    st, h, _ = preflight(s, DEV, path="/health")
    check(st == 204 and h.get("access-control-allow-origin") == DEV,
          "preflight of /health from the second listed origin: 204")
    st, h, _ = preflight(s, APP, requested="x-a (evil)")
    check(st == 204 and names(h.get("access-control-allow-headers")) ==
          ["authorization", "content-type"], "a requested list that is not plain is not echoed")
    st, h, data = preflight(s, EVIL)
    err = json.loads(data) if data else {}
    check(st == 403 and err.get("error", {}).get("code") == "origin_not_allowed",
          "preflight from an origin not listed: 403 origin_not_allowed (got %d)" % st)
    check("access-control-allow-origin" not in h, "preflight refused: no Allow-Origin")
    st, h, _ = preflight(s, APP, path="/nope")
    check(st == 404, "preflight of an unknown path: 404 (got %d)" % st)
    st, h, _ = req(s, "OPTIONS", "/v1/completions",
                   headers={"Origin": APP, "Authorization": "Bearer " + KEY})
    check(st == 405, "OPTIONS without Access-Control-Request-Method: 405 (got %d)" % st)


def run_answers(s):
    auth = {"Authorization": "Bearer " + KEY}
    body = {"prompt": "hello", "max_tokens": 4}
    st, h, _ = req(s, "POST", "/v1/completions", body, dict(auth, Origin=APP))
    check(st == 200 and h.get("access-control-allow-origin") == APP,
          "completion from a listed origin: 200 with Allow-Origin (got %d)" % st)
    exposed = names(h.get("access-control-expose-headers"))
    check("retry-after" in exposed and "x-request-id" in exposed,
          "Expose-Headers has Retry-After and X-Request-Id (%r)" % exposed)
    check("origin" in names(h.get("vary")), "completion: Vary: Origin")
    st, h, _ = req(s, "POST", "/v1/completions", body, {"Origin": APP})
    check(st == 401 and h.get("access-control-allow-origin") == APP,
          "401 without a key still has Allow-Origin, so the page reads the error (%d)" % st)
    st, h, _ = req(s, "GET", "/nope", headers={"Origin": APP})
    check(st == 404 and h.get("access-control-allow-origin") == APP, "404 has Allow-Origin")
    st, h, data = req(s, "POST", "/v1/completions", dict(body, stream=True),
                      dict(auth, Origin=APP))
    check(st == 200 and h.get("content-type") == "text/event-stream" and
          data.endswith(b"data: [DONE]\n\n") and h.get("access-control-allow-origin") == APP,
          "stream from a listed origin: SSE with Allow-Origin")
    st, h, _ = req(s, "POST", "/v1/completions", body, dict(auth, Origin=EVIL))
    check(st == 200 and not has_cors(h) and "origin" in names(h.get("vary")),
          "an origin not listed: served, no CORS headers, Vary: Origin")
    st, h, _ = req(s, "POST", "/v1/completions", body, auth)
    check(st == 200 and not has_cors(h), "no Origin: no CORS headers")


def run_off_and_any(a, model):
    s = Server(a.binary, model, a.work, "off")
    st, h, _ = preflight(s, APP)
    check(st == 405 and not has_cors(h) and "allow" in h,
          "without --allowed-origins a preflight is a 405 with Allow (got %d)" % st)
    st, h, _ = req(s, "GET", "/health", headers={"Origin": APP})
    check(st == 200 and not has_cors(h) and "vary" not in h,
          "without --allowed-origins: no CORS headers, no Vary")
    s.proc.kill()
    s = Server(a.binary, model, a.work, "any", "--allowed-origins", "*", "--api-key", KEY)
    st, h, _ = preflight(s, EVIL)
    check(st == 204 and h.get("access-control-allow-origin") == "*", "'*': any origin, '*'")
    st, h, _ = req(s, "GET", "/v1/models", headers={"Origin": EVIL,
                                                     "Authorization": "Bearer " + KEY})
    check(st == 200 and h.get("access-control-allow-origin") == "*", "'*' on an answer")
    s.proc.kill()


def run_bad_flag(a, model):
    for bad in ("https://app.example/", "app.example", "https://a.example,", "*,https://b.c"):
        p = subprocess.run([a.binary, "--model", model, "--port", "0", "--allowed-origins", bad],
                           capture_output=True, text=True, timeout=60)
        check(p.returncode != 0 and "--allowed-origins" in p.stderr,
              "--allowed-origins %r refused at start, naming the flag" % bad)


def main():
    a = ts.parse_args()
    model = os.path.join(a.work, "model")
    gen_checkpoint.main(["--out", model, "--vocab", "256", "--hidden", "64", "--layers", "2",
                         "--heads", "4", "--chunk", "16", "--blocks", "32", "--seed", "1"])
    s = Server(a.binary, model, a.work, "cors", "--api-key", KEY,
               "--allowed-origins", APP + ", " + DEV)
    run_preflights(s)
    run_answers(s)
    s.proc.kill()
    run_off_and_any(a, model)
    run_bad_flag(a, model)


if __name__ == "__main__":
    ts.run_test(main, "CORS")
