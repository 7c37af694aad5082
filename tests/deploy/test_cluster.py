#!/usr/bin/env python3
"""deploy/local-cluster.sh: mhla-server replicas behind HAProxy, on loopback.

Parts (--part):
  answers   every request through the load balancer is answered, and greedy outputs equal
            those of a single server; X-Session-ID and the `user` field pin a replica
  affinity  40 prompts in 8 groups of 5 sharing a 1,000-token prefix, shuffled: the prompt
            tokens the replicas compute (prompt tokens - cached, summed over replicas) with
            prefix hashing are at most half of what round robin makes them compute
  failover  kill -9 one replica during a 20-second mhla-bench load at concurrency 8: only
            requests in flight on it fail, HAProxy marks it down within its check bounds,
            and no request accepted after the kill fails
  rolling   SIGTERM and restart each replica in turn during a load: zero failed requests

Every cluster's state folder lies under a path longer than a UNIX socket path may be, as
in a deep build tree; `down` removes HAProxy's socket folder.
Every process is started by local-cluster.sh (or here) and stopped by PID at the end, also
when a check fails. Time bounds derive from HAProxy's own check settings and from the
measured time of the work, not from fixed short timeouts.
"""
import argparse
import json
import os
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "tools"))
from checks import check, finish  # noqa: E402
import server_metrics  # noqa: E402
from server_proc import listening_port, start_logged, stop  # noqa: E402
SCRIPT = os.path.join(ROOT, "deploy", "local-cluster.sh")
CFG = os.path.join(ROOT, "deploy", "haproxy", "mhla-haproxy.cfg")
REPLICAS = 3
# Generous bound for one HTTP exchange on a starved machine; requests here take well under
# a second alone.
HTTP_TIMEOUT = 300
# Length of the state folder's parent: past sun_path's 108 bytes with room to spare.
LONG_PATH = 120



# ---- the cluster ----

class Cluster:
    """local-cluster.sh up/down around a state folder; `down` runs at exit in any case."""

    def __init__(self, a, name, balance="hash", flags=None):
        self.a = a
        # a state folder deeper than a UNIX socket path may be (107 bytes): the script must
        # keep HAProxy's socket elsewhere, as it must from a build tree with a long path
        self.dir = os.path.join(a.work, "long-state-path".ljust(LONG_PATH - len(a.work), "-"),
                                name)
        self.balance = balance
        self.flags = flags if flags is not None else ["--state-memory", "64"]
        self.url = None

    def script(self, *args, timeout=None):
        return subprocess.run(["bash", SCRIPT] + [str(x) for x in args] + ["--dir", self.dir],
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=timeout)

    def up(self):
        _ACTIVE.append(self)
        p = subprocess.run(["bash", SCRIPT, "up", str(REPLICAS), "--dir", self.dir, "--port", "0",
                            "--bin", self.a.bin, "--model", self.a.model, "--threads", "1",
                            "--balance", self.balance, "--"] + self.flags,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True)
        sys.stderr.write(p.stderr)
        if p.returncode != 0:
            raise RuntimeError("local-cluster.sh up failed: " + p.stderr[-2000:])
        self.url = p.stdout.strip().splitlines()[-1]
        return self

    def sock(self):
        return open(os.path.join(self.dir, "lb.sock")).read().strip()

    def down(self):
        if self in _ACTIVE:
            _ACTIVE.remove(self)
            sock = self.sock() if os.path.exists(os.path.join(self.dir, "lb.sock")) else None
            p = self.script("down")
            sys.stderr.write(p.stderr)
            check(sock is not None and not os.path.exists(os.path.dirname(sock)),
                  "down removes HAProxy's socket folder (%s)" % sock)

    def pid(self, k):
        return int(open(os.path.join(self.dir, "r%d.pid" % k)).read())

    def port(self, k):
        return int(open(os.path.join(self.dir, "r%d.port" % k)).read())

    def stat(self):
        """{replica: (status, current sessions)} from HAProxy's runtime API."""
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(10)
        s.connect(self.sock())
        s.sendall(b"show stat\n")
        data = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
        s.close()
        lines = data.decode().splitlines()
        head = lines[0].lstrip("# ").split(",")
        out = {}
        for line in lines[1:]:
            f = dict(zip(head, line.split(",")))
            if f.get("pxname") == "mhla_replicas" and f.get("svname") not in ("BACKEND", None):
                out[f["svname"]] = (f["status"], int(f["scur"] or 0))
        return out

    def log_requests(self, path="/v1/completions"):
        """HAProxy's request log lines for `path`, parsed."""
        rx = re.compile(r'req ts=([\d.]+) srv=\S+/(\S+) status=(-?\d+) term=(\S+) retries=(\S+) '
                        r'bytes=\d+ Tw=\S+ Tc=\S+ Tr=\S+ Tt=(-?\d+) "(\S+) (\S+)')
        out = []
        for line in open(os.path.join(self.dir, "haproxy.log"), errors="replace"):
            m = rx.search(line)
            if m and m.group(8) == path:
                out.append({"ts": float(m.group(1)), "srv": m.group(2), "status": int(m.group(3)),
                            "term": m.group(4), "retries": m.group(5),
                            "end": float(m.group(1)) + int(m.group(6)) / 1000.0})
        return out


