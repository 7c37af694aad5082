#!/usr/bin/python3
"""The server in the field (issue 14): memory that sizes itself and the HTTP edge.

Small random checkpoints, servers on free 127.0.0.1 ports (always killed at
the end). Each check below fails on a server without the behaviour it names:
the state pool on by default with its budget logged, the prefix cache hit by
a repeated prompt, --state-memory 0 unbounded; the idle timeout in force after
a completion, a stream whose client stops reading cancelled, a request that
trickles in cut at its deadline, a per-client connection limit that leaves
room for other clients; request parsing that refuses ambiguous framing,
trailing garbage, NUL in strings and loose logit_bias keys; drain that ends
every stream with [DONE]; requests past --request-timeout ending as
"timeout"; a second server on a port in use refused at
start. Waits are generous bounds on the work, not tight
timeouts: the machine may be busy.
"""
import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
import gen_checkpoint  # noqa: E402
import test_server as ts  # noqa: E402
from test_server import Server, check, stream_text, wait_metrics  # noqa: E402

SLACK = 60  # seconds: an upper bound for work that normally takes well under one


def log_events(s, event):
    out = []
    for line in open(s.log_path, errors="replace"):
        if '"event":"%s"' % event in line:
            out.append(json.loads(line))
    return out


def raw_request(port, data, read_timeout=SLACK, src=None):
    """Sends bytes on a fresh connection; returns what came back until close
    (b"" when the server refused or reset the connection)."""
    sk = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if src:
        sk.bind((src, 0))
    sk.settimeout(read_timeout)
    got = b""
    try:
        sk.connect(("127.0.0.1", port))
        sk.sendall(data)
        while True:
            b = sk.recv(65536)
            if not b:
                break
            got += b
            head, sep, rest = got.partition(b"\r\n\r\n")
            n = [int(v) for k, _, v in (line.partition(b":") for line in head.split(b"\r\n"))
                 if k.strip().lower() == b"content-length"]
            if sep and n and len(rest) >= n[0]:
                break
    except (socket.timeout, OSError):
        pass
    sk.close()
    return got


