#!/usr/bin/python3
"""Check the tool-call fixture model with the C engine behind mhla-server: standard library only.

    python3 tests/server/data/toolcall/verify.py [--bin build/bin] [--device cpu]
    python3 tests/server/data/toolcall/verify.py --server http://127.0.0.1:8080 \
        --template Qwen-Qwen2.5-7B-Instruct.jinja    # a server already started with that template

For every case of conversations.json (or those of --template against --server), with a server
started with --model model --chat-template <the case's template>:
 1. POST /apply-template {messages, tools}: the text a chat request renders to; it must equal
    `mhla-tokenize apply-template` of the messages with their tool-call arguments parsed (the
    rendering train/fixture_toolcalls.py trained on);
 2. POST /tokenize with add_special_tokens false (as the chat path encodes the rendered text);
 3. POST /v1/completions with those ids, temperature 0, max_tokens 200, logprobs 2: the text
    must equal the case's reply exactly and finish_reason be "stop" (the model's EOS); the
    smallest margin (chosen token's logprob minus the best other's) is reported;
 4. POST /v1/chat/completions {messages, tools, temperature 0, max_tokens 200}: without tools
    the message content must equal the reply. With tools, a 400 naming 'tools' is reported as
    skipped (a server without tool support); a 200 must carry the case's tool_calls (names and
    arguments, finish_reason "tool_calls") or, for a plain reply, the reply as content.
Exit status 0 when every check passes.
"""
import argparse
import http.client
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))


class Server:
    def __init__(self, url=None, binary=None, model=None, template=None, flags=(), work=None):
        self.proc = None
        if url:
            u = urllib.parse.urlparse(url)
            self.host, self.port = u.hostname, u.port or 80
            return
        self.host, self.port = "127.0.0.1", None
        self.log_path = os.path.join(work, os.path.basename(template) + ".log")
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([binary, "--model", model, "--chat-template", template, "--host", self.host,
                                      "--port", "0"] + list(flags), stdout=subprocess.DEVNULL, stderr=self.log)
        deadline = time.time() + 60
        while time.time() < deadline and self.port is None:
            if self.proc.poll() is not None:
                raise RuntimeError("server exited early: " + open(self.log_path).read())
            for line in open(self.log_path, errors="replace"):
                if '"event":"listening"' in line:
                    self.port = json.loads(line)["port"]
            time.sleep(0.05)
        if self.port is None:
            self.stop()
            raise RuntimeError("server did not start: " + open(self.log_path).read())

    def post(self, path, body):
        c = http.client.HTTPConnection(self.host, self.port, timeout=300)
        c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        c.close()
        try:
            return r.status, json.loads(data)
        except ValueError:
            return r.status, {"raw": data.decode("utf-8", "replace")}

    def stop(self):
        if self.proc:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.log.close()


def template_messages(messages):
    out = json.loads(json.dumps(messages))
    for m in out:
        for tc in m.get("tool_calls") or []:
            fn = tc.get("function") or {}
            if isinstance(fn.get("arguments"), str):
                fn["arguments"] = json.loads(fn["arguments"])
    return out


def cli_render(bin_dir, model, case):
    cfg = json.load(open(os.path.join(model, "tokenizer_config.json")))
    with tempfile.TemporaryDirectory() as t:
        with open(os.path.join(t, "m.json"), "w") as f:
            json.dump(template_messages(case["messages"]), f)
        cmd = [os.path.join(bin_dir, "mhla-tokenize"), "apply-template", "--template",
               os.path.join(HERE, case["template"]), "--messages", os.path.join(t, "m.json"),
               "--add-generation-prompt", "--bos-token", cfg.get("bos_token", ""),
               "--eos-token", cfg.get("eos_token", "")]
        if case.get("tools") is not None:
            with open(os.path.join(t, "t.json"), "w") as f:
                json.dump(case["tools"], f)
            cmd += ["--tools", os.path.join(t, "t.json")]
        return subprocess.run(cmd, check=True, capture_output=True).stdout.decode()


def min_margin(lp):
    best = None
    for chosen, top in zip(lp["token_logprobs"], lp["top_logprobs"]):
        others = sorted(v for v in top.values() if v != chosen) or [float("-inf")]
        # the chosen token's text may equal an alternative's: compare with the best other value
        m = chosen - max(others) if len(top) > 1 else float("inf")
        best = m if best is None else min(best, m)
    return best


