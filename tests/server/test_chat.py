#!/usr/bin/python3
"""Integration test of POST /v1/chat/completions (docs/api.md): standard library.

A small random checkpoint (byte-level vocabulary, no chat_template: the built-in
ChatML template) behind mhla-server with a state pool: a chat request's greedy
tokens equal /v1/completions given the ChatML-rendered prompt, streaming equals
non-streaming (role delta first, content deltas, a finish chunk, the usage chunk,
[DONE]), n=2, logprobs in the chat shape, max_completion_tokens, the prefix cache
serving turn 2 of a conversation from turn 1's blocks, tools rendered by the
built-in template (Hermes style) and a reply without calls as content, the
refusals (tool_choice that forces a call, malformed tools, response_format,
echo, image parts, missing messages). A second server with
--chat-template FILE: chat_template_kwargs, bos_token/eos_token from
tokenizer_config.json and a template's raise_exception as a 400; a template that
does not compile stops the server at start. A trained tokenizer.json whose
post-processor adds a BOS: the rendered prompt is encoded without it. The servers are
always killed.
"""
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_server as ts  # noqa: E402
from test_server import check  # noqa: E402

CHAT = "/v1/chat/completions"


def chatml(messages):
    text = "".join("<|im_start|>%s\n%s<|im_end|>\n" % (m["role"], m["content"])
                   for m in messages)
    return text + "<|im_start|>assistant\n"


def chat(s, body):
    st, _, data = s.request("POST", CHAT, body)
    return st, (json.loads(data) if data else None)


def chat_stream(s, body):
    st, _, data = s.request("POST", CHAT, dict(body, stream=True))
    if st != 200:
        return st, None
    events = data.decode("utf-8").split("\n\n")
    assert events[-1] == "", "stream does not end with a blank line"
    out = []
    for ev in events[:-1]:
        assert ev.startswith("data: "), "bad event %r" % ev[:80]
        out.append(ev[6:] if ev[6:] == "[DONE]" else json.loads(ev[6:]))
    return st, out


def err(s, status, body, what, param=None, method="POST"):
    st, _, data = s.request(method, CHAT, body)
    try:
        e = json.loads(data)["error"]
    except Exception:
        e = {}
    ok = st == status and set(e) == {"message", "type", "param", "code"}
    if param is not None:
        ok = ok and e.get("param") == param
    check(ok, "%s -> %d %s" % (what, status, json.dumps(e)[:160]))
    return e


def check_greedy(s):
    msgs = [{"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Name three colours."}]
    base = {"max_tokens": 12, "temperature": 0, "ignore_eos": True, "return_token_ids": True}
    st, r = chat(s, dict(base, messages=msgs))
    prompt = chatml(msgs)
    st2, _, c = s.complete(dict(base, prompt=prompt))
    ok = st == 200 and st2 == 200
    check(ok and r["object"] == "chat.completion" and r["id"].startswith("chatcmpl-") and
          r["choices"][0]["message"]["role"] == "assistant" and
          r["choices"][0]["finish_reason"] == "length" and r["choices"][0]["logprobs"] is None,
          "chat.completion shape: id, object, message, finish_reason, logprobs null")
    check(ok and r["choices"][0]["token_ids"] == c["choices"][0]["token_ids"] and
          r["choices"][0]["message"]["content"] == c["choices"][0]["text"],
          "greedy chat equals /v1/completions with the ChatML-rendered prompt")
    u = dict((r or {}).get("usage") or {})
    u.pop("prompt_tokens_details", None)  # the prefix cache's share: test_chat_turns.py
    check(ok and u == {"prompt_tokens": len(prompt.encode()), "completion_tokens": 12,
                       "total_tokens": len(prompt.encode()) + 12},
          "usage counts the rendered prompt (no special tokens added): %s" %
          (r or {}).get("usage"))
    return msgs, base, r


