#!/usr/bin/python3
"""--state-prefault: a fresh server makes its state pool's first pages at start.

On a checkpoint whose state pages are 2 MiB (8 layers of one 256 x 256 head), with
--state-memory 64 (32 pages):
  1. --state-prefault 20 logs a state_prefault event of 10 pages (20 MiB); the server's
     resident memory before any request is at least 16 MiB over the same server's with
     --state-prefault 0 (the pages are faulted in, not only mapped; both without the
     stash, MHLA_STATE_READY_PAGES=0, whose pages would blur the difference);
  2. /metrics still shows 32 pages, none used, all free; a greedy completion whose prompt
     closes blocks gives the same tokens on both servers;
  3. auto (1 GiB) is capped at the pool: 32 pages;
  4. bad values are refused with a message naming the flag: -1, 12x, a number past the
     limit, and --state-prefault 20 with --state-memory 0;
  5. out of memory while making them (an address-space limit 16 MiB over what the same
     server with --state-prefault 0 peaks at, and 512 MiB to make), the server does not
     start, and says which page ran out and that --state-prefault 0 does without.
Small pages (under 2 MiB, made by the allocator) are checked in kvstate.churn.
Limits derive from the time this machine took to write the checkpoint (tests/tools/pace.py).

usage: test_state_prefault.py --bin BUILD/bin --work DIR
"""
import argparse
import http.client
import json
import os
import resource
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import pace  # noqa: E402
import server_metrics  # noqa: E402
import server_proc  # noqa: E402

PACE = pace.Pace()
FAILURES = []
PAGE_MIB = 2
POOL_MIB = 64
PROMPT = [(7 * i + 3) % 96 for i in range(40)]  # closes two 16-token blocks


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILURES.append(what)