def status_of(resp):
    try:
        return int(resp.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return None


def body_of(resp):
    return resp.partition(b"\r\n\r\n")[2]


def run_memory(a, model, long_model):
    # the default: a bounded pool sized from the machine, logged with its arithmetic
    s = Server(a.binary, model, a.work, "auto", "--threads", "2")
    try:
        ev = log_events(s, "state_memory")
        check(len(ev) == 1 and ev[0]["pages_mib"] > 0 and ev[0]["limit_mib"] > 0 and
              ev[0]["limit_from"] in ("MemAvailable", "cgroup memory.max - memory.current",
                                      "cgroup v1 memory.limit_in_bytes - memory.usage_in_bytes"),
              "default --state-memory auto: the budget is logged (%s)" % (ev[:1],))
        arith = log_events(s, "state_memory_arithmetic")
        check(len(arith) == 1 and "weights" in arith[0]["message"] and
              "headroom" in arith[0]["message"] and "sequence buffers" in arith[0]["message"],
              "the budget's arithmetic is logged")
        m = s.metrics()
        check(m.get('mhla_state_pages{kind="total"}', 0) > 0,
              "default: the state pool is bounded (pages in /metrics)")
        check("mhla_state_memory_usage_ratio" in m and m["mhla_state_memory_usage_ratio"] == 0,
              "mhla_state_memory_usage_ratio is exported, 0 when idle")
        prompt = [(i * 37 + 11) % 256 for i in range(200)]
        want = ts.generate_ids(a.bin, model, prompt, 8)
        outs = []
        for _ in range(2):
            st, _, r = s.complete({"prompt": prompt, "max_tokens": 8, "temperature": 0,
                                   "ignore_eos": True, "return_token_ids": True})
            outs.append(r["choices"][0]["token_ids"] if st == 200 else None)
        m = s.metrics()
        check(outs == [want, want], "default: a repeated prompt gives the same ids as mhla-generate")
        check(m["mhla_prefix_cache_hits_total"] >= 10,
              "default: the repeated 200-token prompt hits the prefix cache (%d blocks)" %
              m["mhla_prefix_cache_hits_total"])
    finally:
        check(s.stop() == 0, "SIGTERM: auto server exits 0")
    # usage while a long request runs: on the slower, long-context model, so that the
    # request holds its pages for seconds, not for less than one poll of /metrics
    s = Server(a.binary, long_model, a.work, "auto_long", "--threads", "2")
    try:
        res = {}
        th = threading.Thread(target=lambda: res.update(r=s.complete(
            {"prompt": list(range(20)), "max_tokens": 3000, "ignore_eos": True})))
        th.start()
        check(wait_metrics(s, lambda m: m["mhla_state_memory_usage_ratio"] > 0, SLACK),
              "mhla_state_memory_usage_ratio > 0 while a request holds pages")
        th.join(SLACK * 10)
        check(res.get("r") and res["r"][0] == 200, "the long request completes")
        check(wait_metrics(s, lambda m: m["mhla_state_memory_usage_ratio"] == 0, SLACK),
              "mhla_state_memory_usage_ratio back to 0 when the request is done")
    finally:
        check(s.stop() == 0, "SIGTERM: auto server on the long model exits 0")
    s = Server(a.binary, model, a.work, "unbounded", "--state-memory", "0")
    try:
        m = s.metrics()
        check('mhla_state_pages{kind="total"}' not in m and
              m["mhla_state_memory_usage_ratio"] == 0 and not log_events(s, "state_memory"),
              "--state-memory 0: unbounded per-sequence state as before")
    finally:
        s.stop()
    try:
        Server(a.binary, model, a.work, "badmem", "--state-memory", "lots")
        check(False, "--state-memory lots is refused")
    except RuntimeError as e:
        check("--state-memory" in str(e) and "auto" in str(e), "--state-memory lots is refused")


def keepalive_completion(port, body):
    """A completion on a keep-alive connection; returns the open socket after the answer."""
    data = json.dumps(body).encode()
    sk = socket.create_connection(("127.0.0.1", port), timeout=SLACK)
    sk.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               b"Content-Length: %d\r\n\r\n" % len(data) + data)
    got = b""
    while b"\r\n\r\n" not in got:
        got += sk.recv(65536)
    head, _, rest = got.partition(b"\r\n\r\n")
    n = int([line.split(b":")[1] for line in head.split(b"\r\n")
             if line.lower().startswith(b"content-length")][0])
    while len(rest) < n:
        rest += sk.recv(65536)
    return sk, status_of(head)


def closed_within(sk, seconds):
    """Seconds until the peer closes sk (None when it is still open after `seconds`)."""
    t0 = time.time()
    sk.settimeout(seconds)
    try:
        while True:
            b = sk.recv(65536)
            if not b:
                return time.time() - t0
    except socket.timeout:
        return None
    except OSError:
        return time.time() - t0