def check_stream(s, msgs, base, full):
    st, ev = chat_stream(s, dict(base, messages=msgs, stream_options={"include_usage": True}))
    ok = st == 200 and ev[-1] == "[DONE]"
    check(ok, "stream ends with [DONE]")
    if not ok:
        return
    chunks = ev[:-1]
    check(all(c["object"] == "chat.completion.chunk" and c["id"] == chunks[0]["id"]
              for c in chunks), "every chunk is a chat.completion.chunk of one id")
    check(chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""},
          "the first chunk is the role delta")
    body = [c for c in chunks[1:] if c["choices"]]
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in body)
    ids = sum((c["choices"][0].get("token_ids", []) for c in body), [])
    check(text == full["choices"][0]["message"]["content"] and
          ids == full["choices"][0]["token_ids"],
          "streamed content deltas concatenated equal the non-streamed message")
    last = body[-1]["choices"][0]
    check(last["delta"] == {} and last["finish_reason"] == "length" and
          all(c["choices"][0]["finish_reason"] is None for c in body[:-1]),
          "a final chunk with an empty delta carries finish_reason")
    check(chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 12,
          "include_usage: a usage chunk with no choices before [DONE]")


def check_n_logprobs(s):
    st, r = chat(s, {"messages": [{"role": "user", "content": "hi"}], "n": 2,
                     "max_tokens": 5, "seed": 7, "temperature": 1.0})
    check(st == 200 and [c["index"] for c in r["choices"]] == [0, 1],
          "n=2 gives two choices")
    st, r = chat(s, {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4,
                     "logprobs": True, "top_logprobs": 2, "ignore_eos": True})
    content = r["choices"][0]["logprobs"]["content"] if st == 200 else []
    check(len(content) == 4 and all(
        set(t) == {"token", "logprob", "bytes", "top_logprobs"} and t["logprob"] <= 0 and
        len(t["top_logprobs"]) == 2 and set(t["top_logprobs"][0]) == {"token", "logprob", "bytes"}
        and bytes(t["bytes"]).decode("utf-8", "replace") == t["token"] for t in content),
        "logprobs: content entries with token, logprob, bytes and 2 top_logprobs")
    st, r = chat(s, {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3,
                     "logprobs": True, "ignore_eos": True})
    check(st == 200 and all(t["top_logprobs"] == [] for t in r["choices"][0]["logprobs"]
                            ["content"]), "logprobs: true alone gives empty top_logprobs")
    st, r = chat(s, {"messages": [{"role": "user", "content": "hi"}],
                     "max_completion_tokens": 3, "ignore_eos": True})
    check(st == 200 and r["usage"]["completion_tokens"] == 3,
          "max_completion_tokens limits the completion")


def check_prefix_cache(s):
    u1 = {"role": "user", "content": "Tell me about the long history of linear attention " * 3}
    base = {"max_tokens": 8, "temperature": 0, "ignore_eos": True}
    st, r1 = chat(s, dict(base, messages=[u1]))
    m0 = s.metrics()
    turn2 = [u1, {"role": "assistant", "content": r1["choices"][0]["message"]["content"]},
             {"role": "user", "content": "And then?"}]
    st2, r2 = chat(s, dict(base, messages=turn2))
    m1 = s.metrics()
    hits = m1["mhla_prefix_cache_hits_total"] - m0["mhla_prefix_cache_hits_total"]
    blocks = len(chatml([u1]).encode()) // 16
    check(st == 200 and st2 == 200 and hits >= blocks - 1,
          "turn 2 reuses turn 1's cached blocks (%d hits, turn 1 holds %d blocks)" %
          (hits, blocks))
    check(m1.get("mhla_chat_requests_total", 0) >= 2, "/metrics counts chat requests")


