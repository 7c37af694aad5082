#!/usr/bin/python3
"""Decode-only steps of one greedy stream on busy cores, for several server builds or flags.

Starts BUSY busy loops (`while :; do :; done`, default 2), then for ROUNDS rounds starts a
fresh mhla-server for each CONFIG in turn (interleaved, so a change of the machine's load
lands on every config), streams NEW tokens of one greedy completion, and reads the server's
debug step log: each decode-only step's time, the process's CPU time over it, the engine
threads taking part at its end and the thread pool's reductions so far. Prints, per round
and config and over all rounds, the steps' median, 90th percentile and largest time, the
median CPU/wall, and how many steps ended with one thread taking part.

A CONFIG is server flags, optionally led by the path of another mhla-server binary:
  bench/busy_decode.py --model /tmp/m340 --rounds 3 \\
      "--speculate off" "--speculate off --thread-adapt off" "/tmp/old/mhla-server --speculate off"

usage: bench/busy_decode.py --model DIR [--bin build/bin] [--rounds 3] [--new 50] [--busy 2]
                            CONFIG...
"""
import argparse
import http.client
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "tools"))
import server_proc  # noqa: E402


def decode_steps(log):
    """[(ms, cpu ms, threads taking part, reductions so far)] of the decode-only steps."""
    out = []
    for line in open(log, errors="replace"):
        if '"event":"step"' not in line:
            continue
        w = json.loads(line)["message"].replace("(", " ").replace(";", " ").split()
        f = {w[i]: w[i + 1] for i in range(len(w) - 1)}
        if f["decode_rows"] == "1" and f["prefill_tokens"] == "0" and f["drafts"] == "0":
            out.append((float(f["took"]), float(f["cpu"]), int(f["threads_active"]),
                        int(f["thread_reductions"])))
    return out[2:]  # the first steps follow the start


def summary(rows):
    t = sorted(x[0] for x in rows)
    return "n %d p50 %.0f p90 %.0f max %.0f ms, CPU/wall %.2f, %d on 1 thread" % (
        len(t), statistics.median(t), t[int(0.9 * len(t))], t[-1],
        statistics.median(x[1] / x[0] for x in rows), sum(1 for x in rows if x[2] == 1))


def one(binary, flags, a, log):
    argv = [binary, "--model", a.model, "--port", "0", "--log-level", "debug",
            "--weights", "bf16"] + flags
    proc = server_proc.start_logged(argv, log)
    port, why = server_proc.listening_port(proc, log, 600)
    try:
        if port is None:
            sys.exit("server did not start: " + why)
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=3600)
        body = {"prompt": "Once upon a time", "max_tokens": a.new, "temperature": 0,
                "ignore_eos": True}
        c.request("POST", "/v1/completions", json.dumps(body),
                  {"Content-Type": "application/json"})
        c.getresponse().read()
    finally:
        server_proc.stop(proc, 30)
    return decode_steps(log)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--bin", default="build/bin")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--new", type=int, default=50)
    ap.add_argument("--busy", type=int, default=2)
    ap.add_argument("configs", nargs="+")
    a = ap.parse_args()
    cfgs = []
    for c in a.configs:
        w = shlex.split(c)
        lead = bool(w) and os.path.isfile(w[0])
        cfgs.append((w[0] if lead else os.path.join(a.bin, "mhla-server"), w[1:] if lead else w))
    work = tempfile.mkdtemp(prefix="busy_decode_")
    busy = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(a.busy)]
    every = [[] for _ in cfgs]
    try:
        time.sleep(1)
        for r in range(a.rounds):
            for i, (binary, flags) in enumerate(cfgs):
                rows = one(binary, flags, a, os.path.join(work, "s%d_%d.log" % (r, i)))
                every[i] += rows
                print("round %d, %s (load %.1f): %s" % (r, a.configs[i], os.getloadavg()[0],
                                                        summary(rows)), flush=True)
    finally:
        for p in busy:
            p.kill()
            p.wait()
    for i, c in enumerate(a.configs):
        print("all rounds, %s: %s" % (c, summary(every[i])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