_ACTIVE = []


def _down_all(*_):
    for c in list(_ACTIVE):
        c.down()


def _on_signal(signum, _frame):
    _down_all()
    sys.exit(128 + signum)


signal.signal(signal.SIGTERM, _on_signal)
signal.signal(signal.SIGINT, _on_signal)


def failed(entry):
    """A request the client did not get whole: not a 200, or not ended normally ('--')."""
    return entry["status"] != 200 or not entry["term"].startswith("--")


def cfg_seconds(name):
    """A time setting of the HAProxy configuration (default-server or defaults), in s."""
    text = open(CFG).read()
    m = re.search(r"\b%s (\d+)(ms|s)\b" % re.escape(name), text)
    return int(m.group(1)) / (1000.0 if m.group(2) == "ms" else 1.0)


def cfg_int(name):
    return int(re.search(r"\b%s (\d+)\b" % re.escape(name), open(CFG).read()).group(1))


# ---- HTTP ----

def post(url, body, headers=None):
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    req = urllib.request.Request(url + "/v1/completions", json.dumps(body).encode(), h)
    try:
        with urllib.request.urlopen(req, timeout=HTTP_TIMEOUT) as r:
            return r.status, r.headers.get("X-MHLA-Replica"), json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("X-MHLA-Replica"), e.read().decode(errors="replace")


def start_single(a, flags):
    """One mhla-server outside the cluster (the reference); returns (proc, url)."""
    log_path = os.path.join(a.work, "single.log")
    proc = start_logged([os.path.join(a.bin, "mhla-server"), "--host", "127.0.0.1", "--port",
                         "0", "--model", a.model, "--threads", "1"] + flags, log_path)
    port, err = listening_port(proc, log_path, HTTP_TIMEOUT)
    if port is None:
        if proc.poll() is not None:
            raise RuntimeError("single server exited: " + err)
        proc.kill()
        proc.wait()
        raise RuntimeError("single server did not start")
    return proc, "http://127.0.0.1:%d" % port


