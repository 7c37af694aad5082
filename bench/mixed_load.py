#!/usr/bin/python3
"""Mixed load for the step time budget: streams decoding while long prompts arrive.

Starts build/bin/mhla-server on MODEL with --itl-target-ms TARGET (0: the token budget
alone, the behaviour before the time budget), then for --duration seconds keeps --streams
streams decoding (closed loop: each stream sends its next request when one ends; a request
is a 32-token prompt with --stream-tokens tokens of output) while prompts arrive at random
(Poisson, --rate per second): --long-share of them long (1,000-2,000 tokens), the others
short (16-128 tokens), each asking for 4 tokens. Prompts are token ids, so any model works
(a byte-level stand-in included).

Reports, over the measured window (after --warmup seconds):
  - the streams' inter-token gaps (one per event after a stream's first): p50, p99, max,
    and max / p50 (the stall ratio);
  - TTFT of the short and the long arrivals: p50, p99, max;
  - the server's learned step costs from /metrics.
The gaps are measured by this client, on the same machine as the server. One JSON line
with every figure goes to --json.

usage: bench/mixed_load.py [--bin build/bin] [--model models/brown-mhla] [--itl-target-ms N]
                           [--server-args "--weights bf16"] [--duration 60] [--json FILE]
"""
import argparse
import http.client
import json
import os
import random
import shlex
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "tools"))
import server_proc  # noqa: E402


def pct(v, p):
    if not v:
        return float("nan")
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


