#!/usr/bin/python3
"""Integration test: a chat's second turn served from the first turn's state.

A small random checkpoint (byte-level vocabulary, blocks of C = 16 tokens, the
built-in ChatML template) behind mhla-server with a state pool. Turn 1 is a
system and a user message several blocks long; turn 2 is turn 1's messages, the
assistant's reply and a new user message. The prompts' token counts come from the
server itself (POST /apply-template, then POST /tokenize without special tokens,
as a chat request encodes its prompt), C from the model's config.json.

Turn 2's cached prompt tokens are predicted from the token ids alone: the whole
blocks turn 1 left in the prefix cache that turn 2's prompt starts with, or, when
turn 2's prompt extends everything turn 1's sequence was fed (its prompt and all
generated tokens but the last), that whole history (resume). Turn 1's prompt is
padded to one token past a block boundary and generates 4 tokens, so no block is
finished while decoding: the blocks are exactly the whole blocks of turn 1's
prompt. Turn 2 is sent twice: first with the reply edited by the client (its prompt shares
exactly turn 1's prompt: cached must be turn 1's whole blocks), then with the reply as
generated. Checked for each, against the prediction:
- usage.prompt_tokens_details.cached_tokens (and 0 for turn 1);
- /metrics deltas over the request: mhla_prompt_tokens_cached_total, the prefix cache's
  hits (one per block), mhla_prompt_tokens_total (the whole prompt), and
  mhla_engine_step_tokens_total = (prompt_tokens - cached) + (max_tokens - 1): the
  engine computed only the prompt's uncached part;
- turn 2 again, streamed with include_usage: the usage chunk's cached_tokens are
  the whole blocks of turn 2's prompt (at least one token is always computed);
- /v1/completions with turn 1's prompt ids: the usage gives its whole blocks;
- a server with --state-memory 0 (no prefix cache): cached_tokens 0 on turn 2.
No wall-clock assertions. The servers are always killed.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_server as ts  # noqa: E402
from test_server import check  # noqa: E402
from test_chat import chat, chat_stream  # noqa: E402

MAX_TOKENS = 4
BASE = {"max_tokens": MAX_TOKENS, "temperature": 0, "ignore_eos": True, "return_token_ids": True}
SYSTEM = ("You are a patient tutor. Explain each idea from first principles, give one small "
          "example, and end with a question that checks understanding. ")
USER = ("Walk me through how a recurrent state can stand in for attention over a long "
        "context, why blocks of tokens help, and what a prefix cache saves on a second turn. ")


def post(s, path, body):
    st, _, data = s.request("POST", path, body)
    return st, (json.loads(data) if data else None)


def prompt_ids(s, messages):
    """The ids a chat request with these messages encodes, from the server."""
    st, r = post(s, "/apply-template", {"messages": messages})
    assert st == 200, "/apply-template: %d %s" % (st, r)
    st, t = post(s, "/tokenize", {"prompt": r["prompt"], "add_special_tokens": False})
    assert st == 200, "/tokenize: %d %s" % (st, t)
    return t["tokens"]


def lcp(a, b):
    n = 0
    while n < len(a) and n < len(b) and a[n] == b[n]:
        n += 1
    return n


def predicted_cached(prompt, history, C):
    """Prompt tokens the pool serves: a finished sequence's whole history when the
    prompt extends it (resume), else the whole cached blocks the prompt starts with;
    at least one prompt token is always computed."""
    if len(prompt) > len(history) and prompt[:len(history)] == history:
        return len(history)
    return min(lcp(prompt, history), len(prompt) - 1) // C * C


def turn1_messages(s, C):
    """System + user padded so that turn 1's prompt is one token past a block."""
    msgs = [{"role": "system", "content": SYSTEM * 2}, {"role": "user", "content": USER * 2}]
    n = len(prompt_ids(s, msgs))
    msgs[1]["content"] += "." * ((1 - n) % C)  # one byte, one token
    return msgs


def usage_cached(r):
    return ((r or {}).get("usage") or {}).get("prompt_tokens_details", {}).get("cached_tokens")


def delta(m1, m0, name):
    return m1.get(name, 0) - m0.get(name, 0)


