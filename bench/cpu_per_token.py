#!/usr/bin/python3
"""CPU time per decoded token of mhla-generate, weight formats alternated round by round.

On a shared machine the wall clock of a decode counts the time other work held the CPU;
the process's CPU time (getrusage of the child) does not. For each round and format:
mhla-generate with --max-tokens 0 (load and prompt) and with --max-tokens N (--ignore-eos);
the difference over N is the CPU time (user + system) and the wall time a decoded token
cost. Prints one row per round and format with both, against the round's first format,
and the load average.

usage: bench/cpu_per_token.py --bin build/bin --model DIR [--weights bf16,q8,q4]
       [--tokens 64] [--rounds 3] [--threads 1] [--prompt-ids 1,2,3,4]
"""
import argparse
import os
import resource
import subprocess
import sys
import time


def run(cmd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        sys.exit("FAIL: %s: %s" % (" ".join(cmd), r.stderr.strip()[-800:]))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--weights", default="bf16,q8,q4")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", default="1")
    ap.add_argument("--prompt-ids", default="1,2,3,4")
    a = ap.parse_args()
    gen = os.path.join(a.bin, "mhla-generate")
    formats = a.weights.split(",")
    print("| round | weights | CPU ms / token | speed-up over %s | wall ms / token | speed-up over %s | load (1 min) |" %
          (formats[0], formats[0]))
    print("|---|---|---|---|---|---|---|")
    for r in range(1, a.rounds + 1):
        base = None
        for w in formats:
            load = os.getloadavg()[0]
            cmd = [gen, "--model", a.model, "--prompt-ids", a.prompt_ids, "--weights", w,
                   "--threads", a.threads, "--ignore-eos"]
            c0, w0 = run(cmd + ["--max-tokens", "0"])
            c1, w1 = run(cmd + ["--max-tokens", str(a.tokens)])
            cpu, wall = (c1 - c0) / a.tokens * 1e3, (w1 - w0) / a.tokens * 1e3
            base = base or (cpu, wall)
            print("| %d | %s | %.2f | %.2f | %.2f | %.2f | %.2f |" %
                  (r, w, cpu, base[0] / cpu, wall, base[1] / wall, load), flush=True)


if __name__ == "__main__":
    main()
