#!/usr/bin/env python3
"""The state tier on disk (--state-dir), measured through mhla-server.

TTFT of a repeated prompt: cold (every token computed), from memory (the prefix cache),
and from disk after a restart — with the page files in the OS page cache (just written)
and evicted from it (posix_fadvise DONTNEED on the tier's files only). Then the tier's
write cost: prefill and decode throughput of distinct prompts (so every closed block is
written) with the tier on and off, alternating servers, several rounds.

usage: bench_state_disk.py --bin BUILD/bin --model CKPT --work DIR [--prompt 2000]
       [--rounds 3] [--threads 2] [--weights bf16]
Prints a table and one JSON line with every number.
"""
import argparse
import glob
import http.client
import json
import os
import random
import shutil
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tests", "tools"))
import server_metrics  # noqa: E402
import server_proc  # noqa: E402

ap = argparse.ArgumentParser(description=__doc__)
ap.add_argument("--bin", required=True)
ap.add_argument("--model", required=True)
ap.add_argument("--work", required=True)
ap.add_argument("--prompt", type=int, default=2000)
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--weights", default="bf16")
ap.add_argument("--prefill", type=int, default=1024)
ap.add_argument("--decode", type=int, default=96)
ap.add_argument("--only", choices=["ttft", "cost"], help="one part only")
a = ap.parse_args()
os.makedirs(a.work, exist_ok=True)
VOCAB = json.load(open(os.path.join(a.model, "config.json")))["vocab_size"]
rng = random.Random(1)


def ids(n):
    return [rng.randrange(1, VOCAB) for _ in range(n)]


class Server:
    def __init__(self, name, state_dir=None):
        argv = [os.path.join(a.bin, "mhla-server"), "--model", a.model, "--port", "0",
                "--device", "cpu", "--threads", str(a.threads), "--weights", a.weights,
                "--state-memory", "3072", "--max-running", "4"]
        if state_dir:
            argv += ["--state-dir", state_dir]
        self.log = os.path.join(a.work, name + ".log")
        self.proc = server_proc.start_logged(argv, self.log)
        self.port, why = server_proc.listening_port(self.proc, self.log, 600)
        if self.port is None:
            sys.exit("%s did not start: %s" % (name, why))

    def stream(self, prompt, max_tokens):
        """(seconds to the first token, seconds per later token, cached_tokens)."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=3600)
        body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
                "ignore_eos": True, "stream": True, "return_token_ids": True,
                "stream_options": {"include_usage": True}}
        t0 = time.time()
        c.request("POST", "/v1/completions", json.dumps(body),
                  {"Content-Type": "application/json"})
        r = c.getresponse()
        first = last = None
        n = 0
        cached = None
        for line in r:
            line = line.strip()
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            ev = json.loads(line[6:])
            if ev.get("usage"):
                cached = ev["usage"].get("prompt_tokens_details", {}).get("cached_tokens")
            got = len(ev["choices"][0].get("token_ids") or []) if ev.get("choices") else 0
            if got:
                now = time.time()
                if first is None:
                    first, n_first = now, got
                last = now
                n += got
        # seconds per token after the first chunk's (chunks may carry several tokens)
        per = (last - first) / (n - n_first) if n > n_first else float("nan")
        return first - t0, per, cached

    def completions_logged(self):
        return [json.loads(x) for x in open(self.log) if '"event":"request"' in x
                and '/v1/completions' in x]

    def last_request(self, seen=None):
        """The server's own log line of the last completion: ttft_ms, duration_ms,
        queue_wait_ms (admission, which includes the prefix match and disk loads). The
        line follows the response: with seen (lines logged before the request), waits
        for the request's own."""
        for _ in range(200):
            lines = self.completions_logged()
            if lines and (seen is None or len(lines) > seen):
                return lines[-1]
            time.sleep(0.05)
        return {}

    def warm_up(self):
        """One short request: a fresh process's first-touch costs (threads, buffers)."""
        self.stream(ids(8), 2)

    def decode_rate(self, max_tokens):
        """Tokens per second after the first, from the server's log line."""
        def mine():
            return [r for r in self.completions_logged() if r.get("prompt_tokens") == 16]
        seen = len(mine())
        self.stream(ids(16), max_tokens)
        for _ in range(200):
            if len(mine()) > seen:
                break
            time.sleep(0.05)
        r = mine()[-1]
        return (r["completion_tokens"] - 1) / ((r["duration_ms"] - r["ttft_ms"]) / 1000.0)

    def metrics(self):
        return server_metrics.fetch(self.port, 60)

    def wait_writes(self, n):
        while self.metrics().get("mhla_state_disk_writes_total", 0) < n:
            time.sleep(0.2)

    def cpu_s(self):
        """CPU seconds the server process has used, every thread (the writer's too)."""
        f = open("/proc/%d/stat" % self.proc.pid).read().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")

    def settle(self):
        """Until the tier's writer has been idle for a second (no new writes)."""
        last, t = -1, time.time()
        while time.time() - t < 1.0 or last < 0:
            n = self.metrics().get("mhla_state_disk_writes_total", 0)
            if n != last:
                last, t = n, time.time()
            time.sleep(0.2)

    def stop(self):
        server_proc.stop(self.proc, 120)


def evict_page_cache(d):
    for f in glob.glob(os.path.join(d, "*.kvp")):
        fd = os.open(f, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)


