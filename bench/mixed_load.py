#!/usr/bin/python3
"""Mixed load for the step time budget: streams decoding while long prompts arrive.

Starts build/bin/mhla-server on MODEL with --itl-target-ms TARGET (0: the token budget
alone, the behaviour before the time budget) and runs two build/bin/mhla-bench beside each
other for --duration seconds:
  - the streams: a closed loop of --streams requests (32-token prompts, --stream-tokens
    tokens of output each, streamed), whose inter-token gaps are what a reader sees;
  - the arrivals: an open loop, Poisson at --rate requests per second, of prompts given as
    token ids (any model, a byte-level stand-in included): --long-share of them 1,000-2,000
    tokens long, the others 16-128, each asking for 4 tokens.

Reports the streams' inter-token latency p50, p99, max and max / p50 (mhla-bench's: a
chunk that carries k tokens counts as k gaps of a k-th of its wait each), the TTFT of the
short and the long arrivals (p50, p99, max, from mhla-bench's per-request samples) and the
server's learned step costs from /metrics. One JSON line with every figure goes to --json.

usage: bench/mixed_load.py [--bin build/bin] [--model models/brown-mhla] [--itl-target-ms N]
                           [--server-args "--weights bf16"] [--duration 60] [--json FILE]
"""
import argparse
import json
import os
import random
import shlex
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "tools"))
import server_metrics  # noqa: E402
import server_proc  # noqa: E402


def pct(v, p):
    if not v:
        return float("nan")
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


def arrival_prompts(a, path):
    """The arrivals' prompts (mhla-bench --prompts): token ids, 1 in --long-share long."""
    rng = random.Random(7)
    with open(path, "w") as f:
        for _ in range(200):
            n = rng.randint(1000, 2000) if rng.random() < a.long_share else rng.randint(16, 128)
            n = min(n, a.context - 8)
            f.write(json.dumps({"prompt": [rng.randrange(1, a.vocab) for _ in range(n)],
                                "max_tokens": 4}) + "\n")


