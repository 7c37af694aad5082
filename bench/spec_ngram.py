#!/usr/bin/python3
"""Prompt-lookup speculation against plain decoding, one sitting, alternating.

Starts two build/bin/mhla-server on MODEL, one with --speculate off and one with
--speculate ngram (same flags otherwise), and for each task and batch size B sends B
concurrent greedy completions, rounds times, alternating the two servers, and reports the
decode tokens/s of each and their ratio (ngram / off), with the machine's load average.

Tasks:
  copy    the prompt holds a ~1,000-token text (train/val_excerpt.ids, rotated per request
          so that no two share a prefix) followed by its first 32 tokens again: the
          continuation repeats the text, which prompt lookup drafts;
  random  1,000 random token ids, sampled at temperature 1 (seeded): nothing to copy,
          neither in the prompt nor in the output (greedy output of a small model loops,
          which prompt lookup would copy).

Besides wall-clock tokens/s, the server processes' CPU time (user + system, from
/proc/PID/stat) per generated token is compared: on a shared machine whose other jobs take
the cores, the wall clock moves with them and the CPU time much less.

Each prompt is sent once with max_tokens 1 first, so that the measured request finds it in
the prefix cache (and resume store) and the time measured is decode's. Every measured pair
of outputs is compared: the two servers must give the same tokens (greedy; the bitwise
tests cover sampling).

usage: bench/spec_ngram.py [--bin build/bin] [--model models/brown-mhla] [--batches 1,4,16]
                           [--tokens 256] [--rounds 3] [--server-args "--weights bf16"]
                           [--json FILE]
"""
import argparse
import json
import os
import random
import shlex
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "tools"))
import server_proc  # noqa: E402


def post(port, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions",
                                 data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=3600) as r:
        return json.load(r)


def batch(port, prompts, tokens, temperature):
    """B concurrent requests; returns (generated tokens, seconds, texts)."""
    out = [None] * len(prompts)

    def one(i):
        out[i] = post(port, {"prompt": prompts[i], "max_tokens": tokens, "ignore_eos": True,
                             "temperature": temperature, "seed": 1234 + i})

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(prompts))]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    dt = time.perf_counter() - t0
    n = sum(o["usage"]["completion_tokens"] for o in out)
    return n, dt, [o["choices"][0]["text"] for o in out]


def cpu_seconds(pid):
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def prompts_of(task, b, vocab, excerpt, seed):
    rng = random.Random(seed)
    ps = []
    for i in range(b):
        if task == "copy":
            k = (i * 97) % len(excerpt)
            text = (excerpt[k:] + excerpt[:k])[:1000]
            ps.append(text + text[:32])
        else:
            ps.append([rng.randrange(vocab) for _ in range(1000)])
    return ps


def start(args, mode, work):
    log = os.path.join(work, f"server_{mode}.log")
    argv = [os.path.join(args.bin, "mhla-server"), "--model", args.model, "--port", "0",
            "--speculate", mode, "--max-running", "64", *shlex.split(args.server_args)]
    proc = server_proc.start_logged(argv, log)
    return proc, server_proc.listening_port(proc, log, 300)[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build/bin")
    ap.add_argument("--model", default="models/brown-mhla")
    ap.add_argument("--batches", default="1,4,16")
    ap.add_argument("--tasks", default="copy,random")
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--server-args", default="")
    ap.add_argument("--json")
    args = ap.parse_args()
    vocab = json.load(open(os.path.join(args.model, "config.json")))["vocab_size"]
    excerpt = [int(x) % vocab for x in
               open(os.path.join(HERE, "..", "train", "val_excerpt.ids")).read().split()]
    work = tempfile.mkdtemp(prefix="spec_ngram_")
    servers = {m: start(args, m, work) for m in ("off", "ngram")}
    rows = []
    try:
        for task in args.tasks.split(","):
            for b in [int(x) for x in args.batches.split(",")]:
                temp = 0.0 if task == "copy" else 1.0
                res = {"off": [0, 0.0], "ngram": [0, 0.0]}
                cpu = {"off": [0, 0.0], "ngram": [0, 0.0]}
                ratios = []
                for rnd in range(args.rounds):
                    ps = prompts_of(task, b, vocab, excerpt, 1000 * rnd + b)
                    texts, rate = {}, {}
                    for mode in (("off", "ngram") if rnd % 2 == 0 else ("ngram", "off")):
                        port = servers[mode][1]
                        batch(port, ps, 1, temp)  # the prompts into the prefix cache
                        c0 = cpu_seconds(servers[mode][0].pid)
                        n, dt, texts[mode] = batch(port, ps, args.tokens, temp)
                        cpu[mode][0] += n
                        cpu[mode][1] += cpu_seconds(servers[mode][0].pid) - c0
                        res[mode][0] += n
                        res[mode][1] += dt
                        rate[mode] = n / dt
                    if texts["off"] != texts["ngram"]:
                        sys.exit(f"{task} batch {b}: the outputs differ between off and ngram")
                    ratios.append(rate["ngram"] / rate["off"])
                tps = {m: res[m][0] / res[m][1] for m in res}
                ratios.sort()
                row = {"task": task, "batch": b, "off_tok_s": round(tps["off"], 1),
                       "ngram_tok_s": round(tps["ngram"], 1),
                       "ratio_median": round(ratios[len(ratios) // 2], 3),
                       "ratio_min": round(ratios[0], 3), "ratio_max": round(ratios[-1], 3),
                       "cpu_ratio": round((cpu["off"][1] / cpu["off"][0]) /
                                          (cpu["ngram"][1] / cpu["ngram"][0]), 3),
                       "loadavg": os.getloadavg()[0]}
                print(json.dumps(row), flush=True)
                rows.append(row)
        for mode, (proc, port) in servers.items():
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics") as r:
                for line in r.read().decode().splitlines():
                    if line.startswith("mhla_spec_") or line.startswith("mhla_cpu_isa_info"):
                        print(mode, line)
    finally:
        for proc, _ in servers.values():
            server_proc.stop(proc, 10)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f)


if __name__ == "__main__":
    main()