def parallel(fn, items, threads):
    results = [None] * len(items)
    lock = threading.Lock()
    nxt = [0]

    def worker():
        while True:
            with lock:
                i = nxt[0]
                nxt[0] += 1
            if i >= len(items):
                return
            results[i] = fn(items[i])

    ts = [threading.Thread(target=worker) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return results


# ---- parts ----

def part_answers(a):
    flags = ["--state-memory", "64"]
    rng = random.Random(11)
    shared = [rng.randrange(1, 4096) for _ in range(200)]
    bodies = []
    for i in range(24):
        if i % 3 == 0:
            prompt = "The jury said %d times that the city of %s " % (i, "Atlanta" * (1 + i % 4))
        elif i % 3 == 1:
            prompt = [rng.randrange(1, 4096) for _ in range(rng.randrange(5, 300))]
        else:
            prompt = shared + [rng.randrange(1, 4096) for _ in range(rng.randrange(1, 40))]
        bodies.append({"prompt": prompt, "max_tokens": 16, "temperature": 0,
                       "return_token_ids": True, "ignore_eos": True})
    single, surl = start_single(a, flags)
    cl = Cluster(a, "answers", flags=flags)
    try:
        want = [post(surl, b) for b in bodies]
        check(all(w[0] == 200 for w in want), "the single server answers all %d" % len(bodies))
        cl.up()
        got = parallel(lambda b: post(cl.url, b), bodies, 8)
        check(all(g[0] == 200 for g in got), "every request through HAProxy is answered "
              "(statuses %s)" % sorted(set(g[0] for g in got)))
        same = sum(1 for g, w in zip(got, want) if g[0] == 200 and w[0] == 200
                   and g[2]["choices"][0]["token_ids"] == w[2]["choices"][0]["token_ids"])
        check(same == len(bodies), "greedy outputs through HAProxy equal a single server's "
              "(%d of %d)" % (same, len(bodies)))
        used = sorted(set(g[1] for g in got if g[1]))
        check(len(used) >= 2, "requests are spread over the replicas (%s)" % used)
        # pinning: the header, then the `user` field, each keep one replica for a
        # conversation whose prompts differ
        for kind in ("header", "user"):
            seen = set()
            for i in range(8):
                b = {"prompt": "turn %d of the conversation" % i, "max_tokens": 2}
                if kind == "header":
                    seen.add(post(cl.url, b, {"X-Session-ID": "conversation-7"})[1])
                else:
                    b["user"] = "user-42"
                    seen.add(post(cl.url, b)[1])
            check(len(seen) == 1 and None not in seen,
                  "8 different prompts with one %s go to one replica (%s)" % (kind, seen))
    finally:
        cl.down()
        stop(single, 60)


def affinity_workload(seed=5, groups=8, per_group=5, prefix=1000, suffix=8):
    rng = random.Random(seed)
    work = []
    for g in range(groups):
        pre = [rng.randrange(1, 4096) for _ in range(prefix)]
        for _ in range(per_group):
            work.append((g, pre + [rng.randrange(1, 4096) for _ in range(suffix)]))
    rng.shuffle(work)
    return work


def run_affinity(a, balance, work):
    """Sends the workload in order through a fresh cluster; returns the prompt tokens the
    replicas computed, the cached ones, per-group replicas, and client TTFTs (s)."""
    cl = Cluster(a, "affinity-" + balance, balance=balance)
    try:
        cl.up()
        before = [server_metrics.fetch(cl.port(k), HTTP_TIMEOUT) for k in range(1, REPLICAS + 1)]
        groups = {}
        ttft = []
        for g, ids in work:
            t = time.time()
            st, srv, body = post(cl.url, {"prompt": ids, "max_tokens": 1, "temperature": 0})
            ttft.append(time.time() - t)  # max_tokens 1: the first token ends the request
            if st != 200:
                check(False, "%s: request answered (%s %s)" % (balance, st, body))
            groups.setdefault(g, set()).add(srv)
        after = [server_metrics.fetch(cl.port(k), HTTP_TIMEOUT) for k in range(1, REPLICAS + 1)]
    finally:
        cl.down()
    prompt = sum(x["mhla_prompt_tokens_total"] - y["mhla_prompt_tokens_total"]
                 for x, y in zip(after, before))
    cached = sum(x["mhla_prompt_tokens_cached_total"] - y["mhla_prompt_tokens_cached_total"]
                 for x, y in zip(after, before))
    return {"balance": balance, "prompt_tokens": int(prompt), "cached_tokens": int(cached),
            "computed_tokens": int(prompt - cached), "groups": groups,
            "ttft_p50_ms": 1000 * statistics.median(ttft),
            "ttft_p99_ms": 1000 * sorted(ttft)[min(len(ttft) - 1, int(0.99 * len(ttft)))]}


def part_affinity(a):
    work = affinity_workload()
    total = sum(len(ids) for _, ids in work)
    res = {}
    for balance in ("hash", "roundrobin"):
        r = run_affinity(a, balance, work)
        res[balance] = r
        check(r["prompt_tokens"] == total, "%s: the replicas saw every prompt token (%d of %d)"
              % (balance, r["prompt_tokens"], total))
        print("     %-10s computed %6d  cached %6d  TTFT p50 %.1f ms  p99 %.1f ms  groups on %s"
              % (balance, r["computed_tokens"], r["cached_tokens"], r["ttft_p50_ms"],
                 r["ttft_p99_ms"], [len(s) for _, s in sorted(r["groups"].items())]))
    h, rr = res["hash"], res["roundrobin"]
    check(all(len(s) == 1 for s in h["groups"].values()),
          "hash: every group's 5 requests land on one replica")
    check(h["computed_tokens"] * 2 <= rr["computed_tokens"],
          "prompt tokens computed with prefix hashing (%d) are at most half of round robin's "
          "(%d): ratio %.3f" % (h["computed_tokens"], rr["computed_tokens"],
                                h["computed_tokens"] / max(rr["computed_tokens"], 1)))
    if a.report:
        for r in res.values():
            r["groups"] = {str(g): sorted(s) for g, s in r["groups"].items()}
        json.dump(res, open(a.report, "w"), indent=1)


class StatPoller(threading.Thread):
    """Polls HAProxy's view of the replicas; keeps (time, {replica: (status, scur)})."""

    def __init__(self, cl, every=0.05):
        super().__init__(daemon=True)
        self.cl, self.every, self.samples, self.stop = cl, every, [], threading.Event()

    def run(self):
        while not self.stop.is_set():
            try:
                self.samples.append((time.time(), self.cl.stat()))
            except OSError:
                pass
            time.sleep(self.every)

    def first(self, pred, after=0.0):
        for t, s in self.samples:
            if t >= after and pred(s):
                return t
        return None


def bench(a, url, work, name, *args):
    samples = os.path.join(work, name + ".jsonl")
    js = os.path.join(work, name + ".json")
    cmd = [os.path.join(a.bin, "mhla-bench"), "--url", url, "--no-progress", "--samples", samples,
           "--json", js, "--temperature", "0"] + [str(x) for x in args]
    return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True), samples, js