def run_edge(a, model, long_model):
    s = Server(a.binary, model, a.work, "edge", "--threads", "1", "--timeout", "2",
               "--read-timeout", "4")
    try:
        # the idle timeout holds after a completion on a keep-alive connection
        sk, st = keepalive_completion(s.port, {"prompt": [5, 6, 7], "max_tokens": 4})
        t = closed_within(sk, 30)
        sk.close()
        check(st == 200 and t is not None and t > 1.0,
              "keep-alive after a completion: closed by the idle timeout (after %s s)" % t)
        # slowloris: a byte every 0.5 s keeps the idle timeout at bay, not the read deadline
        sk = socket.create_connection(("127.0.0.1", s.port), timeout=SLACK)
        head = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 200
        t0, cut = time.time(), None
        for i in range(len(head)):
            try:
                sk.sendall(head[i:i + 1])
            except OSError:
                cut = time.time() - t0
                break
            sk.settimeout(0.5)
            try:
                if sk.recv(4096) == b"":
                    cut = time.time() - t0
                    break
            except socket.timeout:
                pass
            except OSError:
                cut = time.time() - t0
                break
            if time.time() - t0 > 40:
                break
        sk.close()
        check(cut is not None and cut >= 3.0,
              "a request trickling in is cut at --read-timeout (after %s s)" % cut)
        st, _, _ = s.request("GET", "/health")
        check(st == 200, "the server still answers after the trickling client")
    finally:
        check(s.stop() == 0, "SIGTERM: edge server exits 0")

    # one client address cannot take the slots other clients need
    s = Server(a.binary, model, a.work, "perclient", "--threads", "1", "--max-connections", "16",
               "--max-connections-per-client", "4", "--read-timeout", "120", "--timeout", "120")
    held = []
    try:
        for _ in range(4):
            held.append(socket.create_connection(("127.0.0.1", s.port), timeout=SLACK))
        time.sleep(0.5)  # the daemon has accepted them
        fifth = raw_request(s.port, b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                            read_timeout=30)
        check(status_of(fifth) != 200,
              "a client address past --max-connections-per-client is refused (%r)" % fifth[:40])
        other = raw_request(s.port, b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                            read_timeout=30, src="127.0.0.2")
        check(status_of(other) == 200, "another client address still gets /health")
    finally:
        for h in held:
            h.close()
        s.stop()

    # a stream whose client stops reading is dropped after --timeout, its request ended
    s = Server(a.binary, model, a.work, "noread", "--threads", "2", "--timeout", "2")
    try:
        # 32 choices x 500 tokens with 20 alternatives each: ~8 MB, more than the
        # kernel's socket buffers hold
        body = json.dumps({"prompt": [1, 2, 3], "max_tokens": 500, "n": 32, "logprobs": 20,
                           "stream": True, "ignore_eos": True}).encode()
        sk = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sk.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sk.connect(("127.0.0.1", s.port))
        sk.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                   b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        ended = None
        deadline = time.time() + SLACK * 3
        while time.time() < deadline and ended is None:
            for ev in log_events(s, "request"):
                if ev.get("path") == "/v1/completions":
                    ended = ev
            time.sleep(0.2)
        sk.close()
        check(ended is not None and ended.get("termination") != "ok",
              "a stream whose client stops reading ends at the write deadline (%s)" %
              (ended and ended.get("termination")))
        check(wait_metrics(s, lambda m: m["mhla_requests_running"] == 0 and
                           m['mhla_state_pages{kind="used"}'] == 0, SLACK),
              "... and its state is freed")
    finally:
        s.stop()

    # a stream that waits in the queue longer than --timeout is still delivered
    s = Server(a.binary, long_model, a.work, "queued", "--threads", "1", "--timeout", "1",
               "--max-running", "1")
    try:
        res = {}
        ta = threading.Thread(target=lambda: res.update(a=s.complete(
            {"prompt": [1, 2, 3], "max_tokens": 400, "ignore_eos": True})[0]))
        ta.start()
        wait_metrics(s, lambda m: m["mhla_requests_running"] == 1, SLACK)
        st, chunks, _ = s.stream({"prompt": [4, 5, 6], "max_tokens": 5, "ignore_eos": True})
        ta.join(SLACK * 3)
        check(res.get("a") == 200 and st == 200 and chunks[-1] == "[DONE]" and
              stream_text(chunks)[2] == "length",
              "a stream queued behind a long request, past --timeout, is delivered in full")
        # a half-closed client (sent its request, shut down its sending side) gets its
        # answer, even after a wait in the queue
        for stream in (True, False):
            ta = threading.Thread(target=lambda: res.update(a=s.complete(
                {"prompt": [1, 2, 3], "max_tokens": 400, "ignore_eos": True})[0]))
            ta.start()
            wait_metrics(s, lambda m: m["mhla_requests_running"] == 1, SLACK)
            body = json.dumps({"prompt": [3, 4], "max_tokens": 5, "ignore_eos": True,
                               "stream": stream}).encode()
            sk = socket.create_connection(("127.0.0.1", s.port), timeout=SLACK)
            sk.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                       b"Content-Type: application/json\r\n"
                       b"Content-Length: %d\r\n\r\n" % len(body) + body)
            sk.shutdown(socket.SHUT_WR)
            got = b""
            try:
                while True:
                    b = sk.recv(65536)
                    if not b:
                        break
                    got += b
            except OSError:
                pass
            sk.close()
            done = b"data: [DONE]" in got if stream else b'"finish_reason":"length"' in got
            check(status_of(got) == 200 and done, "a half-closed client gets its whole %s answer"
                  % ("streamed" if stream else "plain"))
            ta.join(SLACK * 3)
    finally:
        s.stop()