def check_errors(s):
    hi = [{"role": "user", "content": "hi"}]
    err(s, 400, {"max_tokens": 3}, "missing messages", param="messages")
    err(s, 400, {"messages": [{"role": "user", "content": [{"type": "image_url",
                                                           "image_url": {"url": "x"}}]}]},
        "an image part", param="messages[0].content[0].type")
    tools = [{"type": "function", "function": {"name": "f"}}]
    err(s, 400, {"messages": hi, "tools": tools,
                 "tool_choice": {"type": "function", "function": {"name": "g"}}},
        "a named tool_choice of no such tool", param="tool_choice.function.name")
    err(s, 400, {"messages": hi, "tools": tools, "tool_choice": "required",
                 "response_format": {"type": "json_object"}},
        "a forced call and a response_format", param="response_format")
    err(s, 400, {"messages": hi, "tool_choice": "auto"}, "tool_choice without tools",
        param="tool_choice")
    err(s, 400, {"messages": hi, "tools": [{"type": "function", "function": {"name": "a b"}}]},
        "a function name with a space", param="tools[0].function.name")
    err(s, 400, {"messages": hi, "tools": [{"type": "retrieval"}]}, "a tool that is no function",
        param="tools[0].type")
    err(s, 400, {"messages": hi, "tools": {"name": "f"}}, "tools not an array", param="tools")
    err(s, 400, {"messages": hi, "tools": tools, "parallel_tool_calls": "yes"},
        "parallel_tool_calls not a boolean", param="parallel_tool_calls")
    err(s, 400, {"messages": hi, "functions": [{"name": "f"}]}, "the deprecated functions",
        param="functions")
    err(s, 400, {"messages": hi, "response_format": {"type": "yaml"}},
        "response_format of an unknown type", param="response_format.type")
    err(s, 400, {"messages": hi, "echo": True}, "echo is not a chat field", param="echo")
    err(s, 400, {"messages": hi, "prompt": "x"}, "prompt on chat", param="prompt")
    err(s, 400, {"messages": hi, "top_logprobs": 2}, "top_logprobs without logprobs",
        param="top_logprobs")
    err(s, 400, {"messages": hi, "logprobs": 2}, "logprobs as a number", param="logprobs")
    err(s, 400, {"messages": hi, "max_tokens": 3, "max_completion_tokens": 4},
        "max_tokens and max_completion_tokens differ", param="max_completion_tokens")
    err(s, 400, {"messages": hi, "chat_template_kwargs": [1]}, "chat_template_kwargs a list",
        param="chat_template_kwargs")
    err(s, 405, None, "GET on the chat endpoint", method="GET")
    st, r = chat(s, {"messages": hi, "max_tokens": 2, "response_format": {"type": "text"}})
    check(st == 200, "response_format text is the default and accepted")
    st, _, data = s.request("POST", "/v1/completions", {"messages": hi})
    check(st == 400 and json.loads(data)["error"]["param"] == "messages",
          "/v1/completions still refuses messages")


TEMPLATE = ("{%- for m in messages -%}"
            "{%- if m['role'] == 'system' -%}{{- raise_exception('no system role') -}}{%- endif -%}"
            "{{- bos_token + '[' + m['role'] + '] ' + m['content'] + eos_token -}}"
            "{%- endfor -%}"
            "{%- if greeting is defined -%}{{- greeting -}}{%- endif -%}"
            "{%- if add_generation_prompt -%}{{- '[assistant] ' -}}{%- endif -%}")


