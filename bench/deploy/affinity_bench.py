#!/usr/bin/env python3
"""Prefix-affinity routing vs round robin through HAProxy (deploy/local-cluster.sh).

A workload of G groups x R requests whose prompts share a P-token prefix per group (with
distinct S-token suffixes), in shuffled order, is sent by mhla-bench (closed loop at
--concurrency) through a fresh 3-replica cluster, once with HAProxy hashing the prompt's
prefix and once with round robin. Printed per mode: TTFT and end-to-end p50/p99 (from
mhla-bench), requests/s, and the prompt tokens the replicas computed and took from their
prefix caches (their /metrics, summed).

  bench/deploy/affinity_bench.py --bin build/bin [--groups 16 --per-group 8 --concurrency 4]
"""
import argparse
import json
import os
import random
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "deploy"))
import test_cluster as tc  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "brown-mhla"))
    ap.add_argument("--work", default="/tmp/mhla-affinity-bench")
    ap.add_argument("--groups", type=int, default=16)
    ap.add_argument("--per-group", type=int, default=8)
    ap.add_argument("--prefix", type=int, default=1000)
    ap.add_argument("--suffix", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--json", help="write the results here")
    a = ap.parse_args()
    a.bin, a.model = os.path.abspath(a.bin), os.path.abspath(a.model)
    os.makedirs(a.work, exist_ok=True)

    work = tc.affinity_workload(seed=a.seed, groups=a.groups, per_group=a.per_group,
                                prefix=a.prefix, suffix=a.suffix)
    prompts = os.path.join(a.work, "prompts.jsonl")
    with open(prompts, "w") as f:
        for _, ids in work:
            f.write(json.dumps({"prompt": ids, "max_tokens": a.max_tokens}) + "\n")
    n = len(work)
    results = {}
    for balance in ("hash", "roundrobin"):
        cl = tc.Cluster(a, "bench-" + balance, balance=balance)
        try:
            cl.up()
            before = [tc.metrics(cl.port(k)) for k in range(1, tc.REPLICAS + 1)]
            js = os.path.join(a.work, balance + ".json")
            p = subprocess.run([os.path.join(a.bin, "mhla-bench"), "--url", cl.url, "--prompts",
                                prompts, "--concurrency", str(a.concurrency), "--requests", str(n),
                                "--temperature", "0", "--json", js, "--no-progress"],
                               capture_output=True, text=True)
            print(p.stdout, end="")
            if p.returncode != 0:
                print(p.stderr, file=sys.stderr)
                return 1
            after = [tc.metrics(cl.port(k)) for k in range(1, tc.REPLICAS + 1)]
        finally:
            cl.down()
        lv = json.load(open(js))["levels"][0]
        prompt = sum(x["mhla_prompt_tokens_total"] - y["mhla_prompt_tokens_total"]
                     for x, y in zip(after, before))
        cached = sum(x["mhla_prompt_tokens_cached_total"] - y["mhla_prompt_tokens_cached_total"]
                     for x, y in zip(after, before))
        results[balance] = {
            "completed": lv["completed"], "failed": lv["failed"],
            "requests_per_s": lv["request_throughput"],
            "ttft_p50_ms": lv["ttft_ms"]["p50"], "ttft_p99_ms": lv["ttft_ms"]["p99"],
            "e2e_p50_ms": lv["e2e_ms"]["p50"], "e2e_p99_ms": lv["e2e_ms"]["p99"],
            "prompt_tokens": int(prompt), "cached_tokens": int(cached),
            "computed_tokens": int(prompt - cached)}
    print("\n%d requests (%d groups x %d, %d-token shared prefix + %d-token suffix, "
          "max_tokens %d), concurrency %d, 3 replicas" % (n, a.groups, a.per_group, a.prefix,
                                                          a.suffix, a.max_tokens, a.concurrency))
    print("%-11s %8s %9s %9s %9s %9s %10s %10s" % ("routing", "req/s", "TTFT p50", "TTFT p99",
                                                   "E2E p50", "E2E p99", "computed", "cached"))
    for b, r in results.items():
        print("%-11s %8.2f %9.1f %9.1f %9.1f %9.1f %10d %10d" % (
            b, r["requests_per_s"], r["ttft_p50_ms"], r["ttft_p99_ms"], r["e2e_p50_ms"],
            r["e2e_p99_ms"], r["computed_tokens"], r["cached_tokens"]))
    h, rr = results["hash"], results["roundrobin"]
    print("hash / round robin: computed prompt tokens %.3f, TTFT p50 %.3f, p99 %.3f" % (
        h["computed_tokens"] / rr["computed_tokens"], h["ttft_p50_ms"] / rr["ttft_p50_ms"],
        h["ttft_p99_ms"] / rr["ttft_p99_ms"]))
    if a.json:
        json.dump(results, open(a.json, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
