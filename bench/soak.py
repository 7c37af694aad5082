#!/usr/bin/python3
"""Soak test of mhla-server (run through bench/soak.sh).

Starts the server with its default flags (plus --server-args), then for MINUTES
drives it with
  - mhla-bench: a closed loop of mixed streaming requests (input 32..224
    tokens, output about 96 +- 48), the same figures as a normal bench run;
  - cancellers: streams that the client drops at a random point (often before
    the first token, often mid-stream);
  - slow readers: streams read a few dozen bytes at a time through a small
    receive buffer, to the end;
and every --interval seconds (30) appends one JSON line to the results file: the server's RSS,
its /metrics counters and gauges, the HTTP status counts (server side and ours)
and what the side clients did. The file is written and flushed as it goes, so
an interrupted soak keeps what it saw.

At the end the load stops and the soak fails (exit 1) on
  - any 5xx status (the server's own count, or one a client saw);
  - any mhla-bench request that failed (status, transport, error event, cut stream);
  - RSS growth past --rss-slope MiB/min (least squares over the samples after
    the warm-up: the first third of the run, at least 60 s), not counting the
    state pool's pages in use or cached: the default server's pool fills its
    budget with cached prefixes as it runs, which is memory it was given, not
    a leak;
  - gauges that do not return to 0 when idle (requests running/waiting,
    sequences running, state bytes, state pages used/reserved) within 60 s;
  - a server that does not exit 0 on SIGTERM.
The last line of the results file is the verdict with its reasons. Then the
picture of the run (bench/soak_svg.py): RSS, and mhla-bench's TTFT and end-to-end
latency (p50, p99) per interval, from the requests it lists (--samples).
"""
import argparse
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time

from soak_cgroup import CgroupError, MemoryCgroup
import soak_svg

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "tools"))
import server_metrics  # noqa: E402

GAUGES = ("mhla_requests_running", "mhla_requests_waiting", "mhla_sequences_running",
          "mhla_state_bytes", 'mhla_state_pages{kind="used"}', 'mhla_state_pages{kind="reserved"}')