def bench(a, url, extra, out_json):
    return subprocess.Popen([os.path.join(a.bin, "mhla-bench"), "--url", url, "--duration",
                             str(a.duration), "--warmup", str(a.warmup), "--no-progress",
                             "--json", out_json] + extra,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def hist_tail(m, name):
    """From a /metrics histogram: (count, the bucket bound under which every observation
    falls, the bucket bound under which 99 % fall), bounds in ms."""
    b = sorted((float(k.split('le="')[1].split('"')[0]), v) for k, v in m.items()
               if k.startswith(name + "_bucket{"))
    n = m.get(name + "_count", 0)
    top = next((le for le, c in b if c >= n), float("inf"))
    p99 = next((le for le, c in b if c >= 0.99 * n), float("inf"))
    return n, top * 1e3, p99 * 1e3


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
    a = ap.parse_args()
    cfg = json.load(open(os.path.join(a.model, "config.json")))
    a.vocab = min(cfg["vocab_size"], 256)  # ids every codec turns into text
    a.context = cfg.get("max_position_embeddings", 2048)
    work = tempfile.mkdtemp(prefix="mixed_load_")
    arrival_prompts(a, os.path.join(work, "arrivals.jsonl"))
    log = os.path.join(work, "server.log")
    argv = [os.path.join(a.bin, "mhla-server"), "--model", a.model, "--port", "0",
            "--itl-target-ms", str(a.itl_target_ms)] + shlex.split(a.server_args)
    proc = server_proc.start_logged(argv, log)
    port, why = server_proc.listening_port(proc, log, 600)
    if port is None:
        server_proc.stop(proc, 10)
        sys.exit("server did not start: " + why)
    listening = next(json.loads(l) for l in open(log) if '"event":"listening"' in l)
    url = "http://127.0.0.1:%d" % port
    try:
        streams = bench(a, url, ["--concurrency", str(a.streams), "--input-len", "32",
                                 "--output-len", str(a.stream_tokens), "--temperature", "0.8"],
                        os.path.join(work, "streams.json"))
        arrivals = bench(a, url, ["--rate", str(a.rate), "--arrivals", "poisson", "--prompts",
                                  os.path.join(work, "arrivals.jsonl"), "--samples",
                                  os.path.join(work, "arrivals_samples.jsonl")],
                         os.path.join(work, "arrivals.json"))
        out_s, out_a = streams.communicate()[0], arrivals.communicate()[0]
        m = server_metrics.fetch(port, 60)
    finally:
        server_proc.stop(proc, 30)
    if streams.returncode or arrivals.returncode:
        sys.stdout.write(out_s.decode() + out_a.decode())
    lv = json.load(open(os.path.join(work, "streams.json")))["levels"][0]
    samples = [json.loads(l) for l in open(os.path.join(work, "arrivals_samples.jsonl"))]
    ttft = {"short": [x["ttft_ms"] for x in samples if x["ok"] and x["input_tokens"] < 1000],
            "long": [x["ttft_ms"] for x in samples if x["ok"] and x["input_tokens"] >= 1000]}
    itl = lv["itl_ms"]
    res = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "model": a.model, "device": listening.get("device"), "cpu_isa": listening.get("cpu_isa"),
        "text_codec": listening.get("text_codec"), "weights": listening.get("weights"),
        "itl_target_ms": a.itl_target_ms, "server_args": a.server_args, "streams": a.streams,
        "rate": a.rate, "duration_s": a.duration,
        "itl_ms": {"n": itl["n"], "p50": itl["p50"], "p99": itl["p99"], "max": itl["max"]},
        "stall_ratio": itl["max"] / itl["p50"] if itl["p50"] else float("nan"),
        "ttft_ms": {k: {"n": len(v), "p50": pct(v, 50), "p99": pct(v, 99),
                        "max": max(v, default=0)} for k, v in ttft.items()},
        "stream_tokens_per_s": lv["output_token_throughput"],
        "step_cost_ms": {p: m.get('mhla_step_cost_seconds{part="%s"}' % p, 0) * 1e3
                         for p in ("fixed", "per_decode_row", "per_prefill_token")},
        "server_steps": hist_tail(m, "mhla_engine_step_seconds"),
        "server_itl": hist_tail(m, "mhla_inter_token_latency_seconds"),
        "failed": lv["failed"] + sum(1 for x in samples if not x["ok"]),
    }
    print("model %s (%s weights, %s, %s), --itl-target-ms %d %s" %
          (a.model, res["weights"], res["device"], res["text_codec"], a.itl_target_ms,
           a.server_args))
    print("streams' ITL over %d gaps: p50 %.1f ms, p99 %.1f ms, max %.1f ms (max/p50 %.1f); "
          "%.0f tokens/s" % (itl["n"], itl["p50"], itl["p99"], itl["max"], res["stall_ratio"],
                             res["stream_tokens_per_s"]))
    for k in ("short", "long"):
        t = res["ttft_ms"][k]
        print("TTFT %-5s (%d): p50 %.0f ms, p99 %.0f ms, max %.0f ms" %
              (k, t["n"], t["p50"], t["p99"], t["max"]))
    for k, what in (("server_steps", "engine steps"), ("server_itl", "token gaps")):
        n, top, p99 = res[k]
        print("server side, %d %s: 99 %% within %g ms, all within %g ms (/metrics buckets)" %
              (n, what, p99, top))
    c = res["step_cost_ms"]
    print("learned costs: fixed %.3f ms, per decode row %.4f ms, per prompt token %.4f ms; "
          "failed requests %d" % (c["fixed"], c["per_decode_row"], c["per_prefill_token"],
                                  res["failed"]))
    if a.json:
        with open(a.json, "a") as f:
            f.write(json.dumps(res) + "\n")
    return 1 if res["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