class Load:
    def __init__(self, a, port):
        self.a = a
        self.port = port
        self.t0 = time.time()
        self.stop_at = self.t0 + a.warmup + a.duration
        self.lock = threading.Lock()
        self.gaps = []  # (time, seconds) of every stream gap
        self.ttft = {"short": [], "long": []}
        self.errors = []

    def measured(self, t):
        return t >= self.t0 + self.a.warmup

    def stream(self, prompt, max_tokens, on_event):
        """One streaming request; on_event(time, n_ids) per token event. Returns the status."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        body = {"prompt": prompt, "max_tokens": max_tokens, "ignore_eos": True, "stream": True,
                "return_token_ids": True, "temperature": 0.8}
        c.request("POST", "/v1/completions", json.dumps(body),
                  {"Content-Type": "application/json"})
        r = c.getresponse()
        if r.status != 200:
            c.close()
            return r.status
        while True:
            line = r.fp.readline()
            if not line or line.startswith(b"data: [DONE]"):
                break
            if line.startswith(b"data: "):
                ev = json.loads(line[6:])
                ch = ev.get("choices") or [{}]
                n = len(ch[0].get("token_ids") or []) if ch else 0
                if n:
                    on_event(time.time(), n)
        c.close()
        return 200

    def streamer(self, k):
        rng = random.Random(1000 + k)
        while time.time() < self.stop_at:
            prompt = [rng.randrange(1, self.a.vocab) for _ in range(32)]
            last = [None]

            def on_event(t, n):
                if last[0] is not None and self.measured(last[0]) and t < self.stop_at:
                    with self.lock:
                        self.gaps.append((t, t - last[0]))
                last[0] = t
            st = self.stream(prompt, self.a.stream_tokens, on_event)
            if st != 200:
                self.errors.append(st)
                time.sleep(0.5)

    def arrival(self, kind, prompt):
        t_start = time.time()
        first = []
        st = self.stream(prompt, 4, lambda t, n: first.append(t) if not first else None)
        if st != 200 or not first:
            self.errors.append(st)
        elif self.measured(t_start):
            with self.lock:
                self.ttft[kind].append(first[0] - t_start)

    def arrivals(self):
        rng = random.Random(7)
        threads = []
        t = time.time()
        while True:
            t += rng.expovariate(self.a.rate)
            if t >= self.stop_at:
                break
            time.sleep(max(0.0, t - time.time()))
            is_long = rng.random() < self.a.long_share
            n = rng.randint(1000, 2000) if is_long else rng.randint(16, 128)
            n = min(n, self.a.context - 8)
            prompt = [rng.randrange(1, self.a.vocab) for _ in range(n)]
            th = threading.Thread(target=self.arrival,
                                  args=("long" if is_long else "short", prompt))
            th.start()
            threads.append(th)
        for th in threads:
            th.join()


def metrics(port):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    c.close()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            out[k] = float(v)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build/bin")
    ap.add_argument("--model", default="models/brown-mhla")
    ap.add_argument("--itl-target-ms", type=int, default=100)
    ap.add_argument("--server-args", default="")
    ap.add_argument("--streams", type=int, default=8)
    ap.add_argument("--stream-tokens", type=int, default=256)
    ap.add_argument("--rate", type=float, default=0.5, help="arrivals per second")
    ap.add_argument("--long-share", type=float, default=0.5)
    ap.add_argument("--duration", type=float, default=60)
    ap.add_argument("--warmup", type=float, default=5)
    ap.add_argument("--json", default=None)
    ap.add_argument("--log", default="/tmp/mixed_load_server.log")
    a = ap.parse_args()
    cfg = json.load(open(os.path.join(a.model, "config.json")))
    a.vocab = min(cfg["vocab_size"], 256)  # ids every codec turns into text
    a.context = cfg.get("max_position_embeddings", 2048)
    argv = [os.path.join(a.bin, "mhla-server"), "--model", a.model, "--port", "0",
            "--itl-target-ms", str(a.itl_target_ms)] + shlex.split(a.server_args)
    proc = server_proc.start_logged(argv, a.log)
    port, why = server_proc.listening_port(proc, a.log, 600)
    if port is None:
        server_proc.stop(proc, 10)
        sys.exit("server did not start: " + why)
    listening = next(json.loads(l) for l in open(a.log) if '"event":"listening"' in l)
    load = Load(a, port)
    try:
        threads = [threading.Thread(target=load.streamer, args=(k,)) for k in range(a.streams)]
        threads.append(threading.Thread(target=load.arrivals))
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        m = metrics(port)
    finally:
        server_proc.stop(proc, 30)
    gaps = [g * 1e3 for _, g in load.gaps]
    res = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "model": a.model, "device": listening.get("device"), "cpu_isa": listening.get("cpu_isa"),
        "weights": listening.get("weights"), "itl_target_ms": a.itl_target_ms,
        "server_args": a.server_args, "streams": a.streams, "rate": a.rate,
        "duration_s": a.duration, "stream_gaps": len(gaps),
        "itl_ms": {"p50": pct(gaps, 50), "p99": pct(gaps, 99), "max": max(gaps, default=0)},
        "stall_ratio": max(gaps, default=0) / pct(gaps, 50) if gaps else float("nan"),
        "ttft_ms": {k: {"n": len(v), "p50": pct(v, 50) * 1e3, "p99": pct(v, 99) * 1e3,
                        "max": max(v, default=0) * 1e3} for k, v in load.ttft.items()},
        "step_cost_ms": {p: m.get('mhla_step_cost_seconds{part="%s"}' % p, 0) * 1e3
                         for p in ("fixed", "per_decode_row", "per_prefill_token")},
        "errors": len(load.errors),
    }
    print("model %s (%s weights, %s), --itl-target-ms %d %s" %
          (a.model, res["weights"], res["device"], a.itl_target_ms, a.server_args))
    print("streams' ITL over %d gaps: p50 %.1f ms, p99 %.1f ms, max %.1f ms (max/p50 %.1f)" %
          (len(gaps), res["itl_ms"]["p50"], res["itl_ms"]["p99"], res["itl_ms"]["max"],
           res["stall_ratio"]))
    for k in ("short", "long"):
        t = res["ttft_ms"][k]
        print("TTFT %-5s (%d): p50 %.0f ms, p99 %.0f ms, max %.0f ms" %
              (k, t["n"], t["p50"], t["p99"], t["max"]))
    c = res["step_cost_ms"]
    print("learned costs: fixed %.3f ms, per decode row %.4f ms, per prompt token %.4f ms; "
          "errors %d" % (c["fixed"], c["per_decode_row"], c["per_prefill_token"], res["errors"]))
    if a.json:
        with open(a.json, "a") as f:
            f.write(json.dumps(res) + "\n")
    return 1 if load.errors else 0


if __name__ == "__main__":
    sys.exit(main())