def part_failover(a):
    duration = 20
    cl = Cluster(a, "failover")
    poller = None
    proc = None
    try:
        cl.up()
        poller = StatPoller(cl)
        poller.start()
        proc, samples, js = bench(a, cl.url, cl.dir, "failover", "--concurrency", 8,
                                  "--duration", duration, "--input-len", 128, "--output-len", 64)
        victim = 2
        # kill once the load has run a third of its time and the victim has requests in
        # flight (HAProxy's current sessions), so that some are cut
        t_load = None
        t_kill = None
        while proc.poll() is None:
            reqs = cl.log_requests()
            if reqs and t_load is None:
                t_load = reqs[0]["ts"]
            if t_load and time.time() - t_load > duration / 3:
                st = cl.stat()
                if st["r%d" % victim][1] > 0:
                    pid = cl.pid(victim)
                    os.kill(pid, signal.SIGKILL)
                    t_kill = time.time()
                    break
            time.sleep(0.05)
        check(t_kill is not None, "replica r%d was killed with requests in flight" % victim)
        out, _ = proc.communicate(timeout=duration * 10 + HTTP_TIMEOUT)
        print(out, end="")
        poller.stop.set()
        poller.join()
        if t_kill is None:
            return
        name = "r%d" % victim
        t_down = poller.first(lambda s: s[name][0].startswith("DOWN"), after=t_kill)
        inter, fast = cfg_seconds("inter"), cfg_seconds("fastinter")
        tcheck, fall = cfg_seconds("timeout check"), cfg_int("fall")
        bound = inter + fall * (fast + tcheck)
        check(t_down is not None and t_down - t_kill <= bound,
              "HAProxy marks the killed replica DOWN within its check bound of %.2f s "
              "(after %s s)" % (bound, "%.2f" % (t_down - t_kill) if t_down else "never"))
        reqs = cl.log_requests()
        bad = [r for r in reqs if failed(r)]
        stray = [r for r in bad if not (r["srv"] == name and r["ts"] < t_kill <= r["end"] + 0.5)]
        check(not stray, "only requests in flight on %s at the kill failed (%d failed, %d "
              "others: %s)" % (name, len(bad), len(stray), stray[:3]))
        after_down = [r for r in reqs if t_down and r["ts"] >= t_down]
        check(len(after_down) > 0 and not any(failed(r) for r in after_down),
              "none of the %d requests accepted after the replica was marked down failed"
              % len(after_down))
        retried = [r for r in reqs if r["ts"] >= t_kill and r["retries"] not in ("0", "+0")]
        rows = [json.loads(l) for l in open(samples)]
        bench_failed = sum(1 for r in rows if not r.get("ok"))
        check(bench_failed == len(bad), "the bench saw the failures HAProxy logged (%d, %d)"
              % (bench_failed, len(bad)))
        res = json.load(open(js))["levels"][0]
        print("     %d requests, %d failed (all in flight on %s), %d accepted after the kill "
              "were retried on another replica; DOWN after %.2f s; TTFT p50 %.1f ms p99 %.1f ms"
              % (len(reqs), len(bad), name, len(retried), t_down - t_kill if t_down else -1,
                 res["ttft_ms"]["p50"], res["ttft_ms"]["p99"]))
        if a.report:
            json.dump({"requests": len(reqs), "failed": len(bad), "bench_failed": bench_failed,
                       "retried_after_kill": len(retried),
                       "down_after_s": t_down - t_kill if t_down else None,
                       "check_bound_s": bound, "bench": res}, open(a.report, "w"), indent=1)
    finally:
        if poller:
            poller.stop.set()
        if proc and proc.poll() is None:
            proc.kill()
            proc.wait()
        cl.down()


