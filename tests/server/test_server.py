#!/usr/bin/python3
"""Integration test of mhla-server (docs/api.md): standard library and numpy.

Generates a small random checkpoint (byte-level vocabulary of 256 ids), starts
build/bin/mhla-server on a free 127.0.0.1 port and checks completions against
mhla-generate, streaming against non-streaming, batching against running alone,
stop strings, error handling, cancellation, metrics, auth, 429 and SIGTERM.
Then a tokenizer trained with mhla-tokenize on a fixed text (data/), with a model of its
vocabulary: text prompts, eos ids from generation_config.json, multi-byte
characters in streams and stop strings, and logprobs against the log-softmax of
mhla-generate's logits. A 300-id model without tokenizer.json refuses text with
the cause and serves token ids. The servers are always killed at the end.
"""
import argparse
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
import gen_checkpoint  # noqa: E402
import pace  # noqa: E402
import server_metrics  # noqa: E402

FAILURES = []
PROCS = []


def check(cond, what):
    if cond:
        print("ok   " + what)
    else:
        print("FAIL " + what)
        FAILURES.append(what)
    return cond


EXTRA_FLAGS = []  # --server-args: e.g. --device cuda, for the CUDA backend's run of this test
TIME_SCALE = [1.0]  # --time-scale: waits grow by this factor (a slow simulated device)
# Every wait is sized by the pace of its model on this machine, measured before each
# server starts: mhla-generate's seconds per token (model load included), x tokens x a
# factor (tests/tools/pace.py). The floors are the limits the test had on an idle machine.
PACE = pace.Pace()
CALIB_TOKENS = 48


def parse_args(ap=None):
    """A test's --bin and --work (with what ap already holds), the work
    directory emptied, and a.binary the server in --bin."""
    ap = ap or argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    a.binary = os.path.join(a.bin, "mhla-server")
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    return a


def run_test(main, what):
    """Runs a test's main() and exits: a crash of the test itself is a failure
    too, every server it started is killed whatever happens, and the failures
    are listed (else "all <what> checks passed"). main() may return 77 (ctest's
    skip) or 1; its other results count as 0."""
    status = 0
    try:
        status = main()
    except Exception as e:
        traceback.print_exc()
        FAILURES.append("exception: %r" % e)
    finally:
        for p in PROCS:
            if p.poll() is None:
                p.kill()
                p.wait()
    if FAILURES or status == 1:
        print("%d FAILED:\n  %s" % (len(FAILURES), "\n  ".join(FAILURES)))
        sys.exit(1)
    if status == 77:
        sys.exit(77)
    print("all %s checks passed" % what)
    sys.exit(0)


def calibrate(bin_dir, model):
    if model not in PACE.per_unit:
        PACE.measure(model, CALIB_TOKENS,
                     lambda: generate_ids(bin_dir, model, [1, 2, 3], CALIB_TOKENS))


def body_tokens(body):
    """Tokens a completion body asks for: prompt + max_tokens x n, per prompt."""
    if not isinstance(body, dict):
        return 16
    pr = body.get("prompt", "")
    prompts = pr if isinstance(pr, list) and pr and isinstance(pr[0], (list, str)) else [pr]
    n = body.get("n", 1) if isinstance(body.get("n", 1), int) else 1
    mt = body.get("max_tokens", 16) if isinstance(body.get("max_tokens", 16), int) else 16
    plen = sum(len(p) if isinstance(p, (list, str)) else 1 for p in prompts)
    return plen + len(prompts) * max(n, 1) * max(min(mt, 4096), 16)


class Server:
    def __init__(self, binary, model, work, name, *flags):
        calibrate(os.path.dirname(binary), model)
        self.log_path = os.path.join(work, name + ".log")
        self.log = open(self.log_path, "wb")
        # the CPU unless --server-args names a device: results are compared with
        # mhla-generate, which runs on the CPU
        device = [] if "--device" in EXTRA_FLAGS else ["--device", "cpu"]
        self.proc = subprocess.Popen([binary, "--model", model, "--host", "127.0.0.1",
                                      "--port", "0"] + device + list(flags) + EXTRA_FLAGS,
                                     stdout=subprocess.DEVNULL, stderr=self.log)
        PROCS.append(self.proc)
        self.port = None
        self.model = model
        # starting loads the model, as the calibration run did
        deadline = time.time() + PACE.limit(model, CALIB_TOKENS, 20)
        while time.time() < deadline and self.port is None:
            if self.proc.poll() is not None:
                raise RuntimeError("server exited early: " + open(self.log_path).read())
            for line in open(self.log_path, errors="replace"):
                if '"event":"listening"' in line:
                    self.port = json.loads(line)["port"]
            time.sleep(0.05)
        if self.port is None:
            raise RuntimeError("server did not start: " + open(self.log_path).read())

    def request(self, method, path, body=None, headers=None, timeout=None):
        if timeout is None:  # the tokens the request asks for, at this model's pace
            timeout = PACE.limit(self.model, body_tokens(body), 30)
        else:
            timeout *= TIME_SCALE[0]
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        if body is not None and not isinstance(body, (bytes, str)):
            body = json.dumps(body)
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, dict(r.getheaders()), data

    def complete(self, body, headers=None):
        st, h, data = self.request("POST", "/v1/completions", body, headers)
        return st, h, (json.loads(data) if data else None)

    def stream(self, body, headers=None):
        """Returns (status, list of chunk objects, raw body)."""
        body = dict(body, stream=True)
        st, h, data = self.request("POST", "/v1/completions", body, headers)
        if st != 200:
            return st, None, data
        chunks = []
        raw = data.decode("utf-8")
        events = raw.split("\n\n")
        assert events[-1] == "", "stream does not end with a blank line"
        for ev in events[:-1]:
            assert ev.startswith("data: "), "bad event %r" % ev[:80]
            payload = ev[6:]
            chunks.append(payload if payload == "[DONE]" else json.loads(payload))
        return st, chunks, data

    def metrics(self):
        st, _, data = self.request("GET", "/metrics")
        assert st == 200
        return server_metrics.parse(data.decode())

    def stop(self, timeout=None):
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout or PACE.limit(self.model, CALIB_TOKENS, 15))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = None
        self.log.close()
        return rc


