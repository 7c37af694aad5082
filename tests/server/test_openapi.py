#!/usr/bin/python3
"""GET /openapi.json against the router and docs/api.md.

server/openapi.json (validated as OpenAPI 3.1 by tests/openapi/validate.mjs) must
describe the server the code serves and the docs document:
  - its paths are exactly the router's: the path comparisons of known_path() in
    server/http.c (a prefix comparison is a path with one {parameter});
  - on a live server every path and method it lists is served (never 404), another
    method on it is a 405, and a path it does not list is a 404;
  - GET /openapi.json serves the file's document, as application/json, without an
    API key, with CORS headers for an allowed origin;
  - docs/api.md's endpoint table, request field tables (completions, chat, structured
    outputs, the fields chat shares with completions), the request and response keys of
    /tokenize, /detokenize and /apply-template, and its error codes all appear in it.
Each check fails when the document, the router or the docs drift apart.
"""
import argparse
import json
import os
import re
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
import gen_checkpoint  # noqa: E402
import test_server as ts  # noqa: E402
from test_server import Server, check  # noqa: E402

KEY = "sk-openapi-test"
ORIGIN = "https://docs.example"
METHODS = ("get", "post", "put", "patch", "delete")


def router_paths(http_c):
    """The paths known_path() in http.c compares against; a strncmp prefix 'P/' as 'P/{}'."""
    src = open(http_c).read()
    m = re.search(r"static int known_path\(const char \*path\)\s*\{(.*?)\n\}", src, re.S)
    if not m:
        return set()
    out = set()
    for fn, lit in re.findall(r'(strn?cmp)\(path, "([^"]+)"', m.group(1)):
        out.add(lit + "{}" if fn == "strncmp" else lit)
    return out


def doc_paths(doc):
    return {re.sub(r"\{[^}]*\}", "{}", p) for p in doc["paths"]}


def check_routes(a, doc):
    routes = router_paths(os.path.join(ROOT, "server", "http.c"))
    check(len(routes) >= 8, "known_path() in server/http.c read: %d paths" % len(routes))
    check(routes == doc_paths(doc), "openapi.json's paths are the router's (router only: %s; "
          "document only: %s)" % (sorted(routes - doc_paths(doc)), sorted(doc_paths(doc) - routes)))


def check_live(s, doc, model_name):
    auth = {"Authorization": "Bearer " + KEY}
    for path, ops in sorted(doc["paths"].items()):
        url = re.sub(r"\{[^}]*\}", model_name, path)
        for method in (m for m in METHODS if m in ops):
            body = {} if method == "post" else None
            st, _, _ = s.request(method.upper(), url, body, auth, timeout=60)
            check(st not in (404, 405), "%s %s is served (got %d)" % (method.upper(), url, st))
        other = "DELETE"
        st, h, _ = s.request(other, url, None, auth, timeout=60)
        check(st == 405, "%s %s: 405 (got %d)" % (other, url, st))
    st, _, _ = s.request("GET", "/v1/openapi.json", None, auth, timeout=60)
    check(st == 404, "a path the document does not list: 404 (got %d)" % st)


def check_served(s, doc):
    st, h, data = s.request("GET", "/openapi.json", headers={"Origin": ORIGIN}, timeout=60)
    h = {k.lower(): v for k, v in h.items()}
    check(st == 200, "GET /openapi.json without an API key: 200 (got %d)" % st)
    check(h.get("content-type") == "application/json", "served as application/json")
    check(data.endswith(b"}\n") and not data.endswith(b"\n\n"), "one newline ends the body")
    check(json.loads(data) == doc, "the served document is server/openapi.json")
    check(h.get("access-control-allow-origin") == ORIGIN, "CORS headers for an allowed origin")


def section(md, title):
    """The text of docs/api.md's section whose heading starts with title."""
    m = re.search(r"^##+ " + re.escape(title) + r".*?$(.*?)(?=^## |\Z)", md, re.S | re.M)
    return m.group(1) if m else ""


def table_fields(text):
    """The backticked names of the first column of the tables in text whose header is 'field'."""
    out, in_table = set(), False
    for line in text.splitlines():
        if line.startswith("| field |"):
            in_table = True
        elif not line.startswith("|"):
            in_table = False
        elif in_table and not line.startswith("|---"):
            out.update(re.findall(r"`([a-z_]+)`", line.split("|")[1]))
    return out