class Soak:
    def __init__(self, a):
        self.a = a
        self.out = open(a.out, "a", buffering=1)
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.side = {"cancelled": 0, "slow_done": 0, "slow_cut": 0, "errors": 0}
        self.side_status = {}
        self.side_errors = []
        self.t0 = time.time()
        self.cgroup = None

    def write(self, obj):
        self.out.write(json.dumps(obj) + "\n")
        self.out.flush()
        os.fsync(self.out.fileno())

    # ---- the server --------------------------------------------------------------
    def start_server(self):
        a = self.a
        self.log_path = a.out + ".server.log"
        self.log = open(self.log_path, "wb")
        cmd = [os.path.join(a.bin, "mhla-server"), "--host", "127.0.0.1", "--port", "0"]
        if a.model:
            cmd += ["--model", a.model]
        cmd += a.server_args.split()
        self.cmd = cmd
        join = None
        if a.memory_limit:
            try:
                self.cgroup = MemoryCgroup(a.memory_limit, "mhla-soak-%d" % os.getpid())
            except CgroupError as e:
                sys.exit("soak: --memory-limit: %s" % e)
            join = self.cgroup.join
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=self.log,
                                     preexec_fn=join)
        self.port = None
        while self.port is None:  # loading a large checkpoint takes what it takes
            if self.proc.poll() is not None:
                sys.exit("soak: the server exited at start:\n" + open(self.log_path).read())
            for line in open(self.log_path, errors="replace"):
                if '"event":"listening"' in line:
                    self.port = json.loads(line)["port"]
                    self.listening = line.strip()
            time.sleep(0.2)
        self.url = "http://127.0.0.1:%d" % self.port

    def state_memory_log(self):
        """The server's state_memory log lines (the pool's budget and its arithmetic)."""
        out = []
        for line in open(self.log_path, errors="replace"):
            if '"event":"state_memory' in line:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
        return out

    def metrics(self):
        """The server's samples, histogram buckets left out."""
        return {k: v for k, v in server_metrics.fetch(self.port, 60).items()
                if "_bucket{" not in k}

    def rss_mib(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
        return float("nan")

    # ---- side clients --------------------------------------------------------------
    def count(self, key, status=None, error=None):
        with self.lock:
            if key:
                self.side[key] += 1
            if error is not None and len(self.side_errors) < 20:  # what went wrong, kept
                self.side_errors.append("t=%.0fs %s: %s" % (time.time() - self.t0,
                                                           type(error).__name__, error))
            if status is not None:
                self.side_status[str(status)] = self.side_status.get(str(status), 0) + 1

    def open_stream(self, max_tokens, rcvbuf=None):
        sk = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            sk.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        sk.settimeout(120)
        sk.connect(("127.0.0.1", self.port))
        words = " ".join(random.choice(("the", "jury", "said", "county", "of", "a", "and"))
                         for _ in range(random.randint(5, 120)))
        body = json.dumps({"prompt": words, "max_tokens": max_tokens, "stream": True,
                           "ignore_eos": True, "temperature": 0.8}).encode()
        sk.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: soak\r\nContent-Type: "
                   b"application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        return sk

    def read_status(self, sk, got):
        while b"\r\n" not in got:
            d = sk.recv(4096)
            if not d:
                return None, got
            got += d
        m = re.match(rb"HTTP/1\.[01] (\d{3})", got)
        return (int(m.group(1)) if m else None), got

    def canceller(self, rnd):
        while not self.stop.is_set():
            try:
                sk = self.open_stream(rnd.randint(50, 400))
                events = rnd.choice((0, 0, 1, 2, 5, 20))
                got = b""
                if events:
                    st, got = self.read_status(sk, got)
                    self.count(None, st)
                    while got.count(b"data: ") < events:
                        d = sk.recv(4096)
                        if not d:
                            break
                        got += d
                sk.close()  # gone mid-request: the server must cancel it and free its state
                self.count("cancelled")
            except OSError as e:
                self.count("errors", error=e)
            self.stop.wait(rnd.uniform(0.05, 1.0))

    def slow_reader(self, rnd):
        while not self.stop.is_set():
            try:
                sk = self.open_stream(rnd.randint(16, 64), rcvbuf=2048)
                st, got = self.read_status(sk, b"")
                self.count(None, st)
                while not got.endswith(b"data: [DONE]\r\n\r\n") and \
                        not got.endswith(b"data: [DONE]\n\n") and b"0\r\n\r\n" not in got[-8:]:
                    time.sleep(rnd.uniform(0.02, 0.2))
                    d = sk.recv(rnd.randint(16, 96))
                    if not d:
                        break
                    got += d
                self.count("slow_done" if b"[DONE]" in got else "slow_cut")
                sk.close()
            except OSError as e:
                self.count("errors", error=e)

    # ---- the run -------------------------------------------------------------------
    def run(self):
        a = self.a
        self.start_server()
        secs = int(a.minutes * 60)
        self.write({"event": "start", "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "minutes": a.minutes, "server": self.cmd, "listening": self.listening,
                    "rss_slope_limit_mib_per_min": a.rss_slope, "concurrency": a.concurrency,
                    "interval_s": a.interval,
                    "memory_cgroup": self.cgroup and self.cgroup.describe(),
                    "state_memory": self.state_memory_log()})
        bench_json = a.out + ".bench.json"
        bench = subprocess.Popen(
            [os.path.join(a.bin, "mhla-bench"), "--url", self.url, "--concurrency",
             str(a.concurrency), "--duration", str(secs), "--input-len", "128", "--input-dist",
             "uniform", "--input-spread", "96", "--output-len", "96", "--output-dist", "normal",
             "--output-spread", "48", "--num-prompts", "32", "--no-progress", "--json",
             bench_json, "--samples", a.out + ".bench.samples.jsonl"],
            stdout=open(a.out + ".bench.txt", "w"), stderr=subprocess.STDOUT)
        self.write({"event": "bench_started", "t": round(time.time() - self.t0, 3)})
        threads = []
        for i in range(a.cancellers):
            threads.append(threading.Thread(target=self.canceller, args=(random.Random(i),)))
        for i in range(a.slow_readers):
            threads.append(threading.Thread(target=self.slow_reader,
                                            args=(random.Random(100 + i),)))
        for t in threads:
            t.daemon = True
            t.start()
        samples = []
        next_t = self.t0 + a.interval
        while time.time() < self.t0 + secs and bench.poll() is None:
            time.sleep(max(0.0, min(next_t, self.t0 + secs) - time.time()))
            if time.time() >= next_t:
                samples.append(self.sample("load"))
                next_t += a.interval
        self.stop.set()
        for t in threads:
            t.join()
        bench.wait()  # requests in flight finish
        # idle: every gauge back to 0
        idle_ok, m = False, {}
        deadline = time.time() + 60
        while time.time() < deadline:
            m = self.metrics()
            if all(m.get(g, 0) == 0 for g in GAUGES):
                idle_ok = True
                break
            time.sleep(0.5)
        final = self.sample("idle")
        reasons = []
        fives = {k: v for k, v in final["status"].items() if k.startswith("5") and v}
        fives.update({"client_" + k: v for k, v in self.side_status.items() if k.startswith("5")})
        if fives:
            reasons.append("5xx statuses: %s" % fives)
        bench_res = None
        if os.path.exists(bench_json):
            bench_res = json.load(open(bench_json))["levels"][0]
        if bench.returncode != 0 or not bench_res or bench_res["failed"]:
            reasons.append("mhla-bench: exit %s, failures %s" % (
                bench.returncode, bench_res and bench_res.get("failures")))
        if not idle_ok:
            reasons.append("not idle after 60 s: %s" % {g: m.get(g) for g in GAUGES})
        slope = rss_slope(samples, max(60.0, secs / 3.0))
        if slope is not None and slope > a.rss_slope:
            reasons.append("RSS grows %.2f MiB/min (limit %.2f)" % (slope, a.rss_slope))
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = "killed after 120 s"
        if rc != 0:
            reasons.append("server exit status %s on SIGTERM" % rc)
        cgroup_end = None
        if self.cgroup:
            cgroup_end = self.cgroup.usage()
            err = self.cgroup.remove()
            if err:
                print("soak: " + err, file=sys.stderr)
        verdict = {"event": "verdict", "pass": not reasons, "reasons": reasons,
                   "rss_slope_mib_per_min": slope, "samples": len(samples),
                   "bench": bench_res and {k: bench_res.get(k) for k in (
                       "completed", "failed", "failures", "output_tokens", "request_throughput",
                       "output_token_throughput")} | {
                       "ttft_p99_ms": bench_res["ttft_ms"]["p99"],
                       "e2e_p99_ms": bench_res["e2e_ms"]["p99"]},
                   "side": self.side, "side_status": self.side_status,
                   "side_errors": self.side_errors, "memory_cgroup": cgroup_end,
                   "elapsed_s": round(time.time() - self.t0, 1)}
        self.write(verdict)
        print(json.dumps(verdict, indent=1))
        self.draw()
        return 0 if not reasons else 1

    def draw(self):
        """The picture beside the results (a failure to draw is reported, not the verdict)."""
        out = (self.a.out[:-6] if self.a.out.endswith(".jsonl") else self.a.out) + ".svg"
        try:
            n = soak_svg.picture(self.a.out, self.a.out + ".bench.samples.jsonl", out)
            print("soak: picture %s (%d requests)" % (out, n))
        except (OSError, ValueError, KeyError) as e:
            print("soak: no picture: %s" % e, file=sys.stderr)

    def sample(self, phase):
        m = self.metrics()
        s = {"event": "sample", "phase": phase, "t": round(time.time() - self.t0, 1),
             "rss_mib": round(self.rss_mib(), 2),
             "pages_mib": round(pages_mib(m), 2),
             "status": {k.split('"')[1]: v for k, v in m.items()
                        if k.startswith("mhla_http_requests_total{")},
             "gauges": {g: m.get(g) for g in GAUGES},
             "counters": {k: v for k, v in m.items() if k.endswith("_total") or
                          k.startswith("mhla_requests_finished_total")},
             "side": dict(self.side), "side_status": dict(self.side_status)}
        if self.cgroup:
            s["memory_cgroup"] = self.cgroup.usage()
        self.write(s)
        s["rss_besides_pages_mib"] = round(s["rss_mib"] - s["pages_mib"], 2)
        print("soak t=%6.0fs rss=%8.1f MiB (pages %.1f) running=%s waiting=%s statuses=%s side=%s" % (
            s["t"], s["rss_mib"], s["pages_mib"], m.get("mhla_requests_running"),
            m.get("mhla_requests_waiting"), s["status"], self.side), flush=True)
        return s


def pages_mib(m):
    """MiB of state pages in use or cached (0 without a state pool)."""
    n = m.get('mhla_state_pages{kind="used"}', 0) + m.get('mhla_state_pages{kind="cached"}', 0)
    return n * m.get("mhla_state_page_bytes", 0) / (1 << 20)


def rss_slope(samples, warmup_s):
    """Least-squares slope (MiB per minute) of RSS less the state pages, over the
    samples after warmup_s."""
    pts = [(s["t"] / 60.0, s["rss_mib"] - s.get("pages_mib", 0)) for s in samples
           if s["t"] >= warmup_s]
    if len(pts) < 3:
        return None
    n = len(pts)
    mx = sum(p[0] for p in pts) / n
    my = sum(p[1] for p in pts) / n
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx if sxx else None


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("minutes", type=float)
    ap.add_argument("--bin", required=True, help="folder of mhla-server and mhla-bench")
    ap.add_argument("--out", required=True, help="results file (JSON lines, appended)")
    ap.add_argument("--model", default=None, help="checkpoint (default: the server's default)")
    ap.add_argument("--server-args", default="", help="extra server flags")
    ap.add_argument("--concurrency", type=int, default=8, help="mhla-bench streams in flight")
    ap.add_argument("--cancellers", type=int, default=2)
    ap.add_argument("--slow-readers", type=int, default=2)
    ap.add_argument("--interval", type=float, default=30.0,
                    help="seconds between samples, and the picture's latency interval (30)")
    ap.add_argument("--rss-slope", type=float, default=2.0,
                    help="RSS growth limit after the warm-up, MiB per minute (default 2)")
    ap.add_argument("--memory-limit", type=int, default=0, metavar="MIB",
                    help="run the server in a fresh memory cgroup (v2 or v1) with this limit, "
                         "removed at the end (needs root or a delegated cgroup)")
    a = ap.parse_args()
    soak = Soak(a)
    try:
        return soak.run()
    finally:
        if soak.cgroup and os.path.isdir(soak.cgroup.path):
            if getattr(soak, "proc", None) and soak.proc.poll() is None:
                soak.proc.kill()
                soak.proc.wait()
            soak.cgroup.remove()


if __name__ == "__main__":
    sys.exit(main())