def run_drain(a, slow_model):
    """SIGTERM with a short --shutdown-timeout: every stream ends with [DONE]."""
    s = Server(a.binary, slow_model, a.work, "drain", "--threads", "1", "--max-running", "1",
               "--shutdown-timeout", "1")
    results = [None] * 3

    def reader(k):
        try:
            results[k] = s.stream({"prompt": [k + 1, 9, 9], "max_tokens": 1000,
                                   "ignore_eos": True})
        except Exception as e:  # a cut stream
            results[k] = ("cut", repr(e))

    th = [threading.Thread(target=reader, args=(k,)) for k in range(3)]
    for t in th:
        t.start()
    # all three taken in (one generating, two queued behind it) before the signal: on a
    # busy machine a client thread can still be connecting when the first stream starts,
    # and a request that arrives after SIGTERM is refused with 503, as it should be
    check(wait_metrics(s, lambda m: m["mhla_generation_tokens_total"] > 0 and
                       m["mhla_requests_running"] == 1 and m["mhla_requests_waiting"] == 2, SLACK),
          "drain: one stream running and two queued before SIGTERM")
    s.proc.send_signal(signal.SIGTERM)
    for t in th:
        t.join(SLACK * 2)
    ok = all(r is not None and r[0] == 200 and r[1][-1] == "[DONE]" for r in results)
    check(ok, "drain: every stream ends with [DONE], none is cut (%s)" %
          [(r[0], r[1][-1] if r[0] == 200 else r[1]) if r else None for r in results])
    errors = [c for r in results if r and r[0] == 200 for c in r[1]
              if c != "[DONE]" and "error" in c]
    check(errors and all(e["error"]["type"] == "server_error" for e in errors),
          "drain: the unfinished streams carry an error event before [DONE]")
    try:
        rc = s.proc.wait(SLACK)
    except Exception:
        rc = None
    s.log.close()
    check(rc == 0, "drain: the server exits 0 (rc=%s)" % rc)


def error_shape(resp):
    try:
        e = json.loads(body_of(resp))["error"]
        return set(e) == {"message", "type", "param", "code"}
    except (ValueError, KeyError, TypeError):
        return False