def props(doc, name):
    return set(doc["components"]["schemas"][name]["properties"])


def check_fields(doc, md):
    comp, chat = props(doc, "CompletionRequest"), props(doc, "ChatCompletionRequest")
    want_comp = table_fields(section(md, "POST /v1/completions"))
    check(len(want_comp) >= 20, "docs: %d completions fields read" % len(want_comp))
    check(want_comp <= comp, "completions fields in CompletionRequest (missing %s)"
          % sorted(want_comp - comp))
    chat_md = section(md, "POST /v1/chat/completions")
    shared = re.search(r"Fields: every sampling and limit field.*?\((`model`.*?)\)", chat_md,
                       re.S)
    want_chat = table_fields(chat_md) | set(re.findall(r"`([a-z_]+)`", shared.group(1)
                                                       if shared else ""))
    check(len(want_chat) >= 20, "docs: %d chat fields read" % len(want_chat))
    check(want_chat <= chat, "chat fields in ChatCompletionRequest (missing %s)"
          % sorted(want_chat - chat))
    structured = table_fields(section(md, "Structured outputs"))
    check(structured == {"response_format", "grammar", "json_schema"} and
          structured <= comp and structured <= chat, "structured outputs fields on both")


def body_keys(doc, path, response=False):
    op = doc["paths"][path]["post"]
    if response:
        schema = op["responses"]["200"]["content"]["application/json"]["schema"]
    else:
        schema = op["requestBody"]["content"]["application/json"]["schema"]
    return set(schema["properties"])


def check_small_endpoints(doc, md):
    """The keys of the 'POST /x {...} → {...}' examples of docs/api.md."""
    text = section(md, "POST /apply-template") + section(md, "POST /tokenize")
    found = 0
    for path, req, resp in re.findall(r"POST (/[a-z-]+)\s+(\{.*?)\s+→\s+(\{[^\n]*)", text, re.S):
        found += 1
        want_req, want_resp = set(re.findall(r'"(\w+)":', req)), set(re.findall(r'"(\w+)":',
                                                                                 resp))
        check(want_req <= body_keys(doc, path), "%s request keys %s" % (path, sorted(want_req)))
        check(want_resp <= body_keys(doc, path, True),
              "%s response keys %s" % (path, sorted(want_resp)))
    check(found == 3, "docs: 3 examples of /tokenize, /detokenize, /apply-template (%d)" % found)


def check_endpoints_and_errors(doc, md):
    table = section(md, "Endpoints")
    listed = set()
    for line in table.splitlines():
        cell = line.split("|")[1] if line.startswith("|") else ""
        for method, path in re.findall(r"`(GET|POST) (/[^`]*)`", cell):
            listed.add((method.lower(), path))
    ops = {(m, p) for p, o in doc["paths"].items() for m in o if m in METHODS}
    check(listed == ops, "docs' endpoint table lists the document's operations (docs only: "
          "%s; document only: %s)" % (sorted(listed - ops), sorted(ops - listed)))
    codes = set(re.findall(r"^\| \d{3} \| `[a-z_]+` \| `([a-z_]+)` \|", section(md, "Errors"),
                           re.M)) - {"null"}
    enum = set(doc["components"]["schemas"]["Error"]["properties"]["error"]["properties"]
               ["code"]["enum"])
    check(len(codes) >= 10 and codes <= enum, "docs' error codes in Error.code (missing %s)"
          % sorted(codes - enum))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    doc = json.load(open(os.path.join(ROOT, "server", "openapi.json")))
    md = open(os.path.join(ROOT, "docs", "api.md")).read()
    check_routes(a, doc)
    check_fields(doc, md)
    check_small_endpoints(doc, md)
    check_endpoints_and_errors(doc, md)
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    model = os.path.join(a.work, "model")
    gen_checkpoint.main(["--out", model, "--vocab", "256", "--hidden", "64", "--layers", "2",
                         "--heads", "4", "--chunk", "16", "--blocks", "32", "--seed", "1"])
    s = Server(os.path.join(a.bin, "mhla-server"), model, a.work, "openapi", "--api-key", KEY,
               "--allowed-origins", ORIGIN)
    check_served(s, doc)
    check_live(s, doc, "model")


if __name__ == "__main__":
    ts.run_test(main, "OpenAPI")
