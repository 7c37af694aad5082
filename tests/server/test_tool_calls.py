#!/usr/bin/python3
"""Tool calls end to end (docs/api.md "Tool calls"): standard library.

tests/server/data/toolcall/model is a tiny checkpoint that learned, greedily,
the replies of tests/server/data/toolcall/conversations.json: for each case a
conversation (with tools or without), the chat template it is rendered with
and the exact reply. For each template, mhla-server runs with --chat-template
(the format found from the template's markers) and every case is asked
whole and streamed:

- a reply that holds calls comes back as tool_calls (ids, type function,
  name, arguments as a JSON string equal to the reply's), content null,
  finish_reason tool_calls; streamed, the tool_calls deltas add up to the same
  calls and no content delta carries a byte of them;
- parallel_tool_calls false keeps the first call;
- tool_choice none and --tool-call-format none give the reply as content,
  byte for byte;
- the round trip (the calls sent back with tool results) and a plain
  conversation answer in text with finish_reason stop.
The servers are always killed.
"""
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_server as ts  # noqa: E402
from test_server import check  # noqa: E402

DATA = os.path.join(HERE, "data", "toolcall")
CHAT = "/v1/chat/completions"


def expected_calls(case):
    """The calls the case's reply holds, as the fixture lists them: [(name, args)]."""
    return [(c["name"], c["arguments"]) for c in case.get("tool_calls", [])]


def body_of(case, **extra):
    b = {"messages": case["messages"], "temperature": 0, "max_tokens": 200}
    if case.get("tools"):
        b["tools"] = case["tools"]
    b.update(extra)
    return b


def chat(s, body):
    st, _, data = s.request("POST", CHAT, body)
    return st, (json.loads(data) if st == 200 else data)


def stream(s, body):
    st, _, data = s.request("POST", CHAT, dict(body, stream=True))
    if st != 200:
        return st, None
    out = []
    for ev in data.decode("utf-8").split("\n\n")[:-1]:
        if ev[6:] != "[DONE]":
            out.append(json.loads(ev[6:]))
    return st, out


def same_calls(got, want):
    return (len(got) == len(want) and
            all(g["type"] == "function" and g["id"] and g["function"]["name"] == n and
                json.loads(g["function"]["arguments"]) == a for g, (n, a) in zip(got, want)))


def gather(chunks):
    """A chat stream's content, calls (deltas merged by index) and finish."""
    content, calls, finish = "", {}, None
    for c in chunks:
        for ch in c["choices"]:
            d = ch["delta"]
            content += d.get("content") or ""
            for tc in d.get("tool_calls", []):
                calls[tc["index"]] = tc
            finish = ch["finish_reason"] or finish
    return content, [calls[k] for k in sorted(calls)], finish


def check_case(s, i, case):
    want = expected_calls(case)
    name = "case %d (%s)" % (i, case["format"])
    st, r = chat(s, body_of(case))
    if st != 200:
        check(False, "%s: %d %s" % (name, st, r))
        return
    ch = r["choices"][0]
    m = ch["message"]
    if want:
        check(ch["finish_reason"] == "tool_calls" and m["content"] is None and
              same_calls(m.get("tool_calls", []), want),
              "%s: the reply's %d call(s) as tool_calls: %s" % (name, len(want), json.dumps(ch)))
    else:
        check(ch["finish_reason"] == "stop" and m["content"] == case["reply"] and
              "tool_calls" not in m, "%s: a text reply: %s" % (name, json.dumps(ch)))
    st, chunks = stream(s, body_of(case))
    content, calls, finish = gather(chunks or [])
    check(st == 200 and finish == ch["finish_reason"] and content == (m["content"] or "") and
          same_calls(calls, want), "%s: streamed, the same content and calls" % name)
    ids = [c["id"] for c in m.get("tool_calls", []) + calls]
    pattern = r"[A-Za-z0-9]{9}" if case["format"] == "mistral" else r"call_[A-Za-z0-9]{24}"
    check(all(re.fullmatch(pattern, i) for i in ids) and len(set(ids)) == len(ids),
          "%s: call ids %s are %s, each its own" % (name, ids, pattern))
    if len(want) > 1:
        st, r1 = chat(s, body_of(case, parallel_tool_calls=False))
        check(st == 200 and same_calls(r1["choices"][0]["message"]["tool_calls"], want[:1]),
              "%s: parallel_tool_calls false keeps the first call" % name)
    if want:
        st, rn = chat(s, body_of(case, tool_choice="none"))
        check(st == 200 and rn["choices"][0]["message"]["content"] == case["reply"] and
              rn["choices"][0]["finish_reason"] == "stop",
              "%s: tool_choice none: the reply as content, byte for byte" % name)


def run_template(binary, model, work, template, cases, fmt_flag=None):
    flags = ["--threads", "2", "--chat-template", os.path.join(DATA, template)]
    if fmt_flag:
        flags += ["--tool-call-format", fmt_flag]
    s = ts.Server(binary, model, work, "tools_" + template.split(".")[0], *flags)
    try:
        st, _, data = s.request("GET", "/v1/models")
        listed = json.loads(data)["data"][0].get("tool_call_format") if st == 200 else None
        want = fmt_flag or cases[0][1]["format"]
        check(listed == want, "%s: /v1/models tool_call_format %s, want %s" %
              (template, listed, want))
        for i, case in cases:
            if fmt_flag == "none":
                st, r = chat(s, body_of(case))
                check(st == 200 and r["choices"][0]["message"]["content"] == case["reply"],
                      "--tool-call-format none: case %d's reply as content" % i)
            else:
                check_case(s, i, case)
    finally:
        rc = s.stop()
        check(rc == 0, "%s: SIGTERM, exit 0 (rc=%s)" % (template, rc))


def main():
    a = ts.parse_args()
    with open(os.path.join(DATA, "conversations.json")) as f:
        cases = list(enumerate(json.load(f)))
    by_template = {}
    for i, c in cases:
        by_template.setdefault(c["template"], []).append((i, c))
    binary = os.path.join(a.bin, "mhla-server")
    model = os.path.join(DATA, "model")
    for template, group in sorted(by_template.items()):
        run_template(binary, model, a.work, template, group)
    hermes = [t for t, g in by_template.items() if g[0][1]["format"] == "hermes"]
    if hermes:
        run_template(binary, model, a.work, hermes[0], by_template[hermes[0]], "none")
    kinds = {c["format"] for _, c in cases if expected_calls(c)}
    check(kinds == {"hermes", "llama3", "mistral"}, "the fixture calls tools in all three formats")
    print("%d tool-call cases" % len(cases))


if __name__ == "__main__":
    ts.run_test(main, "tool-call")