def run_parse(a, model):
    s = Server(a.binary, model, a.work, "parse", "--threads", "1", "--api-key", "k3y")
    auth = {"Authorization": "Bearer k3y"}
    try:
        ok_body = b'{"prompt": [5, 6], "max_tokens": 1}'
        for name, headers in [
                ("two equal Content-Length", b"Content-Length: %d\r\nContent-Length: %d\r\n"
                 % (len(ok_body), len(ok_body))),
                ("two different Content-Length", b"Content-Length: %d\r\nContent-Length: 3\r\n"
                 % len(ok_body)),
                ("Transfer-Encoding with Content-Length",
                 b"Transfer-Encoding: chunked\r\nContent-Length: %d\r\n" % len(ok_body))]:
            body = ok_body if b"chunked" not in headers else \
                b"%x\r\n%s\r\n0\r\n\r\n" % (len(ok_body), ok_body)
            resp = raw_request(s.port, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                               b"Authorization: Bearer k3y\r\n" + headers + b"\r\n" + body)
            check(status_of(resp) == 400 and error_shape(resp) and
                  b"connection: close" in resp.lower(),
                  "%s -> 400 in the OpenAI shape, connection closed (%r)" % (name, resp[:60]))
        resp = raw_request(s.port, b"GET /v1/models/" + b"m" * 10000 +
                           b" HTTP/1.1\r\nHost: x\r\n\r\n")
        check(status_of(resp) == 414 and error_shape(resp),
              "a 10000-byte URI -> 414 in the OpenAI shape (%r)" % resp[:40])
        resp = raw_request(s.port, b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 40000 +
                           b"\r\n\r\n")
        check(status_of(resp) == 431 and error_shape(resp),
              "40 kB of header fields -> 431 in the OpenAI shape (%r)" % resp[:40])
        for name, body in [("trailing garbage after the JSON", '{"prompt": "a"} x'),
                           ("two JSON objects", '{"prompt": "a"}{"prompt": "b"}'),
                           ("NUL in the prompt", '{"prompt": "a\\u0000b", "max_tokens": 1}'),
                           ("NUL in a stop string",
                            '{"prompt": "a", "max_tokens": 1, "stop": "x\\u0000"}'),
                           ("logit_bias key ' 5'", '{"prompt": "a", "logit_bias": {" 5": 1}}'),
                           ("logit_bias key '+5'", '{"prompt": "a", "logit_bias": {"+5": 1}}'),
                           ("logit_bias key '5 '", '{"prompt": "a", "logit_bias": {"5 ": 1}}')]:
            st, _, data = s.request("POST", "/v1/completions", body, auth)
            check(st == 400 and "error" in json.loads(data), "%s -> 400" % name)
        st, _, _ = s.request("POST", "/v1/completions",
                             '{"prompt": "a", "max_tokens": 1, "logit_bias": {"5": 1}} \n', auth)
        check(st == 200, "logit_bias key '5' and trailing whitespace are fine")
        st, _, data = s.request("POST", "/tokenize", '{"prompt": "a"} x', auth)
        check(st == 400, "/tokenize: trailing garbage -> 400")
        st, _, _ = s.request("POST", "/v1/completions", {"prompt": "a", "max_tokens": 1},
                             {"Authorization": "bearer k3y"})
        check(st == 200, "'Authorization: bearer KEY' (scheme in lower case) is accepted")
        st, _, _ = s.request("POST", "/v1/completions", {"prompt": "a", "max_tokens": 1},
                             {"Authorization": "BEARER k3y"})
        check(st == 200, "'Authorization: BEARER KEY' is accepted")
    finally:
        check(s.stop() == 0, "SIGTERM: parse server exits 0")
    # a byte-level BPE tokenizer has a token for the byte 0 (id 1 in the demo model's)
    demo = os.path.join(HERE, "..", "..", "models", "brown-mhla")
    if not os.path.exists(os.path.join(demo, "tokenizer.json")):
        return
    s = Server(a.binary, demo, a.work, "demo", "--threads", "1")
    try:
        st, _, data = s.request("POST", "/detokenize", {"tokens": [50, 1, 60]})
        text = json.loads(data).get("prompt", "") if st == 200 else ""
        check(st == 200 and len(text) == 3 and text[0] == "1" and text[2] == ";",
              "/detokenize [50, 1, 60]: the byte 0 does not cut the text (%r)" % text)
        st, _, r = s.complete({"prompt": [50, 1, 60], "max_tokens": 4, "echo": True,
                               "logprobs": 1, "seed": 3})
        offs = r["choices"][0]["logprobs"]["text_offset"] if st == 200 else []
        check(st == 200 and offs == sorted(offs) and len(r["choices"][0]["text"]) >= 3,
              "echo + logprobs: text_offset never goes backwards (%s)" % offs)
    finally:
        s.stop()


