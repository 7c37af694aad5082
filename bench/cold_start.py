#!/usr/bin/python3
"""Cold start of the step planner: one stream, then a long prompt, on a fresh server.

Each run starts mhla-server afresh (nothing learned yet) on MODEL with --server-args, and
  1. streams one greedy completion (return_token_ids, so each chunk's tokens are known);
  2. after the stream's --after-th token, sends one --prompt-tokens-token prompt (random
     ids, max_tokens 1) and times its first token (TTFT beside the stream);
  3. reads the stream on until 20 tokens after that first token, then closes it;
  4. sends another prompt of the same length (other ids: no prefix cache hit) with nothing
     else running and times it (prefill alone, on the now warm server), twice.
It reports the stream's median and largest gap between chunks (wall clock at the client,
a chunk's arrival minus the previous one's), the largest gap over --itl-target-ms, the
long prompt's TTFT over its prefill alone, the load average, and, from the server's debug
step log, where the time went while the long prompt prefilled: the decode-only steps'
median, the steps beside the stream (how many, their prompt tokens, the first chunks, the
largest step and its ratio to the decode-only median: a measure a busy machine inflates
less than the absolute gaps), and each kind's share of the time. --busy N runs N busy loops (`while :; do :; done`) during the runs.
One JSON line per run goes to --json.

usage: bench/cold_start.py --model DIR [--bin build/bin] [--server-args "--weights bf16"]
                           [--itl-target-ms 100] [--prompt-tokens 1000] [--after 10]
                           [--runs 3] [--busy 0] [--json FILE] [--steps]
"""
import argparse
import http.client
import json
import os
import random
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "tools"))
import server_proc  # noqa: E402


def post(port, body, timeout=600):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    if r.status != 200:
        raise RuntimeError("HTTP %d: %s" % (r.status, data[:200]))
    return json.loads(data)


def timed_prompt(port, ids):
    t0 = time.time()
    post(port, {"prompt": ids, "max_tokens": 1})
    return time.time() - t0