def run_turn(s, msgs, p, history, C, what):
    """One chat request whose cached tokens the ids predict; usage and /metrics agree."""
    want = predicted_cached(p, history, C)
    how = "a resume of turn 1's history" if want == len(history) else "whole cached blocks"
    m0 = s.metrics()
    st, r = chat(s, dict(BASE, messages=msgs))
    m1 = s.metrics()
    got = usage_cached(r)
    check(st == 200 and r["usage"]["prompt_tokens"] == len(p) and got == want,
          "%s: usage.prompt_tokens_details.cached_tokens %s == predicted %d (%s)" %
          (what, got, want, how))
    cached = delta(m1, m0, "mhla_prompt_tokens_cached_total")
    check(cached == want, "%s: mhla_prompt_tokens_cached_total +%d == %d" % (what, cached, want))
    hits = delta(m1, m0, "mhla_prefix_cache_hits_total")
    check(hits == min(want, (len(history) - 1) // C * C) // C,
          "%s: mhla_prefix_cache_hits_total +%d, one per cached whole block" % (what, hits))
    seen = delta(m1, m0, "mhla_prompt_tokens_total")
    check(seen == len(p), "%s: mhla_prompt_tokens_total +%d == its prompt %d" %
          (what, seen, len(p)))
    fed = delta(m1, m0, "mhla_engine_step_tokens_total")
    check(fed == len(p) - want + MAX_TOKENS - 1,
          "%s: the engine was fed %d tokens == prompt %d - cached %d + %d decoded" %
          (what, fed, len(p), want, MAX_TOKENS - 1))
    return want


def check_turns(s, C):
    msgs1 = turn1_messages(s, C)
    p1 = prompt_ids(s, msgs1)
    blocks = len(p1) // C * C
    check(len(p1) % C == 1 and len(p1) // C >= 4,
          "turn 1's prompt: %d tokens, %d whole blocks of %d" % (len(p1), len(p1) // C, C))
    st, r1 = chat(s, dict(BASE, messages=msgs1))
    check(st == 200 and usage_cached(r1) == 0 and r1["usage"]["prompt_tokens"] == len(p1),
          "turn 1: a new prompt, nothing cached (%s)" % (r1 or {}).get("usage"))
    reply = r1["choices"][0]["message"]["content"]
    history = p1 + r1["choices"][0]["token_ids"][:-1]  # the last token is never fed
    ask = {"role": "user", "content": "Now summarise that in one sentence."}
    # a client that edited the reply: turn 1's prompt is all that is shared
    edited = msgs1 + [{"role": "assistant", "content": "Edited: " + reply}, ask]
    pe = prompt_ids(s, edited)
    check(lcp(p1, pe) == len(p1), "the edited turn 2 (%d tokens) starts with turn 1's prompt" %
          len(pe))
    got = run_turn(s, edited, pe, history, C, "edited turn 2")
    check(got == blocks > 0, "edited turn 2: cached %d == turn 1's whole blocks %d" %
          (got, blocks))
    # the reply as it was generated: turn 2 may also continue turn 1's last partial block
    msgs2 = msgs1 + [{"role": "assistant", "content": reply}, ask]
    p2 = prompt_ids(s, msgs2)
    got = run_turn(s, msgs2, p2, history, C, "turn 2")
    check(got >= blocks, "turn 2: cached %d covers turn 1's whole blocks %d" % (got, blocks))
    return msgs2, p1, p2


def check_stream_again(s, msgs2, p2, C):
    """Turn 2 again, streamed: its own blocks are cached now."""
    want = (len(p2) - 1) // C * C
    st, ev = chat_stream(s, dict(BASE, messages=msgs2,
                                 stream_options={"include_usage": True}))
    usage = [e for e in (ev or []) if isinstance(e, dict) and e.get("usage")]
    got = usage_cached(usage[-1]) if usage else None
    check(st == 200 and len(usage) == 1 and got == want,
          "turn 2 streamed again: the usage chunk's cached_tokens %s == %d (its whole blocks)" %
          (got, want))


def check_completions(s, p1, C):
    """/v1/completions with turn 1's prompt ids: its whole blocks are cached."""
    want = (len(p1) - 1) // C * C
    st, _, r = s.complete(dict(BASE, prompt=p1))
    got = usage_cached(r)
    check(st == 200 and got == want,
          "/v1/completions, turn 1's ids: usage cached_tokens %s == %d" % (got, want))


def check_no_cache(binary, model, work, msgs2):
    """Without a state pool nothing is cached: the checks above would fail."""
    s = ts.Server(binary, model, work, "turns_nocache", "--threads", "2", "--state-memory", "0")
    try:
        st, _ = chat(s, dict(BASE, messages=msgs2[:2]))
        st2, r2 = chat(s, dict(BASE, messages=msgs2))
        check(st == 200 and st2 == 200 and usage_cached(r2) == 0,
              "--state-memory 0: turn 2's cached_tokens is 0 (%s)" % usage_cached(r2))
    finally:
        rc = s.stop()
        check(rc == 0, "SIGTERM: the server without a cache exits 0 (rc=%s)" % rc)


def main():
    a = ts.parse_args()
    model = os.path.join(a.work, "model")
    ts.gen_checkpoint.main(["--out", model, "--vocab", "256", "--hidden", "64", "--layers", "2",
                            "--heads", "4", "--chunk", "16", "--blocks", "64", "--seed", "1"])
    with open(os.path.join(model, "config.json")) as f:
        C = json.load(f)["mhla_chunk_size"]
    binary = os.path.join(a.bin, "mhla-server")
    s = ts.Server(binary, model, a.work, "turns", "--threads", "2", "--max-batch-tokens", "48",
                  "--state-memory", "8")
    try:
        msgs2, p1, p2 = check_turns(s, C)
        check_stream_again(s, msgs2, p2, C)
        check_completions(s, p1, C)
    finally:
        rc = s.stop()
        check(rc == 0, "SIGTERM: the server exits 0 (rc=%s)" % rc)
    check_no_cache(binary, model, a.work, msgs2)


if __name__ == "__main__":
    ts.run_test(main, "chat-turn")