def run_deadline(a, long_model):
    # --request-timeout 1 against requests for the whole 4,096-token context of the slow
    # model (seconds of work): they end at the deadline as "timeout", not "length", and
    # /metrics counts them under reason="timeout"
    s = Server(a.binary, long_model, a.work, "deadline", "--threads", "1",
               "--request-timeout", "1")
    try:
        body = {"prompt": [1, 2, 3], "max_tokens": 4000, "ignore_eos": True}
        t0 = time.time()
        st, _, r = s.complete(body)
        took = time.time() - t0
        ch = r["choices"][0] if st == 200 else {}
        check(st == 200 and ch.get("finish_reason") == "timeout" and
              r["usage"]["completion_tokens"] < 4000 and took >= 1,
              "a request past --request-timeout ends as timeout (%s, %s, %s tokens, %.1f s)" %
              (st, ch.get("finish_reason"), r["usage"]["completion_tokens"] if st == 200 else None,
               took))
        st, chunks, _ = s.stream(body)
        reasons = [c["choices"][0]["finish_reason"] for c in (chunks or [])
                   if c != "[DONE]" and c["choices"] and c["choices"][0]["finish_reason"]]
        check(st == 200 and reasons == ["timeout"] and chunks[-1] == "[DONE]",
              "a stream past --request-timeout ends with finish_reason timeout (%s)" % reasons)
        wait_metrics(s, lambda m: m['mhla_requests_finished_total{reason="timeout"}'] == 2)
        m = s.metrics()
        check(m['mhla_requests_finished_total{reason="timeout"}'] == 2 and
              m['mhla_requests_finished_total{reason="length"}'] == 0,
              "/metrics counts both under reason=timeout, none under length")
    finally:
        check(s.stop() == 0, "SIGTERM: the deadline server exits 0")


def run_port(a, model):
    # a second server on a port in use must fail at start, not share the port
    # with the first (SO_REUSEPORT would let the kernel split connections)
    s = Server(a.binary, model, a.work, "port_first", "--threads", "1")
    try:
        log = os.path.join(a.work, "port_second.log")
        with open(log, "wb") as f:
            p = subprocess.Popen([a.binary, "--model", model, "--host", "127.0.0.1", "--port",
                                  str(s.port), "--device", "cpu", "--threads", "1"],
                                 stdout=subprocess.DEVNULL, stderr=f)
            ts.PROCS.append(p)
            # starting loads the model first: bounded by the model's pace, as Server is
            try:
                rc = p.wait(timeout=ts.PACE.limit(model, ts.CALIB_TOKENS, 20))
            except subprocess.TimeoutExpired:
                rc = None
        text = open(log, errors="replace").read()
        check(rc is not None and rc != 0,
              "a second server on port %d exits non-zero (rc %s)" % (s.port, rc))
        check("address in use" in text, "the second server says the address is in use (%r)" %
              text[-300:])
        st, _, _ = s.request("GET", "/health")
        check(st == 200, "the first server still answers (%s)" % st)
    finally:
        check(s.stop() == 0, "SIGTERM: the first server exits 0")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--parts", default="memory,edge,parse,drain,port,deadline")
    a = ts.parse_args(ap)
    model = os.path.join(a.work, "model")
    gen_checkpoint.main(["--out", model, "--vocab", "256", "--hidden", "64", "--layers", "2",
                         "--heads", "4", "--chunk", "16", "--blocks", "32", "--seed", "1"])
    # a slow model with a long context: streams that stay busy for a while
    long_model = os.path.join(a.work, "long")
    gen_checkpoint.main(["--out", long_model, "--vocab", "256", "--hidden", "256", "--layers",
                         "4", "--heads", "4", "--chunk", "16", "--blocks", "256", "--seed", "3"])
    parts = a.parts.split(",")
    if "memory" in parts:
        run_memory(a, model, long_model)
    if "parse" in parts:
        run_parse(a, model)
    if "edge" in parts:
        run_edge(a, model, long_model)
    if "deadline" in parts:
        run_deadline(a, long_model)
    if "port" in parts:
        run_port(a, model)
    if "drain" in parts:
        # slower still: three streams of 1000 tokens outlast a 1 s shutdown deadline
        slow = os.path.join(a.work, "slow")
        gen_checkpoint.main(["--out", slow, "--vocab", "256", "--hidden", "512", "--layers", "4",
                             "--heads", "4", "--chunk", "16", "--blocks", "64", "--seed", "4"])
        run_drain(a, slow)
    return 0


if __name__ == "__main__":
    ts.run_test(main, "edge")