def stream(port, after, on_after, done):
    """Streams a greedy completion; calls on_after() at its after-th token, stops 20 tokens
    after done() turns true. Returns [(arrival time, tokens in the chunk)]."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    body = {"prompt": "Once upon a time", "max_tokens": 1900, "temperature": 0,
            "ignore_eos": True, "stream": True, "return_token_ids": True}
    c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    chunks, tokens, tail = [], 0, None
    while True:
        line = r.fp.readline()
        if not line or line.startswith(b"data: [DONE]"):
            break
        if not line.startswith(b"data: "):
            continue
        t = time.time()
        ch = json.loads(line[6:])["choices"]
        k = len(ch[0].get("token_ids") or []) if ch else 0
        if k == 0:
            continue
        chunks.append((t, k))
        before, tokens = tokens, tokens + k
        if before < after <= tokens:
            on_after()
        if tail is None and done():
            tail = tokens + 20
        if tail is not None and tokens >= tail:
            break
    c.close()
    return chunks


def steps_in(log, t_from, t_to):
    """The server's step records (--log-level debug) between t_from and t_to:
    [(decode rows, prompt tokens, ms, predicted ms, process CPU ms or None, threads taking
    part or None, the thread pool's reductions so far or None)] (the last three where the
    log has them)."""
    out = []
    for line in open(log, errors="replace"):
        if '"event":"step"' not in line:
            continue
        rec = json.loads(line)
        if not t_from <= rec["ts"] <= t_to + 0.002:
            continue
        w = rec["message"].replace("(", " ").replace(";", " ").split()
        field = {w[i]: w[i + 1] for i in range(len(w) - 1)}  # "name value" pairs
        cpu, thr, red = field.get("cpu"), field.get("threads_active"), field.get(
            "thread_reductions")
        out.append((int(field["decode_rows"]), int(field["prefill_tokens"]),
                    float(field["took"]), float(field["predicted"]),
                    float(cpu) if cpu else None, int(thr) if thr else None,
                    int(red) if red else None))
    return out


def where_time_goes(steps, all_steps):
    """While the prompt prefilled: the steps beside the stream (their count, tokens,
    largest time, largest over the median decode-only step of the whole run), the share of
    the time in each kind, and the first chunks beside the stream. Where the log has CPU
    times, the largest step beside the stream is also split into its planned part (its
    predicted time) and the rest, and its CPU time (every thread's) over its wall time is
    set beside the decode-only steps': a step that did the planned work but whose threads
    waited for a CPU has a lower ratio than they do."""
    dec = [x[2] for x in steps if x[0] > 0 and x[1] == 0]
    dec_all = [x for x in all_steps if x[0] > 0 and x[1] == 0]
    dec_ms = [x[2] for x in dec_all] or dec
    mix = [x for x in steps if x[0] > 0 and x[1] > 0]
    total = sum(x[2] for x in steps) or 1.0
    d50 = statistics.median(dec_ms) if dec_ms else float("nan")
    top = max(mix, key=lambda x: x[2], default=None)
    top_ms = top[2] if top else 0.0
    res = {"decode_only_steps": len(dec), "decode_only_p50_ms": d50,
           "mixed_steps": len(mix), "mixed_tokens_mean": statistics.mean(x[1] for x in mix)
           if mix else 0, "mixed_max_ms": top_ms,
           "mixed_max_over_decode": top_ms / d50 if dec_ms else 0,
           "time_share_decode_only": sum(dec) / total,
           "time_share_mixed": sum(x[2] for x in mix) / total,
           "first_chunks": [x[1] for x in mix[:8]],
           "first_steps_ms": [round(x[2], 1) for x in mix[:8]]}
    if top and top[4] is not None:
        dec_par = [x[4] / x[2] for x in dec_all if x[4] is not None and x[2] > 0]
        res.update({"mixed_max_tokens": top[1], "mixed_max_predicted_ms": top[3],
                    "mixed_max_cpu_ms": top[4], "mixed_max_threads": top[5],
                    "mixed_max_cpu_over_wall": top[4] / top[2] if top[2] > 0 else 0,
                    "decode_only_cpu_over_wall": statistics.median(dec_par) if dec_par else 0,
                    "mixed_one_thread": sum(1 for x in mix if x[5] == 1),
                    "thread_reductions": steps[-1][6] - steps[0][6] if steps[0][6] is not None
                    else 0,
                    "mixed_over_predicted": [round(x[2] / x[3], 2) if x[3] > 0 else None
                                             for x in mix]})
    return res


def one_run(a, work, k):
    log = os.path.join(work, "server%d.log" % k)
    argv = [os.path.join(a.bin, "mhla-server"), "--model", a.model, "--port", "0",
            "--itl-target-ms", str(a.itl_target_ms), "--log-level", "debug"]
    argv += shlex.split(a.server_args)
    proc = server_proc.start_logged(argv, log)
    port, why = server_proc.listening_port(proc, log, 600)
    if port is None:
        server_proc.stop(proc, 10)
        sys.exit("server did not start: " + why)
    rng = random.Random(7 + k)
    vocab = json.load(open(os.path.join(a.model, "config.json")))["vocab_size"]
    ids = lambda: [rng.randrange(3, vocab) for _ in range(a.prompt_tokens)]  # noqa: E731
    long_ids, alone_ids = ids(), [ids(), ids()]
    st = {}

    def long_req():
        st["t_submit"] = time.time()
        post(port, {"prompt": long_ids, "max_tokens": 1})
        st["t_first"] = time.time()

    th = threading.Thread(target=long_req)
    load0 = os.getloadavg()[0]
    try:
        chunks = stream(port, a.after, th.start, lambda: "t_first" in st)
        th.join()
        alone = [timed_prompt(port, x) for x in alone_ids]
    finally:
        server_proc.stop(proc, 30)
    load1 = os.getloadavg()[0]
    listening = next((json.loads(x) for x in open(log) if '"event":"listening"' in x), {})
    gaps = [(b[0] - p[0], b[0]) for p, b in zip(chunks, chunks[1:])]
    ttft = st["t_first"] - st["t_submit"]
    during = [g for g, t in gaps if st["t_submit"] <= t <= st["t_first"] + 0.001]
    before = [g for g, t in gaps if t < st["t_submit"]][1:]  # the first follows the prefill
    res = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "server_args": a.server_args, "itl_target_ms": a.itl_target_ms, "busy": a.busy,
        "bin": a.bin, "device": listening.get("device"), "cpu_isa": listening.get("cpu_isa"),
        "loadavg_1m": [round(load0, 2), round(load1, 2)],
        "gap_p50_ms": statistics.median(g for g, _ in gaps) * 1e3,
        "gap_p50_before_ms": statistics.median(before) * 1e3 if before else 0.0,
        "gap_max_ms": max(g for g, _ in gaps) * 1e3,
        "gap_max_during_ms": max(during, default=0.0) * 1e3,
        "ttft_ms": ttft * 1e3, "alone_ms": [x * 1e3 for x in alone],
    }
    res.update(where_time_goes(steps_in(log, st["t_submit"], st["t_first"]),
                               steps_in(log, 0, float("inf"))))
    res["gap_max_over_target"] = res["gap_max_ms"] / a.itl_target_ms
    res["ttft_over_alone"] = ttft / min(alone)
    if a.steps:
        for line in open(log):
            if '"step"' in line and "decode_rows" in line:
                print("   ", line.strip()[:300])
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build/bin")
    ap.add_argument("--model", required=True)
    ap.add_argument("--server-args", default="--weights bf16")
    ap.add_argument("--itl-target-ms", type=int, default=100)
    ap.add_argument("--prompt-tokens", type=int, default=1000)
    ap.add_argument("--after", type=int, default=10)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--busy", type=int, default=0, help="busy loops during the runs")
    ap.add_argument("--json", default=None)
    ap.add_argument("--steps", action="store_true", help="print the server's step log")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="cold_start_")
    busy = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(a.busy)]
    try:
        time.sleep(1 if busy else 0)
        for k in range(a.runs):
            r = one_run(a, work, k)
            print("run %d (load %.2f-%.2f, %d busy loops): stream gap p50 %.1f ms, max %.1f ms "
                  "(%.2fx the %d ms target; max while the prompt prefilled %.1f ms); "
                  "%d-token prompt TTFT %.0f ms beside the stream, %s ms alone (%.2fx)" %
                  (k, r["loadavg_1m"][0], r["loadavg_1m"][1], a.busy, r["gap_p50_ms"],
                   r["gap_max_ms"], r["gap_max_over_target"], a.itl_target_ms,
                   r["gap_max_during_ms"], a.prompt_tokens, r["ttft_ms"],
                   "/".join("%.0f" % x for x in r["alone_ms"]), r["ttft_over_alone"]),
                  flush=True)
            print("  while it prefilled: %d steps beside the stream (%.1f prompt tokens each, the "
                  "first %s, taking %s ms), the largest %.0f ms = %.1f x the %.1f ms median of "
                  "the decode-only steps (%d of them while it prefilled); %.0f %% of the time in steps beside the stream" %
                  (r["mixed_steps"], r["mixed_tokens_mean"], r["first_chunks"],
                   r["first_steps_ms"], r["mixed_max_ms"], r["mixed_max_over_decode"],
                   r["decode_only_p50_ms"], r["decode_only_steps"], 100 * r["time_share_mixed"]),
                  flush=True)
            if "mixed_max_cpu_ms" in r:
                print("  the largest: %d prompt tokens, predicted %.0f ms, took %.0f ms, CPU %.0f ms "
                      "on %d threads (CPU/wall %.2f; decode-only steps' median %.2f); %d steps "
                      "beside the stream on 1 thread, %d thread reductions; they took x their "
                      "prediction: %s" %
                      (r["mixed_max_tokens"], r["mixed_max_predicted_ms"], r["mixed_max_ms"],
                       r["mixed_max_cpu_ms"], r["mixed_max_threads"], r["mixed_max_cpu_over_wall"],
                       r["decode_only_cpu_over_wall"], r["mixed_one_thread"],
                       r["thread_reductions"], r["mixed_over_predicted"]), flush=True)
            if a.json:
                with open(a.json, "a") as f:
                    f.write(json.dumps(r) + "\n")
    finally:
        for p in busy:
            p.kill()
            p.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
