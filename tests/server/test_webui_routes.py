#!/usr/bin/python3
"""The playground's routes without a browser (tests/webui/test_webui.mjs drives the page).

Servers on free 127.0.0.1 ports with a small random checkpoint (always killed at the
end). Each check fails on a server without the behaviour it names:
  - GET / is server/webui/index.html as text/html, with a Content-Security-Policy that
    allows scripts, styles and API calls from the server itself only, "no-cache" and an
    ETag; a GET with that ETag in If-None-Match is a 304 without a body;
  - every file the page loads (its src= and href= paths) is served, with its type and
    the file's bytes; HEAD answers the headers without the body; POST is a 405;
  - with --api-key the page and its files need no key, the API still does;
  - with --no-webui, and with MHLA_NO_WEBUI=1, those paths are 404 like any unknown path;
  - the page keeps to its CSP (no inline script, style or event handler) and to its size
    budget (all of it under 60 KB).
"""
import argparse
import os
import re
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
WEBUI = os.path.join(ROOT, "server", "webui")
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
import gen_checkpoint  # noqa: E402
import test_server as ts  # noqa: E402
from test_server import Server, check  # noqa: E402

KEY = "sk-webui-test"
TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}
BUDGET = 60 * 1024


def req(s, method, path, headers=None):
    """(status, headers with lower-case names, body bytes)."""
    st, h, data = s.request(method, path, None, headers, timeout=60)
    return st, {k.lower(): v for k, v in h.items()}, data


def page_files():
    """The paths index.html loads, and the file each one is."""
    html = open(os.path.join(WEBUI, "index.html")).read()
    paths = sorted(set(re.findall(r'(?:src|href)="(/webui/[^"]+)"', html)))
    return {p: os.path.join(WEBUI, p[len("/webui/"):]) for p in paths}


def check_page(s):
    st, h, data = req(s, "GET", "/")
    check(st == 200, "GET /: 200 without an API key (got %d)" % st)
    check(h.get("content-type", "").startswith("text/html"), "GET / is text/html")
    check(data == open(os.path.join(WEBUI, "index.html"), "rb").read(), "GET / is index.html")
    csp = h.get("content-security-policy", "")
    for part in ("default-src 'none'", "script-src 'self'", "style-src 'self'",
                 "connect-src 'self'"):
        check(part in csp, "CSP has %s (%r)" % (part, csp))
    check("unsafe-inline" not in csp and "*" not in csp, "CSP allows nothing but the server")
    check(h.get("cache-control") == "no-cache" and h.get("etag"), "no-cache with an ETag")
    st, h2, data = req(s, "GET", "/", {"If-None-Match": h.get("etag", "x")})
    check(st == 304 and data == b"", "If-None-Match with its ETag: 304, no body (got %d)" % st)
    st, _, _ = req(s, "POST", "/")
    check(st == 405, "POST /: 405 (got %d)" % st)


def check_files(s):
    files = page_files()
    check(len(files) >= 3, "index.html loads %d files" % len(files))
    for path, f in files.items():
        st, h, data = req(s, "GET", path)
        want = TYPES.get(os.path.splitext(f)[1], "?")
        check(st == 200 and h.get("content-type", "").startswith(want),
              "%s: 200 %s (got %d %s)" % (path, want, st, h.get("content-type")))
        check(data == open(f, "rb").read(), "%s is the file's bytes" % path)
        st, hh, data = req(s, "HEAD", path)
        check(st == 200 and data == b"" and hh.get("content-length") == str(os.path.getsize(f)),
              "HEAD %s: headers, no body" % path)
    st, _, _ = req(s, "GET", "/webui/missing.js")
    check(st == 404, "a file the page does not have: 404 (got %d)" % st)


def check_source():
    html = open(os.path.join(WEBUI, "index.html")).read()
    check(not re.search(r"<script(?![^>]*\bsrc=)", html), "no inline <script> in index.html")
    check(not re.search(r"<style|\sstyle=|\son[a-z]+=", html),
          "no inline style or event handler in index.html")
    js = open(os.path.join(WEBUI, "app.js")).read()
    check("innerHTML" not in js and "eval(" not in js, "app.js writes text, never HTML")
    size = sum(os.path.getsize(os.path.join(WEBUI, f)) for f in os.listdir(WEBUI))
    check(size < BUDGET, "server/webui/ is %d bytes (budget %d)" % (size, BUDGET))


def check_off(s, how):
    for path in ["/"] + list(page_files()):
        st, h, data = req(s, "GET", path)
        check(st == 404 and b"no such endpoint" in data, "%s: GET %s is a 404 (got %d)"
              % (how, path, st))
    st, _, _ = req(s, "GET", "/health")
    check(st == 200, "%s: the API is still served" % how)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    binary = os.path.join(a.bin, "mhla-server")
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    model = os.path.join(a.work, "model")
    gen_checkpoint.main(["--out", model, "--vocab", "256", "--hidden", "64", "--layers", "2",
                         "--heads", "4", "--chunk", "16", "--blocks", "32", "--seed", "1"])
    check_source()
    s = Server(binary, model, a.work, "on", "--api-key", KEY)
    check_page(s)
    check_files(s)
    st, _, _ = req(s, "GET", "/v1/models")
    check(st == 401, "with --api-key the API still needs the key (got %d)" % st)
    s.proc.kill()
    check_off(Server(binary, model, a.work, "flag", "--no-webui"), "--no-webui")
    os.environ["MHLA_NO_WEBUI"] = "1"
    try:
        check_off(Server(binary, model, a.work, "env"), "MHLA_NO_WEBUI=1")
    finally:
        del os.environ["MHLA_NO_WEBUI"]


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # a crash of the test itself is a failure too
        import traceback
        traceback.print_exc()
        ts.FAILURES.append("exception: %r" % e)
    finally:
        for p in ts.PROCS:
            if p.poll() is None:
                p.kill()
                p.wait()
    if ts.FAILURES:
        print("%d FAILED:\n  %s" % (len(ts.FAILURES), "\n  ".join(ts.FAILURES)))
        sys.exit(1)
    print("all playground route checks passed")
