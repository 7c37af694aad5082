#!/usr/bin/env python3
"""A stream's pace while another request's prefix loads from the disk tier.

A server starts on a tier directory that holds a long prompt's blocks (written by
bench_state_disk.py's TTFT part: its first prompt, the same random ids). A short prompt
streams; after --lead of its steps, the long prompt is sent (max_tokens 1) and loads from disk.
Reported (from the server's debug step records, as a stream's events may hold tokens back
until their text is whole): the median time between the stream's decode steps before the
load, the largest while the long request was in the server, the load's own time (mhla_state_disk_load_seconds_total) and the long
request's TTFT. With the load on the engine thread, the largest gap holds the whole load.

usage: bench_load_stall.py --bin BUILD/bin --model CKPT --tier DIR [--prompt 2000]
Prints one JSON line.
"""
import argparse
import http.client
import json
import os
import random
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tests", "tools"))
import server_metrics  # noqa: E402
import server_proc  # noqa: E402
import sse  # noqa: E402


ap = argparse.ArgumentParser(description=__doc__)
ap.add_argument("--bin", required=True)
ap.add_argument("--model", required=True)
ap.add_argument("--tier", required=True)
ap.add_argument("--prompt", type=int, default=2000)
ap.add_argument("--lead", type=int, default=12)
ap.add_argument("--stream", type=int, default=60)
ap.add_argument("--log", default="/tmp/bench_load_stall.log")
a = ap.parse_args()
VOCAB = json.load(open(os.path.join(a.model, "config.json")))["vocab_size"]
rng = random.Random(1)  # bench_state_disk.py's: its first prompt is this one
LONG = [rng.randrange(1, VOCAB) for _ in range(a.prompt)]
_r2 = random.Random(2)
SHORT = [_r2.randrange(1, VOCAB) for _ in range(16)]


def post(port, body, on_tokens=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=3600)
    c.request("POST", "/v1/completions", json.dumps(dict(body, stream=True, temperature=0,
                                                          ignore_eos=True,
                                                          return_token_ids=True)),
              {"Content-Type": "application/json"})
    t0, first = time.time(), None
    for ev in sse.events(c.getresponse()):
        ch = ev.get("choices") or [{}]
        n = len(ch[0].get("token_ids") or [])
        if n and first is None:
            first = time.time() - t0
        if n and on_tokens:
            on_tokens(n)
    return first


def decode_steps():
    """When each step that decoded a row ended (the server's debug step records)."""
    return [json.loads(x)["ts"] for x in open(a.log) if '"event":"step"' in x
            and '"message":"decode_rows 0 ' not in x]


def longest_step(t0, t1):
    """The longest step (any: decode rows, prompt tokens) that ended in [t0, t1], its
    forward time in seconds."""
    took = [0.0]
    for x in open(a.log):
        if '"event":"step"' in x:
            rec = json.loads(x)
            if t0 <= rec["ts"] <= t1 + 0.002:
                took.append(float(rec["message"].split(" took ")[1].split()[0]) / 1000)
    return max(took)


argv = [os.path.join(a.bin, "mhla-server"), "--model", a.model, "--port", "0", "--device",
        "cpu", "--threads", "2", "--weights", "bf16", "--state-memory", "3072",
        "--state-dir", a.tier, "--speculate", "off", "--log-level", "debug"]
proc = server_proc.start_logged(argv, a.log)
port, why = server_proc.listening_port(proc, a.log, 600)
if port is None:
    sys.exit("the server did not start: %s" % why)
try:
    post(port, {"prompt": SHORT[:4], "max_tokens": 2})  # first-touch costs
    t = threading.Thread(target=post, args=(port, {"prompt": SHORT, "max_tokens": a.stream}))
    t.start()
    while len(decode_steps()) < a.lead and t.is_alive():
        time.sleep(0.01)
    t0 = time.time()
    ttft = post(port, {"prompt": LONG, "max_tokens": 1})
    t1 = time.time()
    t.join()
    m = server_metrics.fetch(port, 60)
    # the stream's steps, from the server's step records (the client's events may hold
    # tokens back until their text is whole): the gaps between decode steps' ends
    steps = decode_steps()
    before = [y - x for x, y in zip(steps, steps[1:]) if y < t0]
    during = [y - x for x, y in zip(steps, steps[1:]) if y >= t0 and x <= t1]
    print(json.dumps({
        "binary": a.bin, "load_avg": os.getloadavg(),
        "stream_gap_median_before_s": statistics.median(before[1:]) if len(before) > 1 else None,
        "stream_gap_max_during_s": max(during) if during else None,
        "stream_steps_during": len(during),
        "stream_gaps_during_top3_s": sorted(during)[-3:],
        "longest_step_during_s": longest_step(t0, t1),
        "disk_load_s": m.get("mhla_state_disk_load_seconds_total"),
        "disk_hits": m.get("mhla_state_disk_hits_total"),
        "long_ttft_s": ttft, "long_in_server_s": t1 - t0}))
finally:
    server_proc.stop(proc, 120)
