#!/usr/bin/python3
"""Speculative decoding against plain decoding, one sitting, interleaved.

Starts one build/bin/mhla-server on MODEL per mode of --modes (default off,ngram; draft
needs --draft-model DIR: --speculate draft with that draft model), same flags otherwise,
and for each task and batch size B sends B concurrent completions, rounds times, to each
server in turn (the order rotates every round), and reports the decode tokens/s of each,
their ratios to the first mode (wall clock and CPU time), each mode's acceptance rate over
the task (from /metrics), and the machine's load average.

Tasks:
  copy    the prompt holds a ~1,000-token text (train/val_excerpt.ids, rotated per request
          so that no two share a prefix) followed by its first 32 tokens again: the
          continuation repeats the text, which prompt lookup drafts;
  random  1,000 random token ids, sampled at temperature 1 (seeded): nothing to copy,
          neither in the prompt nor in the output (greedy output of a small model loops,
          which prompt lookup would copy).
  text    a 64-token stretch of the validation text (the model's own kind of text), greedy:
          what a draft model trained on the same data predicts (and greedy loops, which
          prompt lookup copies).

Besides wall-clock tokens/s, the server processes' CPU time (user + system, from
/proc/PID/stat) per generated token is compared: on a shared machine whose other jobs take
the cores, the wall clock moves with them and the CPU time much less.

Each prompt is sent once with max_tokens 1 first, so that the measured request finds it in
the prefix cache (and resume store) and the time measured is decode's. Every measured pair
of outputs is compared: the two servers must give the same tokens (greedy; the bitwise
tests cover sampling).

usage: bench/spec_ngram.py [--bin build/bin] [--model models/brown-mhla] [--batches 1,4,16]
                           [--tasks copy,random,text] [--modes off,ngram,draft]
                           [--draft-model DIR] [--tokens 256] [--rounds 3]
                           [--server-args "--weights bf16"] [--json FILE]
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
        elif task == "text":
            k = rng.randrange(len(excerpt) - 64)
            ps.append(excerpt[k:k + 64])
        else:
            ps.append([rng.randrange(vocab) for _ in range(1000)])
    return ps


def start(args, mode, work):
    log = os.path.join(work, f"server_{mode}.log")
    argv = [os.path.join(args.bin, "mhla-server"), "--model", args.model, "--port", "0",
            "--speculate", mode, "--max-running", "64", *shlex.split(args.server_args)]
    if mode == "draft":
        argv += ["--draft-model", args.draft_model]
    proc = server_proc.start_logged(argv, log)
    return proc, server_proc.listening_port(proc, log, 300)[0]


def spec_counts(port, mode):
    """(drafted, accepted) so far under mode's label."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics") as r:
        m = {}
        for line in r.read().decode().splitlines():
            if line.startswith("mhla_spec_") and ('mode="%s"' % mode) in line:
                k, v = line.rsplit(" ", 1)
                m[k.split("{")[0]] = float(v)
    return m.get("mhla_spec_draft_tokens_total", 0), m.get("mhla_spec_accepted_tokens_total", 0)


def measure(args, servers, task, b, vocab, excerpt):
    """One row: every mode's tokens/s over the rounds, its ratios to the first mode's
    (wall clock, CPU time) and its acceptance rate."""
    modes = list(servers)
    temp = 1.0 if task == "random" else 0.0
    res = {m: [0, 0.0, 0.0] for m in modes}  # tokens, seconds, CPU seconds
    ratios = {m: [] for m in modes}
    spec0 = {m: spec_counts(servers[m][1], m) for m in modes}
    for rnd in range(args.rounds):
        ps = prompts_of(task, b, vocab, excerpt, 1000 * rnd + b)
        texts, rate = {}, {}
        for mode in modes[rnd % len(modes):] + modes[:rnd % len(modes)]:
            proc, port = servers[mode]
            batch(port, ps, 1, temp)  # the prompts into the prefix cache
            c0 = cpu_seconds(proc.pid)
            n, dt, texts[mode] = batch(port, ps, args.tokens, temp)
            res[mode][0] += n
            res[mode][1] += dt
            res[mode][2] += cpu_seconds(proc.pid) - c0
            rate[mode] = n / dt
        for mode in modes:
            if texts[mode] != texts[modes[0]]:
                sys.exit(f"{task} batch {b}: the outputs differ between {modes[0]} and {mode}")
            ratios[mode].append(rate[mode] / rate[modes[0]])
    row = {"task": task, "batch": b, "loadavg": os.getloadavg()[0]}
    base_cpu = res[modes[0]][2] / res[modes[0]][0]
    for m in modes:
        r = sorted(ratios[m])
        row[m + "_tok_s"] = round(res[m][0] / res[m][1], 1)
        if m == modes[0]:
            continue
        d, a = (x - y for x, y in zip(spec_counts(servers[m][1], m), spec0[m]))
        row[m + "_ratio_median"] = round(r[len(r) // 2], 3)
        row[m + "_ratio_min"], row[m + "_ratio_max"] = round(r[0], 3), round(r[-1], 3)
        row[m + "_cpu_ratio"] = round(base_cpu / (res[m][2] / res[m][0]), 3)
        row[m + "_drafted"], row[m + "_accept"] = int(d), (round(a / d, 3) if d else None)
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build/bin")
    ap.add_argument("--model", default="models/brown-mhla")
    ap.add_argument("--batches", default="1,4,16")
    ap.add_argument("--tasks", default="copy,random")
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--modes", default="off,ngram", help="the first is the baseline")
    ap.add_argument("--draft-model", default="")
    ap.add_argument("--server-args", default="")
    ap.add_argument("--json")
    args = ap.parse_args()
    vocab = json.load(open(os.path.join(args.model, "config.json")))["vocab_size"]
    excerpt = [int(x) % vocab for x in
               open(os.path.join(HERE, "..", "train", "val_excerpt.ids")).read().split()]
    work = tempfile.mkdtemp(prefix="spec_ngram_")
    modes = args.modes.split(",")
    if "draft" in modes and not args.draft_model:
        sys.exit("--modes draft needs --draft-model DIR")
    servers = {m: start(args, m, work) for m in modes}
    rows = []
    try:
        for task in args.tasks.split(","):
            for b in [int(x) for x in args.batches.split(",")]:
                row = measure(args, servers, task, b, vocab, excerpt)
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
