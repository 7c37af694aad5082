#!/usr/bin/python3
"""Integration test of mhla-server (SPEC §3, issue 5), standard library only.

Generates a small random checkpoint (byte-level vocabulary of 256 ids), starts
build/bin/mhla-server on a free 127.0.0.1 port and checks completions against
mhla-generate, streaming against non-streaming, batching against running alone,
stop strings, error handling, cancellation, metrics, auth, 429 and SIGTERM.
The servers are always killed at the end.
"""
import argparse
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
import gen_checkpoint  # noqa: E402

FAILURES = []
PROCS = []


def check(cond, what):
    if cond:
        print("ok   " + what)
    else:
        print("FAIL " + what)
        FAILURES.append(what)
    return cond


class Server:
    def __init__(self, binary, model, work, name, *flags):
        self.log_path = os.path.join(work, name + ".log")
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([binary, "--model", model, "--host", "127.0.0.1",
                                      "--port", "0"] + list(flags),
                                     stdout=subprocess.DEVNULL, stderr=self.log)
        PROCS.append(self.proc)
        self.port = None
        deadline = time.time() + 20
        while time.time() < deadline and self.port is None:
            if self.proc.poll() is not None:
                raise RuntimeError("server exited early: " + open(self.log_path).read())
            for line in open(self.log_path, errors="replace"):
                if '"event":"listening"' in line:
                    self.port = json.loads(line)["port"]
            time.sleep(0.05)
        if self.port is None:
            raise RuntimeError("server did not start: " + open(self.log_path).read())

    def request(self, method, path, body=None, headers=None, timeout=30):
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
        out = {}
        for line in data.decode().splitlines():
            if not line or line.startswith("#"):
                continue
            m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$', line)
            assert m, "bad metrics line %r" % line
            out[m.group(1) + (m.group(2) or "")] = float(m.group(3))
        return out

    def stop(self, timeout=15):
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
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
                         timeout=60)
    assert out.returncode == 0, out.stderr
    return [int(x) for x in out.stdout.split()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    model = os.path.join(a.work, "model")
    gen_checkpoint.main(["--out", model, "--vocab", "256", "--hidden", "64", "--layers", "2",
                         "--heads", "4", "--chunk", "16", "--blocks", "32", "--seed", "1"])
    binary = os.path.join(a.bin, "mhla-server")
    t0 = time.time()
    s = Server(binary, model, a.work, "main", "--threads", "2", "--max-batch-tokens", "48",
               "--max-body-bytes", "65536", "--timeout", "2", "--model-name", "demo")
    try:
        run_main(s, a, model)
    finally:
        rc = s.stop()
        check(rc == 0, "SIGTERM: main server exits 0 (rc=%s)" % rc)
    # a slower model for the checks that need requests to stay busy for a while
    big = os.path.join(a.work, "big")
    gen_checkpoint.main(["--out", big, "--vocab", "256", "--hidden", "512", "--layers", "4",
                         "--heads", "4", "--chunk", "16", "--blocks", "32", "--seed", "2"])
    s2 = Server(binary, big, a.work, "small", "--threads", "1", "--max-running", "2",
                "--max-queue", "1", "--api-key", "sekrit", "--model-name", "demo",
                "--shutdown-timeout", "20")
    try:
        run_small(s2)
    finally:
        if s2.proc.poll() is None:
            s2.proc.kill()
        s2.log.close()
    print("elapsed %.1f s" % (time.time() - t0))


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
                                           "total_tokens": plen + n} and
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
    for t in th:
        t.join(60)
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

    # a client that stalls after part of its headers is dropped; others go on
    sk = socket.create_connection(("127.0.0.1", s.port))
    sk.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
    sk.settimeout(6)
    t1 = time.time()
    st, _, _ = s.complete({"prompt": "still here", "max_tokens": 2})
    check(st == 200, "server keeps serving while a client stalls")
    try:
        closed = sk.recv(100) == b""
    except (socket.timeout, ConnectionResetError):
        closed = False
    check(closed and time.time() - t1 < 6, "stalled client is disconnected by the idle timeout")
    sk.close()

    m = s.metrics()
    check(m['mhla_http_requests_total{status="200"}'] > 10 and m["mhla_prompt_tokens_total"] > 0
          and m["mhla_generation_tokens_total"] > 0 and
          "mhla_time_to_first_token_seconds_count" in m, "/metrics parses and counts")

    logs = [json.loads(l) for l in open(s.log_path) if l.startswith("{")]
    check(sum(1 for l in logs if l.get("event") == "request") >= 40,
          "one JSON log line per request")



def wait_metrics(s, pred, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred(s.metrics()):
            return True
        time.sleep(0.02)
    return False


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
    th.join(30)
    ok = False
    for _ in range(100):
        m = s.metrics()
        if (m['mhla_requests_finished_total{reason="cancelled"}'] >
                before['mhla_requests_finished_total{reason="cancelled"}'] and
                m["mhla_sequences_running"] == 0 and m["mhla_state_bytes"] == 0):
            ok = True
            break
        time.sleep(0.05)
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
    for t in th:
        t.join(60)
    check(results == [200, 200, 200], "queued requests complete")

    # SIGTERM while a stream runs: it finishes, new work is refused, exit 0
    res = {}
    th = threading.Thread(target=lambda: res.update(r=s.stream({"prompt": "drain", "max_tokens": 480,
                                                                "ignore_eos": True}, auth)))
    th.start()
    wait_metrics(s, lambda m: m["mhla_requests_running"] == 1)
    s.proc.send_signal(signal.SIGTERM)
    time.sleep(0.1)
    st, _, _ = s.request("GET", "/health")
    check(st == 503, "/health 503 while draining")
    st, h, _ = s.request("POST", "/v1/completions", {"prompt": "x", "max_tokens": 2}, auth)
    check(st == 503 and h.get("Retry-After"), "new completions refused with 503 while draining")
    th.join(30)
    r = res.get("r")
    check(r and r[0] == 200 and r[1][-1] == "[DONE]" and stream_text(r[1])[2] == "length",
          "SIGTERM: the running stream finishes")
    try:
        rc = s.proc.wait(20)
    except subprocess.TimeoutExpired:
        rc = None
    check(rc == 0, "SIGTERM: the draining server exits 0 (rc=%s)" % rc)


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # a crash of the test itself is a failure too
        import traceback
        traceback.print_exc()
        FAILURES.append("exception: %r" % e)
    finally:
        for p in PROCS:
            if p.poll() is None:
                p.kill()
                p.wait()
    if FAILURES:
        print("%d FAILED:\n  %s" % (len(FAILURES), "\n  ".join(FAILURES)))
        sys.exit(1)
    print("all server checks passed")