def stream_text(chunks):
    text, ids, finish = "", [], None
    for c in chunks:
        if c == "[DONE]":
            continue
        for ch in c["choices"]:
            text += ch["text"]
            ids += ch.get("token_ids", [])
            if ch["finish_reason"]:
                finish = ch["finish_reason"]
    return text, ids, finish


def utf8_ok(s):
    try:
        s.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def generate_ids(bin_dir, model, prompt, n):
    out = subprocess.run([os.path.join(bin_dir, "mhla-generate"), "--model", model,
                          "--prompt-ids", ",".join(map(str, prompt)), "--max-tokens", str(n),
                          "--print-ids", "--ignore-eos"], capture_output=True, text=True,
                         timeout=PACE.limit(model, len(prompt) + n, 60))
    assert out.returncode == 0, out.stderr
    return [int(x) for x in out.stdout.split()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--server", default="mhla-server", help="which server binary in --bin")
    ap.add_argument("--server-args", default="", help="extra flags for every server started")
    ap.add_argument("--parts", default="main,pool,bytevocab,small,tokenizer",
                    help="comma-separated parts to run")
    ap.add_argument("--time-scale", type=float, default=1.0, help="multiply the waits by this")
    a = ap.parse_args()
    TIME_SCALE[0] = a.time_scale
    PACE.scale = a.time_scale
    EXTRA_FLAGS.extend(a.server_args.split())
    parts = a.parts.split(",")
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    model = os.path.join(a.work, "model")
    gen_checkpoint.main(["--out", model, "--vocab", "256", "--hidden", "64", "--layers", "2",
                         "--heads", "4", "--chunk", "16", "--blocks", "32", "--seed", "1"])
    binary = os.path.join(a.bin, a.server)
    t0 = time.time()
    if EXTRA_FLAGS:  # a device the machine may not have: skip (exit 77) when it refuses to start
        try:
            Server(binary, model, a.work, "probe").stop()
        except RuntimeError as e:
            if "device cuda:" in str(e):
                print("SKIP: %s" % str(e).strip().splitlines()[-1])
                return 77
            raise
    if "main" in parts:
        s = Server(binary, model, a.work, "main", "--threads", "2", "--max-batch-tokens", "48",
                   "--max-body-bytes", "65536", "--timeout", "2", "--model-name", "demo")
        try:
            run_main(s, a, model)
        finally:
            rc = s.stop()
            check(rc == 0, "SIGTERM: main server exits 0 (rc=%s)" % rc)
    # the engine's state pool: prefix cache, admission by pages
    if "pool" in parts:
        s3 = Server(binary, model, a.work, "pool", "--threads", "2", "--max-batch-tokens", "48",
                    "--state-memory", "1")
        try:
            run_pool(s3, a, model)
        finally:
            rc = s3.stop()
            check(rc == 0, "SIGTERM: pool server exits 0 (rc=%s)" % rc)
    if "bytevocab" in parts:
        run_byte_vocab(a, binary)
    if "small" not in parts:
        print("elapsed %.1f s" % (time.time() - t0))
        return 0
    # a slower model for the checks that need requests to stay busy for a while
    big = os.path.join(a.work, "big")
    gen_checkpoint.main(["--out", big, "--vocab", "256", "--hidden", "512", "--layers", "4",
                         "--heads", "4", "--chunk", "16", "--blocks", "32", "--seed", "2"])
    # the drain at SIGTERM must leave time for a 480-token stream to finish
    calibrate(a.bin, big)
    drain_s = PACE.limit(big, body_tokens({"prompt": "drain", "max_tokens": 480}), 20)
    s2 = Server(binary, big, a.work, "small", "--threads", "1", "--max-running", "2",
                "--max-queue", "1", "--api-key", "sekrit", "--model-name", "demo",
                "--shutdown-timeout", "%d" % (drain_s + 1))
    try:
        run_small(s2)
    finally:
        if s2.proc.poll() is None:
            s2.proc.kill()
        s2.log.close()
    # a real tokenizer (trained on the repo's READMEs) with a model of its vocabulary
    if "tokenizer" in parts:
        run_tokenizer(a, binary)
    print("elapsed %.1f s" % (time.time() - t0))


def logits_of(bin_dir, model, ids, work):
    """Logits of every position of ids, from mhla-generate, as [n, V] float32."""
    out = os.path.join(work, "logits.f32")
    r = subprocess.run([os.path.join(bin_dir, "mhla-generate"), "--model", model, "--prompt-ids",
                        ",".join(map(str, ids)), "--max-tokens", "0", "--logits-out", out],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    x = np.fromfile(out, dtype="<f4")
    return x.reshape(len(ids), -1).astype(np.float64)


def log_softmax(x):
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def run_pool(s, a, model):
    m0 = s.metrics()
    check(m0['mhla_state_pages{kind="total"}'] > 0, "the state pool's pages are in /metrics")
    prompt = [(i * 31 + 7) % 256 for i in range(90)]
    want = generate_ids(a.bin, model, prompt, 12)
    outs = []
    for _ in range(2):
        st, _, r = s.complete({"prompt": prompt, "max_tokens": 12, "temperature": 0,
                               "ignore_eos": True, "return_token_ids": True})
        outs.append(r["choices"][0]["token_ids"] if st == 200 else None)
    m1 = s.metrics()
    check(outs == [want, want], "pool: greedy ids equal mhla-generate, cold and from the cache")
    # the CPU's threads (a GPU engine has none to show)
    check(bool(EXTRA_FLAGS) or m1["mhla_cpu_threads"] == 2 and
          1 <= m1["mhla_cpu_threads_active"] <= 2 and
          m1["mhla_cpu_thread_reductions_total"] >= 0,
          "/metrics: CPU threads taking part / in all / reductions: %s" %
          [m1.get(k) for k in ("mhla_cpu_threads_active", "mhla_cpu_threads",
                               "mhla_cpu_thread_reductions_total")])
    check(m1["mhla_prefix_cache_hits_total"] >= 5 and
          m1["mhla_prompt_tokens_cached_total"] >= 80,
          "pool: the repeated prompt is served by the prefix cache (%d blocks)" %
          m1["mhla_prefix_cache_hits_total"])
    req = {"prompt": prompt[:70] + [1, 2, 3], "max_tokens": 20, "n": 3, "seed": 9,
           "temperature": 1.0, "top_p": 0.9, "ignore_eos": True, "return_token_ids": True}
    r1 = s.complete(req)[2]
    r2 = s.complete(req)[2]
    check([c["token_ids"] for c in r1["choices"]] == [c["token_ids"] for c in r2["choices"]],
          "pool: seeded n=3 sampling gives the same tokens cold and from the cache")
    # admission by pages: 7 x 500 positions hold most of the pool, 2 more must wait
    big = {"prompt": prompt[:20], "max_tokens": 480, "n": 7, "ignore_eos": True, "seed": 1}
    small = {"prompt": prompt[:20], "max_tokens": 480, "n": 2, "ignore_eos": True, "seed": 2,
             "return_token_ids": True}
    # The two overlap only if b arrives while a still runs; on a fast machine a can end
    # first, and then b rightly does not wait. Such a round proves nothing, so it is run
    # again, up to 5 times; were b admitted next to a, no round would ever see it wait.
    for attempt in range(5):
        res = {}
        ta = threading.Thread(target=lambda: res.update(a=s.complete(big)[0]))
        ta.start()
        wait_metrics(s, lambda m: m["mhla_requests_running"] == 1, 10)
        tb = threading.Thread(target=lambda: res.update(b=s.complete(small)))
        tb.start()
        waited = wait_metrics(s, lambda m: m["mhla_requests_waiting"] == 1 and
                              m["mhla_requests_running"] == 1, 10)
        # b starts when a ends: both run one after the other
        ta.join(PACE.limit(s.model, body_tokens(big) + body_tokens(small), 60))
        tb.join(PACE.limit(s.model, body_tokens(small), 60))
        if waited:
            break
        print("note: round %d: the second request did not wait (the first may have ended "
              "before it arrived); again" % (attempt + 1))
    check(waited and res.get("a") == 200 and res.get("b", [0])[0] == 200,
          "pool: a request whose pages do not fit waits, then runs (waited %s, statuses %s %s)"
          % (waited, res.get("a"), res.get("b", [None])[0]))
    alone = s.complete(small)[2]
    check(res.get("b") and [c["token_ids"] for c in res["b"][2]["choices"]] ==
          [c["token_ids"] for c in alone["choices"]], "pool: the waiting request equals it alone")
    st, h, body = s.request("POST", "/v1/completions", {"prompt": "x", "max_tokens": 400,
                                                        "n": 64})
    check(st == 503 and h.get("Retry-After") and
          json.loads(body)["error"]["code"] == "state_memory_full",
          "pool: a request that can never fit -> 503 state_memory_full")
    check(wait_metrics(s, lambda m: m['mhla_state_pages{kind="used"}'] == 0 and
                       m['mhla_state_pages{kind="reserved"}'] == 0, 5),
          "pool: every page and reservation is released at the end")


def run_tokenizer(a, binary):
    work = os.path.join(a.work, "tok")
    os.makedirs(work)
    tok = os.path.join(work, "tokenizer.json")
    # a fixed text (the READMEs of one day), so that editing the docs does not change the
    # tokenizer and with it the greedy ids the checks below are built on
    texts = [os.path.join(HERE, "data", "tokenizer_corpus.md")]
    r = subprocess.run([os.path.join(a.bin, "mhla-tokenize"), "train", "--vocab-size", "700",
                        "--out", tok] + texts, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    tj = json.load(open(tok))
    vocab = max(tj["model"]["vocab"].values()) + 1
    # the post-processor adds <|endoftext|> (id 0) in front, as a BOS
    tj["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}},
                   {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [0],
                                              "tokens": ["<|endoftext|>"]}}}
    model = os.path.join(work, "model")
    gen_checkpoint.main(["--out", model, "--vocab", str(vocab), "--hidden", "64", "--layers", "2",
                         "--heads", "4", "--chunk", "16", "--blocks", "32", "--seed", "3"])
    json.dump(tj, open(os.path.join(model, "tokenizer.json"), "w"))

    def encode(text, special=True):
        r = subprocess.run([os.path.join(a.bin, "mhla-tokenize"), "encode", "--tokenizer",
                            os.path.join(model, "tokenizer.json"), "--config", "none"] +
                           ([] if special else ["--no-special"]), input=text.encode(),
                           capture_output=True, timeout=30)
        assert r.returncode == 0, r.stderr
        return [int(x) for x in r.stdout.split()]

    prompt = "The server streams tokens \u2014 na\u00efve caf\u00e9 \u2264 \u03c3\u00b2 ok"
    pids = encode(prompt)
    # eos ids from generation_config.json: the 6th greedy token ends the text
    greedy = generate_ids(a.bin, model, pids, 24)
    eos_tok = greedy[5]
    first = greedy.index(eos_tok)
    json.dump({"eos_token_id": [vocab - 1, eos_tok]},
              open(os.path.join(model, "generation_config.json"), "w"))
    s = Server(binary, model, a.work, "tok", "--threads", "2", "--max-batch-tokens", "16")
    try:
        line = next(l for l in open(s.log_path) if '"event":"listening"' in l)
        info = json.loads(line)
        check(info["text_codec"].startswith("tokenizer.json") and
              info["eos_token_ids"] == [vocab - 1, eos_tok],
              "tokenizer.json and generation_config.json eos ids are used (%s)" % line.strip())
        st, _, body = s.request("POST", "/tokenize", {"prompt": prompt})
        toks = json.loads(body)["tokens"] if st == 200 else None
        check(toks == pids and toks[0] == 0, "/tokenize equals mhla-tokenize (BOS added)")
        st, _, body = s.request("POST", "/tokenize", {"prompt": prompt,
                                                      "add_special_tokens": False})
        check(st == 200 and json.loads(body)["tokens"] == encode(prompt, False),
              "/tokenize add_special_tokens false")
        st, _, body = s.request("POST", "/detokenize", {"tokens": pids[1:]})
        check(st == 200 and json.loads(body)["prompt"] == prompt, "/detokenize round trip")
        # greedy on a text prompt: the prompt encoded with BOS, stopped by the eos id
        st, _, r = s.complete({"prompt": prompt, "max_tokens": 24, "temperature": 0,
                               "return_token_ids": True})
        ch = r["choices"][0]
        check(st == 200 and ch["token_ids"] == greedy[:first + 1] and
              ch["finish_reason"] == "stop" and r["usage"]["prompt_tokens"] == len(pids),
              "text prompt: greedy ids equal mhla-generate on the encoded prompt; eos stops")
        st, _, body = s.request("POST", "/detokenize", {"tokens": greedy[:first]})
        check(json.loads(body)["prompt"] == ch["text"], "the text is the decoded ids, eos excluded")
        st, _, r = s.complete({"prompt": prompt, "max_tokens": 24, "temperature": 0,
                               "return_token_ids": True, "ignore_eos": True})
        check(r["choices"][0]["token_ids"] == greedy, "ignore_eos runs past the eos ids")

        # sampled streams: UTF-8 boundaries, stream == non-stream, stop strings
        # logit_bias towards the pieces of real multi-byte characters, so that they
        # come out often, split over several tokens
        bias = {str(i): 4 for i in encode("\u2014\u2264\u03c3\u00b2\u00e9\u00ef", False)}
        multi = 0
        for seed in range(6):
            req = {"prompt": prompt, "max_tokens": 48, "temperature": 1.0, "seed": seed,
                   "ignore_eos": True, "return_token_ids": True, "logit_bias": bias}
            st, _, full = s.complete(req)
            st2, chunks, raw = s.stream(req)
            text, ids, _ = stream_text(chunks)
            ftext = full["choices"][0]["text"]
            check(st == 200 and st2 == 200 and text == ftext and
                  ids == full["choices"][0]["token_ids"], "seed %d: stream == non-stream" % seed)
            st, _, body = s.request("POST", "/detokenize", {"tokens": ids})
            want = json.loads(body)["prompt"].replace("<|endoftext|>", "")
            check(ftext == want, "seed %d: text is the decoded ids" % seed)
            multi += sum(1 for c in ftext if ord(c) > 127 and c != "\ufffd")
            # a stop string of two characters ending in a multi-byte character
            k = next((i for i, c in enumerate(ftext) if ord(c) > 127 and c != "\ufffd" and i > 0),
                     len(ftext) // 2)
            stop = ftext[k - 1:k + 1]
            if len(stop) < 2 or stop not in ftext:
                continue
            cut = ftext[:ftext.find(stop)]
            st, chunks, _ = s.stream(dict(req, stop=[stop]))
            t2, _, fin = stream_text(chunks)
            pieces = [ch["text"] for c in chunks if c != "[DONE]" for ch in c["choices"]]
            check(t2 == cut and fin == "stop",
                  "seed %d: stop %r cuts the stream before it" % (seed, stop))
            check(stop not in "".join(pieces), "seed %d: no part of the stop string is sent" % seed)
        check(multi > 10, "the samples held multi-byte characters (%d)" % multi)

        # logprobs against mhla-generate's logits: non-streaming with echo, and streaming
        req = {"prompt": prompt, "max_tokens": 12, "temperature": 0.8, "seed": 11,
               "ignore_eos": True, "return_token_ids": True, "logprobs": 3, "echo": True}
        st, _, r = s.complete(req)
        ch = r["choices"][0]
        lp = ch["logprobs"]
        gen = ch["token_ids"]
        n_p = len(pids)
        ok = st == 200 and lp is not None and len(lp["tokens"]) == n_p + len(gen)
        if ok:
            L = log_softmax(logits_of(a.bin, model, pids + gen[:-1], work))
            want = [None] + [L[t - 1, x] for t, x in enumerate(pids + gen) if t > 0]
            got = lp["token_logprobs"]
            ok = got[0] is None and lp["top_logprobs"][0] is None and all(
                abs(g - w) < 1e-3 for g, w in zip(got[1:], want[1:]))
            # the top alternatives are the best 3 of the distribution plus the chosen one
            # (tokens whose strings coincide, like lone bytes shown as U+FFFD, share a key)
            for t in range(1, n_p + len(gen)):
                best = np.sort(L[t - 1])[::-1][:3]
                vals = sorted(lp["top_logprobs"][t].values(), reverse=True)
                ok = ok and 1 <= len(vals) <= 4 and abs(vals[0] - best[0]) < 1e-3 and all(
                    v > best[2] - 1e-3 or abs(v - want[t]) < 1e-3 for v in vals)
            offs = lp["text_offset"]
            full_text = ch["text"]
            ok = ok and offs == sorted(offs) and offs[0] == 0 and offs[-1] <= len(full_text)
            ok = ok and full_text.startswith(prompt)
        check(ok, "echo + logprobs: prompt and completion logprobs equal log-softmax of the "
                  "logits, top 3 alternatives, first prompt token null, offsets ordered")
        st, chunks, _ = s.stream(dict(req, echo=False))
        toks, lps = [], []
        for c in chunks:
            if c == "[DONE]":
                continue
            for x in c["choices"]:
                if x["logprobs"]:
                    toks += x["logprobs"]["tokens"]
                    lps += x["logprobs"]["token_logprobs"]
        st, _, r2 = s.complete(dict(req, echo=False))
        lp2 = r2["choices"][0]["logprobs"]
        check(toks == lp2["tokens"] and lps == lp2["token_logprobs"] and
              lps == lp["token_logprobs"][n_p:] and lp2["text_offset"][0] == 0,
              "streamed logprobs equal the non-streamed ones")
        err = s.complete({"prompt": "x", "logprobs": 21})
        check(err[0] == 400 and err[2]["error"]["param"] == "logprobs", "logprobs 21 -> 400")
    finally:
        rc = s.stop()
        check(rc == 0, "SIGTERM: tokenizer server exits 0 (rc=%s)" % rc)

    # refused at start, with the cause: a tokenizer larger than the model's vocabulary,
    # and a generation_config.json whose eos id is not a token id
    small = os.path.join(work, "small")
    gen_checkpoint.main(["--out", small, "--vocab", "300", "--hidden", "32", "--layers", "1",
                         "--heads", "2", "--chunk", "8", "--blocks", "4", "--seed", "5"])
    shutil.copy(os.path.join(model, "tokenizer.json"), small)
    r = subprocess.run([binary, "--model", small, "--port", "0"], capture_output=True,
                       text=True, timeout=30)
    check(r.returncode != 0 and "tokenizer.json" in r.stderr and "300" in r.stderr,
          "a tokenizer past the model's vocabulary is refused: %s" % r.stderr.strip()[-160:])
    os.remove(os.path.join(small, "tokenizer.json"))
    json.dump({"eos_token_id": [1, 5000]}, open(os.path.join(small, "generation_config.json"), "w"))
    r = subprocess.run([binary, "--model", small, "--port", "0"], capture_output=True,
                       text=True, timeout=30)
    check(r.returncode != 0 and "eos_token_id" in r.stderr,
          "a bad eos_token_id is refused: %s" % r.stderr.strip()[-160:])
    r = subprocess.run([binary, "--model", model, "--port", "0", "--thread-adapt", "sometimes"],
                       capture_output=True, text=True, timeout=30)
    check(r.returncode != 0 and "thread adapt 'sometimes'" in r.stderr,
          "--thread-adapt sometimes is refused: %s" % r.stderr.strip()[-160:])


def run_main(s, a, model):
    st, _, body = s.request("GET", "/health")
    check(st == 200 and json.loads(body)["status"] == "ok", "/health 200 when ready")
    st, _, body = s.request("GET", "/v1/models")
    check(st == 200 and json.loads(body)["data"][0]["id"] == "demo", "/v1/models lists the model")

    # greedy equals mhla-generate; prompts longer than the batch budget are chunked
    for plen, n in ((7, 12), (40, 20), (130, 16)):
        prompt = [(i * 37 + plen) % 256 for i in range(plen)]
        want = generate_ids(a.bin, model, prompt, n)
        st, _, r = s.complete({"prompt": prompt, "max_tokens": n, "temperature": 0,
                               "ignore_eos": True, "return_token_ids": True, "model": "demo"})
        check(st == 200 and r["choices"][0]["token_ids"] == want,
              "greedy ids equal mhla-generate (prompt %d, %d tokens)" % (plen, n))
        check(st == 200 and r["usage"] == {"prompt_tokens": plen, "completion_tokens": n,
                                           "total_tokens": plen + n,
                                           "prompt_tokens_details": {"cached_tokens": 0}} and
              r["object"] == "text_completion" and r["choices"][0]["finish_reason"] == "length",
              "response shape and usage (prompt %d)" % plen)

    # streamed == non-streamed for the same seed
    req = {"prompt": "The quick brown fox", "max_tokens": 40, "temperature": 0.9, "top_p": 0.95,
           "top_k": 100, "seed": 1234, "return_token_ids": True, "ignore_eos": True}
    st, _, full = s.complete(req)
    st2, chunks, _ = s.stream(dict(req, stream_options={"include_usage": True}))
    text, ids, finish = stream_text(chunks)
    check(st == 200 and st2 == 200 and text == full["choices"][0]["text"] and
          ids == full["choices"][0]["token_ids"] and finish == "length",
          "streamed text concatenated equals the non-streamed text")
    check(chunks[-1] == "[DONE]" and chunks[-2]["usage"]["completion_tokens"] == 40 and
          chunks[-2]["choices"] == [], "stream ends with the usage chunk and [DONE]")
    check(all(utf8_ok(ch["text"]) for c in chunks if c != "[DONE]" for ch in c["choices"]),
          "every streamed chunk's text is valid UTF-8")
    st, _, again = s.complete(req)
    check(again["choices"][0]["token_ids"] == full["choices"][0]["token_ids"],
          "same seed, same output")

    # concurrency: 16 mixed requests at once give what each gives alone
    reqs = []
    for i in range(16):
        plen = 3 + (i * 29) % 90
        r = {"prompt": [(j * 13 + i) % 256 for j in range(plen)], "max_tokens": 10 + i % 7,
             "seed": 100 + i, "return_token_ids": True, "ignore_eos": i % 3 != 0,
             "temperature": [0, 0.7, 1.0, 1.3][i % 4]}
        if i % 5 == 1:
            r["top_p"] = 0.8
        if i % 5 == 2:
            r["top_k"] = 20
        if i % 5 == 3:
            r.update(presence_penalty=0.5, frequency_penalty=0.3)
        if i % 4 == 3:
            r["n"] = 2
        reqs.append(r)
    alone = [s.complete(r)[2] for r in reqs]
    busy = [None] * len(reqs)

    def worker(k):
        if k % 2:
            st, chunks, _ = s.stream(reqs[k])
            per = {}
            for c in chunks:
                if c == "[DONE]":
                    continue
                for ch in c["choices"]:
                    t, ids = per.get(ch["index"], ("", []))
                    per[ch["index"]] = (t + ch["text"], ids + ch.get("token_ids", []))
            busy[k] = [per[i] for i in sorted(per)]
        else:
            st, _, r = s.complete(reqs[k])
            busy[k] = [(c["text"], c["token_ids"]) for c in r["choices"]]

    th = [threading.Thread(target=worker, args=(k,)) for k in range(len(reqs))]
    for t in th:
        t.start()
    all_tokens = sum(body_tokens(r) for r in reqs)
    for t in th:
        t.join(PACE.limit(s.model, all_tokens, 60))
    same = all(busy[k] == [(c["text"], c["token_ids"]) for c in alone[k]["choices"]]
               for k in range(len(reqs)))
    check(same, "16 concurrent requests (mixed lengths, sampling, n, stream) equal each alone")

    # stop strings: never emitted, not even in part
    base = {"prompt": "stop test", "max_tokens": 60, "seed": 7, "temperature": 1.0,
            "ignore_eos": True}
    st, _, r = s.complete(base)
    t = r["choices"][0]["text"]
    stop = t[len(t) // 2: len(t) // 2 + 2] if len(t) > 10 else t[-2:]
    want = t[:t.find(stop)]
    st, _, r2 = s.complete(dict(base, stop=[stop, "\u00e9\u00e9never"]))
    st3, chunks, _ = s.stream(dict(base, stop=stop))
    text, _, finish = stream_text(chunks)
    check(r2["choices"][0]["text"] == want and r2["choices"][0]["finish_reason"] == "stop" and
          stop not in r2["choices"][0]["text"], "stop string cuts the output before it")
    check(text == want and finish == "stop" and stop not in text,
          "stop string never appears in the stream")

    # echo
    st, _, r = s.complete({"prompt": "abc", "max_tokens": 3, "echo": True, "seed": 1})
    check(st == 200 and r["choices"][0]["text"].startswith("abc"), "echo prepends the prompt")

    # errors
    def err(status, path_body, what, param=None, code=None, method="POST", path="/v1/completions",
            headers=None):
        st, h, body = s.request(method, path, path_body, headers)
        try:
            e = json.loads(body)["error"]
            shape = set(e) == {"message", "type", "param", "code"}
        except Exception:
            e, shape = {}, False
        ok = st == status and shape
        if param is not None:
            ok = ok and e.get("param") == param
        if code is not None:
            ok = ok and e.get("code") == code
        check(ok, "%s -> %d %s" % (what, status, json.dumps(e)[:160]))
        return h

    err(400, b'{"prompt": [1,2', "invalid JSON")
    err(400, {"prompt": "x", "max_tokens": "ten"}, "max_tokens as string", param="max_tokens")
    err(400, {"prompt": "x", "max_tokens": -5}, "negative max_tokens", param="max_tokens")
    err(400, {"prompt": "x", "max_tokens": 10 ** 9}, "huge max_tokens", param="max_tokens")
    err(400, {"prompt": "x", "temperature": "hot"}, "temperature as string", param="temperature")
    err(400, {"prompt": "x", "temperature": 5}, "temperature out of range", param="temperature")
    err(400, {"prompt": "x", "stream": 1}, "stream as number", param="stream")
    err(400, {"prompt": 5}, "prompt as number", param="prompt")
    err(400, {"prompt": [1, 999]}, "token id outside the vocabulary", param="prompt")
    err(400, {"prompt": "x", "stop": ["a", "b", "c", "d", "e"]}, "five stop strings", param="stop")
    err(400, {"max_tokens": 3}, "missing prompt", param="prompt")
    err(400, {"prompt": list(range(1, 256)) * 2, "max_tokens": 20}, "prompt past the context",
        code="context_length_exceeded")
    err(404, {"prompt": "x", "model": "gpt-17"}, "unknown model", code="model_not_found")
    err(404, None, "unknown path", method="GET", path="/v2/nothing")
    h = err(405, None, "GET on /v1/completions", method="GET")
    check("POST" in h.get("Allow", ""), "405 names the allowed method")
    err(413, {"prompt": "x" * 100000}, "oversized body")
    st, _, _ = s.complete({"prompt": "x", "max_tokens": 2, "unknown_field": {"a": 1}})
    check(st == 200, "unknown fields are ignored")
    # an OpenAI field the server does not implement is never answered as if honoured
    for name, value in [("suffix", " end"), ("tools", [{"type": "function", "function": {"name": "f"}}]),
                        ("tool_choice", "auto"), ("messages", [{"role": "user", "content": "x"}]),
                        ("audio", {"voice": "alloy"}), ("modalities", ["text", "audio"]),
                        ("prediction", {"type": "content", "content": "x"})]:
        err(400, {"prompt": "x", "max_tokens": 2, name: value}, "unimplemented field " + name,
            param=name)
    st, _, _ = s.complete({"prompt": "x", "max_tokens": 2, "suffix": None})
    check(st == 200, "an unimplemented field sent as null is the default, not refused")
    st, _, body = s.request("GET", "/v1/models", None)
    check(st == 200 and json.loads(body)["data"][0].get("chat_template"),
          "/v1/models names the chat template's source")
    st, _, _ = s.complete({"prompt": "x", "max_tokens": 2, "user": "end-user-4711"})
    check(st == 200, "user is accepted")

    # a client that stalls after part of its headers is dropped; others go on
    sk = socket.create_connection(("127.0.0.1", s.port))
    sk.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
    # the server's --timeout 2, plus the other request's work (4 s on an idle machine)
    stall_limit = 2 + PACE.limit(s.model, body_tokens({"prompt": "still here"}), 4)
    sk.settimeout(stall_limit)
    t1 = time.time()
    st, _, _ = s.complete({"prompt": "still here", "max_tokens": 2})
    check(st == 200, "server keeps serving while a client stalls")
    try:
        closed = sk.recv(100) == b""
    except (socket.timeout, ConnectionResetError):
        closed = False
    check(closed and time.time() - t1 < stall_limit,
          "stalled client is disconnected by the idle timeout")
    sk.close()

    # metrics: one known request moves every counter and histogram by what it did
    before = s.metrics()
    st, _, r = s.complete({"prompt": [5, 6, 7, 8, 9], "max_tokens": 9, "ignore_eos": True,
                           "seed": 3})
    after = {}

    def moved(m):
        after.update(m)
        d = lambda k: m.get(k, 0) - before.get(k, 0)  # noqa: E731
        return (d("mhla_time_to_first_token_seconds_count") == 1 and
                d("mhla_inter_token_latency_seconds_count") == 8 and
                d("mhla_request_duration_seconds_count") == 1 and
                d("mhla_prompt_tokens_total") == 5 and d("mhla_generation_tokens_total") == 9 and
                d('mhla_requests_finished_total{reason="length"}') == 1 and
                d('mhla_http_requests_total{status="200"}') >= 1 and
                m["mhla_requests_running"] == 0 and m["mhla_requests_waiting"] == 0)
    check(st == 200 and wait_metrics(s, moved, 5),
          "/metrics: one request of 5 + 9 tokens adds 1 TTFT, 8 inter-token and 1 end-to-end "
          "observations, the token counts and its finish reason")
    hist_ok = True
    for h in ("mhla_time_to_first_token_seconds", "mhla_inter_token_latency_seconds",
              "mhla_request_duration_seconds"):
        buckets = sorted(((float(k.split('le="')[1].split('"')[0]), v) for k, v in after.items()
                          if k.startswith(h + "_bucket{")), key=lambda x: x[0])
        counts = [v for _, v in buckets]
        hist_ok = hist_ok and len(buckets) > 5 and buckets[-1][0] == float("inf") and \
            counts == sorted(counts) and counts[-1] == after[h + "_count"] and \
            after[h + "_sum"] > 0 and after[h + "_count"] > 0
    check(hist_ok, "/metrics histograms: cumulative buckets up to +Inf = _count, _sum > 0")

    m = s.metrics()
    check(m['mhla_http_requests_total{status="200"}'] > 10 and m["mhla_prompt_tokens_total"] > 0
          and m["mhla_generation_tokens_total"] > 0 and
          "mhla_time_to_first_token_seconds_count" in m, "/metrics parses and counts")

    logs = [json.loads(l) for l in open(s.log_path) if l.startswith("{")]
    check(sum(1 for l in logs if l.get("event") == "request") >= 40,
          "one JSON log line per request")
    check(any(l.get("event") == "request" and l.get("user") == "end-user-4711" for l in logs),
          "a request's log line carries its user")
    if "--device" in EXTRA_FLAGS:  # the steps ran on the (possibly simulated) GPU, decode as graphs
        m = s.metrics()
        check(m.get("mhla_gpu_steps_total", 0) > 0 and m.get("mhla_gpu_graph_replays_total", 0) > 0,
              "GPU: steps %s, graph replays %s in /metrics" % (m.get("mhla_gpu_steps_total"),
                                                              m.get("mhla_gpu_graph_replays_total")))


def wait_metrics(s, pred, timeout=10, tokens=CALIB_TOKENS):
    """Polls /metrics until pred holds; a change that takes about `tokens` engine steps."""
    return server_metrics.wait_until(s.metrics, pred, PACE.limit(s.model, tokens, timeout))


def run_byte_vocab(a, binary):
    """No tokenizer.json and 300 ids: the byte-level stand-in does not fit (ids above 255 are
    not bytes), so text is refused with the cause and token ids are served."""
    model = os.path.join(a.work, "vocab300")
    gen_checkpoint.main(["--out", model, "--vocab", "300", "--hidden", "32", "--layers", "1",
                         "--heads", "2", "--chunk", "8", "--blocks", "16", "--seed", "6"])
    s = Server(binary, model, a.work, "vocab300", "--threads", "1")
    try:
        warn = [json.loads(line) for line in open(s.log_path, errors="replace")
                if '"event":"text_codec"' in line]
        check(len(warn) == 1 and warn[0]["level"] == "warn" and "300" in warn[0]["message"] and
              "not bytes" in warn[0]["message"],
              "vocab 300 without tokenizer.json: a warning at start says why (%s)" % warn)
        st, _, r = s.complete({"prompt": "hello", "max_tokens": 2})
        err = (r or {}).get("error", {})
        check(st == 400 and err.get("param") == "prompt" and "tokenizer.json" in
              err.get("message", "") and "not bytes" in err.get("message", ""),
              "a text prompt -> 400 naming prompt and why (%s %s)" % (st, err))
        st, _, data = s.request("POST", "/v1/chat/completions",
                                {"messages": [{"role": "user", "content": "hi"}],
                                 "max_tokens": 2})
        err = json.loads(data).get("error", {}) if data else {}
        check(st == 400 and "not bytes" in err.get("message", ""),
              "a chat request -> 400 with why (%s %s)" % (st, err))
        st, _, r = s.complete({"prompt": [1, 280, 299], "max_tokens": 3, "ignore_eos": True,
                               "return_token_ids": True})
        check(st == 200 and len(r["choices"][0]["token_ids"]) == 3,
              "token ids (some above 255) -> 200 with 3 tokens (%s)" % st)
    finally:
        rc = s.stop()
        check(rc == 0, "SIGTERM: vocab-300 server exits 0 (rc=%s)" % rc)


def run_small(s):
    auth = {"Authorization": "Bearer sekrit"}
    st, _, _ = s.request("POST", "/v1/completions", {"prompt": "x", "max_tokens": 2})
    check(st == 401, "missing API key -> 401")
    st, _, _ = s.request("POST", "/v1/completions", {"prompt": "x", "max_tokens": 2},
                         {"Authorization": "Bearer sekriT"})
    check(st == 401, "wrong API key -> 401")
    st, _, _ = s.request("POST", "/v1/completions", {"prompt": "x", "max_tokens": 2}, auth)
    check(st == 200, "right API key -> 200")
    st, _, _ = s.request("GET", "/health")
    check(st == 200, "/health needs no key")
    # a client that disconnects mid-stream cancels its request and frees its state
    before = s.metrics()
    sk = socket.create_connection(("127.0.0.1", s.port))
    body = json.dumps({"prompt": "cancel me", "max_tokens": 480, "stream": True,
                       "ignore_eos": True}).encode()
    sk.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sekrit\r\n"
               b"Content-Type: application/json\r\n"
               b"Content-Length: %d\r\n\r\n" % len(body) + body)
    got = b""
    while b"data:" not in got:
        got += sk.recv(4096)
    other = {}
    th = threading.Thread(target=lambda: other.update(r=s.stream({"prompt": "other",
                                                                  "max_tokens": 30, "seed": 5}, auth)))
    th.start()
    sk.close()
    th.join(PACE.limit(s.model, body_tokens({"prompt": "other", "max_tokens": 30}), 30))
    ok = wait_metrics(s, lambda m: (m['mhla_requests_finished_total{reason="cancelled"}'] >
                                    before['mhla_requests_finished_total{reason="cancelled"}'] and
                                    m["mhla_sequences_running"] == 0 and
                                    m["mhla_state_bytes"] == 0), 5)
    check(ok, "disconnect mid-stream: /metrics shows it cancelled and its state released")
    check(other.get("r") and other["r"][0] == 200 and stream_text(other["r"][1])[2] == "length",
          "the other stream carries on to the end")

    # two running, one waiting, the next is refused with 429 + Retry-After
    results = []
    long_req = {"prompt": "busy", "max_tokens": 480, "ignore_eos": True}

    def w():
        results.append(s.complete(long_req, auth)[0])

    th = [threading.Thread(target=w) for _ in range(3)]
    for t in th:
        t.start()
    check(wait_metrics(s, lambda m: m["mhla_requests_running"] == 2 and
                       m["mhla_requests_waiting"] == 1), "two running and one waiting")
    st, h, body = s.request("POST", "/v1/completions", {"prompt": "x", "max_tokens": 2}, auth)
    check(st == 429 and h.get("Retry-After") and json.loads(body)["error"]["code"] == "queue_full",
          "queue full -> 429 with Retry-After")
    for t in th:  # two at a time, then the third: as if one after the other
        t.join(PACE.limit(s.model, 3 * body_tokens(long_req), 60))
    check(results == [200, 200, 200], "queued requests complete")

    # SIGTERM while a stream runs: it finishes, new work is refused, exit 0.
    # The queued requests' bookkeeping settles first: a client can have its response
    # before the server counts the request finished, and "1 running" below must be the
    # drain stream, not the last of those (seen on a loaded machine under ASan: SIGTERM
    # went out before the stream arrived, and it was refused with 503)
    check(wait_metrics(s, lambda m: m["mhla_requests_running"] == 0 and
                       m["mhla_requests_waiting"] == 0), "idle before the drain")
    res = {}
    th = threading.Thread(target=lambda: res.update(r=s.stream({"prompt": "drain", "max_tokens": 480,
                                                                "ignore_eos": True}, auth)))
    th.start()
    wait_metrics(s, lambda m: m["mhla_requests_running"] == 1)
    s.proc.send_signal(signal.SIGTERM)
    # the signal is handled between two engine steps at most
    deadline = time.time() + PACE.limit(s.model, 2, 0.1)
    while True:
        st, _, _ = s.request("GET", "/health")
        if st == 503 or time.time() > deadline:
            break
        time.sleep(0.02)
    check(st == 503, "/health 503 while draining")
    st, h, _ = s.request("POST", "/v1/completions", {"prompt": "x", "max_tokens": 2}, auth)
    check(st == 503 and h.get("Retry-After"), "new completions refused with 503 while draining")
    drain = {"prompt": "drain", "max_tokens": 480}
    th.join(PACE.limit(s.model, body_tokens(drain), 30))
    r = res.get("r")
    check(r and r[0] == 200 and r[1][-1] == "[DONE]" and stream_text(r[1])[2] == "length",
          "SIGTERM: the running stream finishes")
    try:
        rc = s.proc.wait(PACE.limit(s.model, body_tokens(drain), 20))
    except subprocess.TimeoutExpired:
        rc = None
    check(rc == 0, "SIGTERM: the draining server exits 0 (rc=%s)" % rc)


if __name__ == "__main__":
    run_test(main, "server")