def status_bytes(pid, key):
    """A "key: N kB" line of /proc/PID/status, in bytes (0 when absent)."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def complete(port):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=PACE.limit("gen", 1, 60))
    body = {"prompt": PROMPT, "max_tokens": 12, "temperature": 0, "ignore_eos": True,
            "return_token_ids": True}
    conn.request("POST", "/v1/completions", json.dumps(body),
                 {"Content-Type": "application/json"})
    r = conn.getresponse()
    data = json.loads(r.read())
    return r.status, data


def server_argv(a, model):
    return [os.path.join(a.bin, "mhla-server"), "--model", model, "--device", "cpu",
            "--threads", "1", "--port", "0"]


def serve(a, model, name, flags, pool=True):
    """Starts a server (with --state-memory POOL_MIB where pool), returns (proc, port, log)
    or fails the test with its log."""
    log = os.path.join(a.work, name + ".log")
    # no stash: the pages it makes ahead, a few at a time on its own thread, would add to the
    # resident memory of either server by the time it is read
    env = dict(os.environ, MHLA_STATE_READY_PAGES="0")
    argv = server_argv(a, model)
    if pool:
        argv += ["--state-memory", str(POOL_MIB)]
    proc = server_proc.start_logged(argv + flags, log, env)
    port, why = server_proc.listening_port(proc, log, PACE.limit("gen", 1, 60))
    if port is None:
        server_proc.stop(proc, 10)
        sys.exit("FAIL: %s did not start: %s" % (name, why))
    return proc, port, log


def refused(a, model, flags, why):
    r = subprocess.run([os.path.join(a.bin, "mhla-server"), "--model", model, "--port", "0"] +
                       flags, capture_output=True, text=True, timeout=PACE.limit("gen", 1, 60))
    check(r.returncode != 0 and "--state-prefault" in r.stderr,
          "%s is refused naming the flag (exit %d: %s)" % (why, r.returncode,
                                                           r.stderr.strip()[-160:]))


def out_of_memory(a, model):
    """Item 5: the peak address space of a server with a 512 MiB pool made as needed, then
    the same server asked to make all 512 MiB at start under a limit 16 MiB over that peak."""
    flags = ["--state-memory", "512", "--state-prefault"]
    proc, port, log = serve(a, model, "peak", flags + ["0"], pool=False)
    peak = status_bytes(proc.pid, "VmPeak")
    server_proc.stop(proc, PACE.limit("gen", 1, 30))
    cap = peak + (16 << 20)

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    r = subprocess.run(server_argv(a, model) + flags + ["512"],
                       env=dict(os.environ, MHLA_STATE_READY_PAGES="0"), preexec_fn=limit,
                       capture_output=True, text=True, timeout=PACE.limit("gen", 1, 60))
    last = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
    check(r.returncode != 0 and "to make at start" in last and "--state-prefault 0" in last,
          "out of memory making pages at start: no start, the page and the flag named "
          "(address space %d MiB; exit %d: %s)" % (cap >> 20, r.returncode, last[-200:]))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    model = os.path.join(a.work, "pages2m")
    tools = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools")
    # 8 layers x 1 head x 256 x 256 f32 = 2 MiB of state per page, blocks of 16 tokens
    PACE.measure("gen", 1, lambda: subprocess.run(
        [sys.executable, os.path.join(tools, "gen_checkpoint.py"), "--out", model,
         "--vocab", "96", "--hidden", "256", "--layers", "8", "--heads", "1",
         "--expand-k", "1", "--expand-v", "1", "--chunk", "16", "--blocks", "8",
         "--seed", "31"], check=True, capture_output=True))

    made, answers = {}, {}
    for name, flags in (("none", ["--state-prefault", "0"]),
                        ("some", ["--state-prefault", "20"]),
                        ("auto", [])):
        proc, port, log = serve(a, model, name, flags)
        try:
            rss = status_bytes(proc.pid, "VmRSS") / 1048576.0
            ev = server_proc.log_events(log, "state_prefault")
            made[name] = (ev[0]["pages"] if ev else 0, rss)
            m = server_metrics.fetch(port, PACE.limit("gen", 1, 60))
            pages = {k: m.get('mhla_state_pages{kind="%s"}' % k) for k in
                     ("total", "used", "free")}
            check(pages == {"total": POOL_MIB // PAGE_MIB, "used": 0,
                            "free": POOL_MIB // PAGE_MIB},
                  "%s: /metrics shows the pool's %d pages free before any request (%s)" %
                  (name, POOL_MIB // PAGE_MIB, pages))
            status, data = complete(port)
            check(status == 200, "%s: a completion answers 200 (%d)" % (name, status))
            answers[name] = data["choices"][0].get("token_ids") if status == 200 else None
        finally:
            server_proc.stop(proc, PACE.limit("gen", 1, 30))
        print("%s: %d pages made at start, %.1f MiB resident" % (name, made[name][0],
                                                                  made[name][1]))
    check(made["none"][0] == 0, "--state-prefault 0 makes no page at start")
    check(made["some"][0] == 20 // PAGE_MIB, "--state-prefault 20 makes %d pages (%d)" %
          (20 // PAGE_MIB, made["some"][0]))
    check(made["auto"][0] == POOL_MIB // PAGE_MIB,
          "auto (1 GiB) is capped at the pool's %d pages (%d)" % (POOL_MIB // PAGE_MIB,
                                                                  made["auto"][0]))
    grown = made["some"][1] - made["none"][1]
    check(grown >= 16, "the made pages are resident: %.1f MiB more than without (>= 16)" % grown)
    check(answers["none"] is not None and answers["some"] == answers["none"] and
          answers["auto"] == answers["none"],
          "the same greedy tokens with and without pages made at start (%s)" % answers)

    for v in ("-1", "12x", "5000000"):
        refused(a, model, ["--state-prefault", v], "--state-prefault %s" % v)
    refused(a, model, ["--state-prefault", "20", "--state-memory", "0"],
            "--state-prefault 20 with --state-memory 0")
    out_of_memory(a, model)

    if FAILURES:
        print("%d failure(s)" % len(FAILURES))
        return 1
    print("state prefault: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