def run_case(s, case, bin_dir, model, results):
    name = case.get("name", case["format"])
    fails = []
    body = {"messages": case["messages"]}
    if case.get("tools") is not None:
        body["tools"] = case["tools"]
    st, r = s.post("/apply-template", body)
    if st != 200:
        fails.append("/apply-template %d %s" % (st, r))
        results.append((name, fails, ""))
        return
    prompt = r["prompt"]
    if bin_dir and prompt != cli_render(bin_dir, model, case):
        fails.append("/apply-template differs from mhla-tokenize apply-template")
    st, r = s.post("/tokenize", {"prompt": prompt, "add_special_tokens": False})
    ids = r.get("tokens") if st == 200 else None
    if ids is None:
        fails.append("/tokenize %d %s" % (st, r))
        results.append((name, fails, ""))
        return
    st, r = s.post("/v1/completions", {"prompt": ids, "temperature": 0, "max_tokens": 200, "logprobs": 2})
    note = "prompt %d tokens" % len(ids)
    if st != 200:
        fails.append("/v1/completions %d %s" % (st, r))
    else:
        ch = r["choices"][0]
        if ch["text"] != case["reply"]:
            fails.append("completion text %r != reply %r" % (ch["text"], case["reply"]))
        if ch["finish_reason"] != "stop":
            fails.append("finish_reason %r (not stop)" % ch["finish_reason"])
        note += ", reply %d tokens, min margin %.2f" % (r["usage"]["completion_tokens"], min_margin(ch["logprobs"]))
    chat = dict(body, temperature=0, max_tokens=200)
    st, r = s.post("/v1/chat/completions", chat)
    if st == 400 and "tools" in body and "tools" in json.dumps(r.get("error", {})):
        note += "; chat: tools refused (skipped)"
    elif st != 200:
        fails.append("/v1/chat/completions %d %s" % (st, r))
    else:
        before = len(fails)
        ch = r["choices"][0]
        msg = ch["message"]
        if case.get("tool_calls"):
            got = [{"name": tc["function"]["name"], "arguments": json.loads(tc["function"]["arguments"])}
                   for tc in msg.get("tool_calls") or []]
            if got != case["tool_calls"]:
                fails.append("chat tool_calls %s != %s" % (got, case["tool_calls"]))
            if msg.get("content") not in (None, ""):
                fails.append("chat content %r beside the tool calls" % msg.get("content"))
            if ch["finish_reason"] != "tool_calls":
                fails.append("chat finish_reason %r (not tool_calls)" % ch["finish_reason"])
            note += "; chat: tool_calls ok" if len(fails) == before else ""
        else:
            if msg.get("content") != case["reply"]:
                fails.append("chat content %r != reply %r" % (msg.get("content"), case["reply"]))
            if msg.get("tool_calls"):
                fails.append("chat tool_calls %s on a plain reply" % msg["tool_calls"])
            if ch["finish_reason"] != "stop":
                fails.append("chat finish_reason %r (not stop)" % ch["finish_reason"])
            note += "; chat: content ok" if len(fails) == before else ""
    results.append((name, fails, note))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--model", default=os.path.join(HERE, "model"))
    ap.add_argument("--cases", default=os.path.join(HERE, "conversations.json"))
    ap.add_argument("--server", help="URL of a server already started with --chat-template (needs --template)")
    ap.add_argument("--template", help="only the cases of this template file name")
    ap.add_argument("--device", default="cpu", help="--device of the servers started here (default cpu)")
    ap.add_argument("--server-args", default="", help="more flags for the servers started here")
    a = ap.parse_args()
    if a.server and not a.template:
        sys.exit("--server needs --template (the chat template that server was started with)")
    cases = json.load(open(a.cases))
    templates = []
    for c in cases:
        if c["template"] not in templates and (not a.template or c["template"] == a.template):
            templates.append(c["template"])
    results = []
    bin_dir = a.bin if os.path.exists(os.path.join(a.bin, "mhla-tokenize")) else None
    with tempfile.TemporaryDirectory() as work:
        for tpl in templates:
            flags = ["--device", a.device] + a.server_args.split()
            s = Server(a.server) if a.server else Server(binary=os.path.join(a.bin, "mhla-server"), model=a.model,
                                                         template=os.path.join(HERE, tpl), flags=flags, work=work)
            try:
                for c in cases:
                    if c["template"] == tpl:
                        run_case(s, c, bin_dir, a.model, results)
            finally:
                s.stop()
    bad = 0
    for name, fails, note in results:
        print("%-4s %-20s %s" % ("FAIL" if fails else "ok", name, note))
        for f in fails:
            print("       " + f)
        bad += bool(fails)
    print("%d/%d cases pass" % (len(results) - bad, len(results)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