def ttft_part(res):
    d = os.path.join(a.work, "tier")
    shutil.rmtree(d, ignore_errors=True)
    p, p2, p3 = ids(a.prompt), ids(a.prompt), ids(a.prompt)
    blocks = (a.prompt - 1) // 64
    s = Server("ttft_1", d)
    res["cold_1"], _, _ = s.stream(p, 1)
    res["memory"], _, res["memory_cached"] = s.stream(p, 1)
    res["cold_2"], _, _ = s.stream(p2, 1)
    s.stream(p3, 1)
    s.wait_writes(3 * blocks)
    res["tier_bytes"] = s.metrics().get("mhla_state_disk_bytes")
    s.stop()
    s = Server("ttft_2", d)  # a restart, its first request: the files in the OS page cache
    res["disk_first"], _, res["disk_first_cached"] = s.stream(p, 1)
    res["disk_first_admit_s"] = s.last_request(0).get("queue_wait_ms", 0) / 1000
    res["disk_first_load_s"] = s.metrics().get("mhla_state_disk_load_seconds_total")
    s.stop()
    s = Server("ttft_3", d)  # a restart, after a short warm-up request
    s.warm_up()
    res["disk_warm"], _, res["disk_warm_cached"] = s.stream(p2, 1)
    res["disk_warm_admit_s"] = s.last_request(1).get("queue_wait_ms", 0) / 1000
    res["disk_warm_load_s"] = s.metrics().get("mhla_state_disk_load_seconds_total")
    res["cold_3"], _, _ = s.stream(ids(a.prompt), 1)
    s.stop()
    evict_page_cache(d)
    s = Server("ttft_4", d)  # warmed up, the files read from the device
    s.warm_up()
    res["disk_cold"], _, res["disk_cold_cached"] = s.stream(p3, 1)
    res["disk_cold_admit_s"] = s.last_request(1).get("queue_wait_ms", 0) / 1000
    res["disk_cold_load_s"] = s.metrics().get("mhla_state_disk_load_seconds_total")
    s.stop()
    cold = statistics.mean([res["cold_2"], res["cold_3"]])  # warmed processes
    res["cold_mean"] = cold
    res["ratio_first_cold_over_first_disk"] = res["cold_1"] / res["disk_first"]
    res["ratio_cold_over_disk_warm"] = cold / res["disk_warm"]
    res["ratio_cold_over_disk_cold"] = cold / res["disk_cold"]
    res["ratio_cold_over_memory"] = cold / res["memory"]


def cost_part(res):
    d = os.path.join(a.work, "tier_cost")
    shutil.rmtree(d, ignore_errors=True)
    on, off = Server("cost_on", d), Server("cost_off")
    cpu0 = {"on": on.cpu_s(), "off": off.cpu_s()}  # after loading: the serving alone
    pre = {"on": [], "off": []}
    dec = {"on": [], "off": []}
    for r in range(a.rounds):
        for mode, s in (("off", off), ("on", on)) if r % 2 == 0 else (("on", on), ("off", off)):
            t, _, _ = s.stream(ids(a.prefill), 1)
            pre[mode].append(a.prefill / t)
            dec[mode].append(s.decode_rate(a.decode))
    on.settle()
    res["cpu_s"] = {"on": on.cpu_s() - cpu0["on"], "off": off.cpu_s() - cpu0["off"]}
    res["cpu_on_over_off"] = res["cpu_s"]["on"] / res["cpu_s"]["off"]
    m = on.metrics()
    res["cost_writes"] = m.get("mhla_state_disk_writes_total")
    res["cost_dropped"] = m.get("mhla_state_disk_dropped_writes_total")
    on.stop()
    off.stop()
    res["prefill_tok_s"] = pre
    res["decode_tok_s"] = dec
    # each round's on and off ran back to back: their ratio sees the same machine load
    res["prefill_on_over_off"] = statistics.median(x / y for x, y in zip(pre["on"], pre["off"]))
    res["decode_on_over_off"] = statistics.median(x / y for x, y in zip(dec["on"], dec["off"]))


res = {"prompt": a.prompt, "threads": a.threads, "weights": a.weights,
       "load_before": os.getloadavg()}
if a.only != "cost":
    ttft_part(res)
    res["load_mid"] = os.getloadavg()
if a.only != "ttft":
    cost_part(res)
res["load_after"] = os.getloadavg()
if a.only == "cost":
    print("tier on / off: prefill %.3f, decode %.3f (medians of %d rounds' ratios); "
          "server CPU seconds for the same work %.3f" %
          (res["prefill_on_over_off"], res["decode_on_over_off"], a.rounds,
           res["cpu_on_over_off"]))
    print(json.dumps(res))
    sys.exit(0)
print("TTFT of a %d-token prompt (s), a fresh process's first request: cold %.2f, from disk "
      "%.3f (%.1fx)" % (a.prompt, res["cold_1"], res["disk_first"],
                        res["ratio_first_cold_over_first_disk"]))
print("warmed processes: cold %.2f (mean of 2), memory %.3f, disk after restart "
      "%.3f (page cache) / %.3f (evicted from it)" %
      (res["cold_mean"], res["memory"], res["disk_warm"], res["disk_cold"]))
print("cold / disk: %.1fx (page cache), %.1fx (evicted); cold / memory %.1fx" %
      (res["ratio_cold_over_disk_warm"], res["ratio_cold_over_disk_cold"],
       res["ratio_cold_over_memory"]))
if a.only != "ttft":
    print("tier on / off: prefill %.3f, decode %.3f (medians of %d rounds' ratios)" %
          (res["prefill_on_over_off"], res["decode_on_over_off"], a.rounds))
print(json.dumps(res))