def run_template(binary, model, work):
    own = os.path.join(work, "model_tc")
    shutil.copytree(model, own)
    with open(os.path.join(own, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": "<s>", "eos_token": {"content": "</s>"}}, f)
    path = os.path.join(work, "template.jinja")
    with open(path, "w") as f:
        f.write(TEMPLATE)
    s = ts.Server(binary, own, work, "chat_tpl", "--threads", "2", "--chat-template", path)
    try:
        hi = [{"role": "user", "content": "hi"}]
        st, r = chat(s, {"messages": hi, "max_tokens": 1})
        want = len("<s>[user] hi</s>[assistant] ")
        check(st == 200 and r["usage"]["prompt_tokens"] == want,
              "--chat-template FILE with bos_token and eos_token from tokenizer_config.json "
              "(%s tokens, want %d)" % ((r or {}).get("usage"), want))
        st, r = chat(s, {"messages": hi, "max_tokens": 1,
                         "chat_template_kwargs": {"greeting": "XYZ",
                                                  "add_generation_prompt": False}})
        check(st == 200 and r["usage"]["prompt_tokens"] == want + 3 - len("[assistant] "),
              "chat_template_kwargs become template variables")
        e = err(s, 400, {"messages": [{"role": "system", "content": "x"}] + hi},
                "a template's raise_exception", param="messages")
        check("no system role" in e.get("message", ""), "the 400 carries the template's message")
    finally:
        s.stop()
    bad = os.path.join(work, "bad.jinja")
    with open(bad, "w") as f:
        f.write("{% for m in %}")
    try:
        ts.Server(binary, model, work, "chat_bad", "--chat-template", bad).stop()
        check(False, "a template that does not compile stops the server at start")
    except RuntimeError as e:
        check("does not compile" in str(e) and bad in str(e),
              "a template that does not compile stops the server at start, naming it")


def run_tokenizer(bin_dir, binary, work):
    """A trained tokenizer whose post-processor adds a BOS: chat encodes without it."""
    tok = os.path.join(work, "chat_tokenizer.json")
    r = subprocess.run([os.path.join(bin_dir, "mhla-tokenize"), "train", "--vocab-size", "700",
                        "--out", tok, os.path.join(HERE, "data", "tokenizer_corpus.md")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    tj = json.load(open(tok))
    vocab = max(tj["model"]["vocab"].values()) + 1
    tj["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}},
                   {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [0],
                                              "tokens": ["<|endoftext|>"]}}}
    model = os.path.join(work, "model_tok")
    ts.gen_checkpoint.main(["--out", model, "--vocab", str(vocab), "--hidden", "64", "--layers",
                            "2", "--heads", "4", "--chunk", "16", "--blocks", "32", "--seed", "3"])
    json.dump(tj, open(os.path.join(model, "tokenizer.json"), "w"))
    s = ts.Server(binary, model, work, "chat_tok", "--threads", "2")
    try:
        msgs = [{"role": "user", "content": "The server streams tokens \u2014 caf\u00e9"}]
        text = chatml(msgs)
        ids = {}
        for special in (True, False):
            st, _, d = s.request("POST", "/tokenize", {"prompt": text,
                                                       "add_special_tokens": special})
            ids[special] = json.loads(d)["tokens"] if st == 200 else None
        base = {"max_tokens": 8, "temperature": 0, "ignore_eos": True, "return_token_ids": True}
        st, r = chat(s, dict(base, messages=msgs))
        st2, _, c = s.complete(dict(base, prompt=ids[False]))
        check(st == 200 and st2 == 200 and ids[True] == [0] + ids[False] and
              r["usage"]["prompt_tokens"] == len(ids[False]) and
              r["choices"][0]["token_ids"] == c["choices"][0]["token_ids"],
              "tokenizer.json: the rendered prompt is encoded without the post-processor's "
              "BOS, and greedy chat equals /v1/completions on those ids")
    finally:
        s.stop()


TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]


def chatml_tools(messages, tools):
    """The built-in template with tools: the Hermes convention of Qwen 2.5."""
    head = "<|im_start|>system\n"
    if messages[0]["role"] == "system":
        head += messages[0]["content"] + "\n\n"
    head += ("# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
             "You are provided with function signatures within <tools></tools> XML tags:\n<tools>")
    for t in tools:
        head += "\n" + json.dumps(t, ensure_ascii=False)
    head += ("\n</tools>\n\nFor each function call, return a json object with function name and "
             "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
             "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n"
             "</tool_call><|im_end|>\n")
    for i, m in enumerate(messages):
        if m["role"] == "system" and i == 0:
            continue
        if m.get("tool_calls"):
            head += "<|im_start|>assistant" + ("\n" + m["content"] if m.get("content") else "")
            for c in m["tool_calls"]:
                args = json.dumps(json.loads(c["function"]["arguments"]), ensure_ascii=False)
                head += ('\n<tool_call>\n{"name": "%s", "arguments": %s}\n</tool_call>' %
                         (c["function"]["name"], args))
            head += "<|im_end|>\n"
        elif m["role"] == "tool":
            head += ("<|im_start|>user\n<tool_response>\n" + m["content"] +
                     "\n</tool_response><|im_end|>\n")
        else:
            head += "<|im_start|>%s\n%s<|im_end|>\n" % (m["role"], m["content"])
    return head + "<|im_start|>assistant\n"


def check_tools(s):
    """Tools reach the template (the built-in one lists them, Hermes style);
    a reply without a call is plain content."""
    msgs = [{"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 22 C"}]
    st, _, data = s.request("POST", "/apply-template", {"messages": msgs, "tools": TOOLS})
    want = chatml_tools(msgs, TOOLS)
    got = json.loads(data).get("prompt") if st == 200 else data
    check(st == 200 and got == want, "the built-in template renders tools and a tool round trip:\n"
          "%r\n  want %r" % (got, want))
    st, _, data = s.request("POST", "/apply-template", {"messages": msgs[:2], "tools": []})
    check(st == 200 and json.loads(data)["prompt"] == chatml(msgs[:2]),
          "an empty tools list renders as no tools")
    # the model holds 512 positions: a short tool and one user turn fit
    tools = [{"type": "function", "function": {"name": "f"}}]
    msgs = [{"role": "user", "content": "Hi"}]
    want = chatml_tools(msgs, tools)
    body = {"messages": msgs, "tools": tools, "max_tokens": 4, "temperature": 0,
            "ignore_eos": True}
    st, r = chat(s, body)
    st2, r2 = chat(s, dict(body, tool_choice="none"))
    m = r["choices"][0]["message"] if st == 200 else {}
    check(st == 200 and "tool_calls" not in m and r["choices"][0]["finish_reason"] == "length" and
          r["usage"]["prompt_tokens"] == len(want.encode()),
          "a chat request with tools: the prompt lists them; a reply without calls is content")
    check(st2 == 200 and r2["choices"][0]["message"]["content"] == m.get("content"),
          "tool_choice none: the same prompt, the reply not parsed")


def check_apply_template(s):
    """POST /apply-template gives the text a chat request encodes."""
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi \u00e9"}]
    st, _, data = s.request("POST", "/apply-template", {"messages": msgs})
    check(st == 200 and json.loads(data) == {"prompt": chatml(msgs)},
          "/apply-template renders the messages as a chat request would")
    st, _, data = s.request("POST", "/apply-template",
                            {"messages": msgs, "add_generation_prompt": False})
    check(st == 200 and json.loads(data)["prompt"] == chatml(msgs)[:-len("<|im_start|>assistant\n")],
          "/apply-template without the generation prompt")
    st, _, data = s.request("POST", "/apply-template", {"messages": [], "tools": 3})
    check(st == 400 and json.loads(data)["error"]["param"] == "tools",
          "/apply-template refuses a malformed field, naming it")
    st, _, _ = s.request("GET", "/apply-template", None)
    check(st == 405, "GET /apply-template is 405")


def main():
    a = ts.parse_args()
    model = os.path.join(a.work, "model")
    ts.gen_checkpoint.main(["--out", model, "--vocab", "256", "--hidden", "64", "--layers", "2",
                            "--heads", "4", "--chunk", "16", "--blocks", "32", "--seed", "1"])
    binary = os.path.join(a.bin, "mhla-server")
    s = ts.Server(binary, model, a.work, "chat", "--threads", "2", "--max-batch-tokens", "48",
                  "--state-memory", "4")
    try:
        msgs, base, full = check_greedy(s)
        check_stream(s, msgs, base, full)
        check_n_logprobs(s)
        check_prefix_cache(s)
        check_errors(s)
        check_apply_template(s)
        check_tools(s)
    finally:
        rc = s.stop()
        check(rc == 0, "SIGTERM: the chat server exits 0 (rc=%s)" % rc)
    run_template(binary, model, a.work)
    run_tokenizer(a.bin, binary, a.work)


if __name__ == "__main__":
    ts.run_test(main, "chat")