def part_rolling(a):
    cl = Cluster(a, "rolling")
    proc = None
    try:
        cl.up()
        # one restart without load measures what a restart costs here; the load then runs
        # long enough for three of them with a wide margin
        t = time.time()
        p = cl.script("restart", 1)
        one = time.time() - t
        check(p.returncode == 0, "a replica restarts (%.1f s): %s" % (one, p.stderr.strip()[-300:]))
        duration = max(20, int(3 * one * 4) + 10)
        proc, samples, js = bench(a, cl.url, cl.dir, "rolling", "--concurrency", 6,
                                  "--duration", duration, "--input-len", 128, "--output-len", 64)
        while not cl.log_requests() and proc.poll() is None:
            time.sleep(0.05)
        time.sleep(2)  # let the load settle on every replica before the first drain
        windows = []
        for k in range(1, REPLICAS + 1):
            t0 = time.time()
            p = cl.script("restart", k)
            windows.append((t0, time.time()))
            check(p.returncode == 0, "r%d drained and restarted during the load (%.1f s)"
                  % (k, windows[-1][1] - t0))
        restarts_done = time.time()
        out, _ = proc.communicate(timeout=duration * 10 + HTTP_TIMEOUT)
        print(out, end="")
        reqs = cl.log_requests()
        bench_end = max(r["end"] for r in reqs) if reqs else 0
        check(restarts_done < bench_end, "the load outlasted the three restarts")
        during = [r for r in reqs if any(w0 <= r["ts"] <= w1 for w0, w1 in windows)]
        check(len(during) > 0, "%d requests arrived while a replica was restarting" % len(during))
        bad = [r for r in reqs if failed(r)]
        check(proc.returncode == 0 and not bad, "zero failed requests over %d (bench exit %d, "
              "HAProxy: %s)" % (len(reqs), proc.returncode, bad[:3]))
        retried = sum(1 for r in reqs if r["retries"] not in ("0", "+0"))
        print("     %d requests, %d sent again to another replica by HAProxy" % (len(reqs), retried))
    finally:
        if proc and proc.poll() is None:
            proc.kill()
            proc.wait()
        cl.down()


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True, help="folder with mhla-server and mhla-bench")
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "brown-mhla"))
    ap.add_argument("--work", required=True, help="scratch folder (wiped)")
    ap.add_argument("--part", required=True,
                    choices=("answers", "affinity", "failover", "rolling"))
    ap.add_argument("--report", help="write the part's numbers as JSON here")
    a = ap.parse_args()
    if not shutil.which("haproxy"):
        print("haproxy is not installed (deploy/bootstrap-debian.sh installs it)")
        return 1
    a.bin = os.path.abspath(a.bin)
    a.model = os.path.abspath(a.model)
    a.work = os.path.abspath(a.work)
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    try:
        {"answers": part_answers, "affinity": part_affinity, "failover": part_failover,
         "rolling": part_rolling}[a.part](a)
    except Exception as e:  # a crash is a failure with its cause, after cleanup
        check(False, "%s: %s: %s" % (a.part, type(e).__name__, e))
    finally:
        _down_all()
    return finish()


if __name__ == "__main__":
    sys.exit(main())
