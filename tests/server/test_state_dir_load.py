#!/usr/bin/env python3
"""mhla-server --state-dir: prefixes load from disk off the engine thread.

A model with large state pages (2 MiB a block) and cheap steps, so that reading a long
prefix from the tier takes many decode steps' time. A restarted server streams a short
prompt; while it decodes, a second request's 62-block prefix loads from disk (the page
files first dropped from the OS page cache, so they come from the device).

- The stream keeps stepping: its largest gap between decode steps (the server's debug step
  records) while the other request was in the server stays under the longest step of that
  time (the loaded prompt's tail reads all its pages) plus half the load's own time
  (mhla_state_disk_load_seconds_total). A load on the engine thread stalls every stream
  for the whole load, on top of any step. The check needs a load of at least 10 of the
  stream's solo step gaps to tell the two apart; it says so and fails otherwise.
- The loaded request's answer (tokens, logprobs, top 5) is the same as computing every
  token, and it was served from disk (usage cached_tokens: every whole block).
- A load that meets a bad file midway (a flipped byte in block 20): the blocks before it
  come from disk, the rest is computed, the answer is the same, the file is counted.
"""
import argparse
import glob
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from checks import check, finish  # noqa: E402
from pace import Pace  # noqa: E402
import server_metrics  # noqa: E402
import server_proc  # noqa: E402
import sse  # noqa: E402


ap = argparse.ArgumentParser(description=__doc__)
ap.add_argument("--bin", required=True)
ap.add_argument("--work", required=True)
a = ap.parse_args()
shutil.rmtree(a.work, ignore_errors=True)
os.makedirs(a.work)
SERVER = os.path.join(a.bin, "mhla-server")
C, BLOCKS = 16, 64
pace = Pace()
PROCS = []


def checkpoint():
    out = os.path.join(a.work, "model")
    gen = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools",
                       "gen_checkpoint.py")
    # one head of 256 x 512 summaries in each of 4 layers: 2 MiB of f32 state a block
    subprocess.run([sys.executable, gen, "--out", out, "--vocab", "256", "--hidden", "256",
                    "--layers", "4", "--heads", "1", "--expand-v", "2", "--chunk", str(C),
                    "--blocks", str(BLOCKS), "--seed", "41"], check=True, capture_output=True)
    return out


MODEL = checkpoint()
LONG = [(11 * i + 5) % 250 + 1 for i in range(62 * C + 7)]  # 62 whole blocks and 7 tokens
SHORT = [(3 * i + 1) % 250 + 1 for i in range(C + 3)]


class Server:
    def __init__(self, name, state_dir=None):
        argv = [SERVER, "--model", MODEL, "--port", "0", "--device", "cpu", "--threads", "2",
                "--state-memory", "640", "--log-level", "debug"]
        if state_dir:
            argv += ["--state-dir", state_dir]
        self.log = os.path.join(a.work, name + ".log")
        self.proc = server_proc.start_logged(argv, self.log)
        PROCS.append(self.proc)
        self.port, why = server_proc.listening_port(self.proc, self.log, pace.limit("start", 1, 60))
        if self.port is None:
            sys.exit("FAIL: %s did not start: %s" % (name, why))

    def answer(self, prompt, max_tokens=4):
        """(tokens, logprobs with the top 5), cached_tokens."""
        c = http.client.HTTPConnection("127.0.0.1", self.port,
                                       timeout=pace.limit("answer", 1, 120))
        c.request("POST", "/v1/completions", json.dumps(
            {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
             "return_token_ids": True, "logprobs": 5}), {"Content-Type": "application/json"})
        r = json.loads(c.getresponse().read())
        ch = r["choices"][0]
        return ((ch["token_ids"], ch["logprobs"]["token_logprobs"], ch["logprobs"]["top_logprobs"]),
                r["usage"].get("prompt_tokens_details", {}).get("cached_tokens"))

    def stream_times(self, prompt, max_tokens, times):
        """Streams a greedy answer, appending each token's arrival time to times."""
        c = http.client.HTTPConnection("127.0.0.1", self.port,
                                       timeout=pace.limit("answer", 8, 300))
        c.request("POST", "/v1/completions", json.dumps(
            {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
             "stream": True, "return_token_ids": True}), {"Content-Type": "application/json"})
        for ev in sse.events(c.getresponse()):
            ch = ev.get("choices") or [{}]
            now = time.time()
            times.extend([now] * len(ch[0].get("token_ids") or []))

    def metrics(self):
        return server_metrics.fetch(self.port, 60)

    def wait_metric(self, name, at_least):
        return server_metrics.wait_until(self.metrics, lambda m: m.get(name, 0) >= at_least,
                                         pace.limit("answer", 8, 120))

    def stop(self):
        server_proc.stop(self.proc, 60)


def drop_page_cache(d):
    for f in glob.glob(os.path.join(d, "*.kvp")):
        fd = os.open(f, os.O_RDONLY)
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)


def gaps(times, t0=0.0, t1=float("inf")):
    """Gaps between consecutive times whose later one is in [t0, t1]; a stretch still
    open at t1 counts up to the first time after it."""
    return [y - x for x, y in zip(times, times[1:]) if y >= t0 and x <= t1]


def step_records(log):
    """(end time, forward seconds, decode rows) of every engine step: the server's debug
    step records. The stream's pace is read here, not from its events, which may hold
    tokens back until their text is whole."""
    out = []
    for line in open(log, errors="replace"):
        if '"event":"step"' in line:
            rec = json.loads(line)
            w = rec["message"].replace("(", " ").replace(";", " ").split()
            field = {w[i]: w[i + 1] for i in range(len(w) - 1)}
            out.append((rec["ts"], float(field["took"]) / 1000, int(field["decode_rows"])))
    return out


def stepping_case(d, want):
    s = Server("load", d)
    s.answer(SHORT[:5], 2)  # a fresh process's first-touch costs, outside the measure
    times, other = [], {}
    n_stream = BLOCKS * C - len(SHORT) - 1  # to the end of the context
    t = threading.Thread(target=s.stream_times, args=(SHORT, n_stream, times))
    t.start()
    deadline = time.time() + pace.limit("answer", 4, 120)
    while len([r for r in step_records(s.log) if r[2]]) < 40 and time.time() < deadline \
            and t.is_alive():
        time.sleep(0.01)
    other["t0"] = time.time()
    other["answer"], other["cached"] = s.answer(LONG)
    other["t1"] = time.time()
    t.join()
    m = s.metrics()
    load_s = m.get("mhla_state_disk_load_seconds_total", 0.0)
    steps = step_records(s.log)
    decode = [r[0] for r in steps if r[2] > 0]  # the steps that moved the stream
    # the log's times are whole milliseconds: on a fast machine steps come closer than that
    # and most solo gaps read 0, so the pace is never taken below 1 ms
    solo = max(statistics.median(gaps([x for x in decode if x < other["t0"]][10:]) or [1e9]),
               0.001)
    during = gaps(decode, other["t0"], other["t1"])
    worst = max(during) if during else float("inf")
    check(len(times) == n_stream and decode[-1] > other["t1"],
          "the stream outlived the other request (%d tokens)" % len(times))
    check(other["answer"] == want and other["cached"] == 62 * C,
          "the prefix loaded from disk: the answer is the same as computing it "
          "(cached_tokens %s)" % other["cached"])
    ok = check(load_s >= 10 * solo, "the load took %.3f s, %.0f of the stream's solo step gaps "
               "of %.4f s (at least 10 tell a load on the engine thread apart)" %
               (load_s, load_s / solo, solo))
    # the loaded prompt's tail is a step that reads all 62 pages: inherent work, timed by
    # the server; what a load on the engine thread adds comes on top of it
    step_s = max([r[1] for r in steps if other["t0"] <= r[0] <= other["t1"] + 0.002] + [0.0])
    bound = step_s + load_s / 2
    check(ok and worst < bound,
          "while the other request loaded, the stream's largest gap between steps was %.4f s: "
          "under the longest step then (%.4f s) plus half the load (%.3f s); %d gaps" %
          (worst, step_s, load_s / 2, len(during)))
    s.stop()


def bad_block_case(d, want, mine):
    files = [f for f in mine if f.endswith("-%d.kvp" % (20 * C))]
    if not check(len(files) == 1, "the file of block 20 is there"):
        return
    with open(files[0], "r+b") as f:
        f.seek(os.path.getsize(files[0]) // 2)
        b = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([b[0] ^ 0x10]))
    s = Server("bad_block", d)
    got, cached = s.answer(LONG)
    m = s.metrics()
    check(got == want and cached == 19 * C,
          "a flipped byte in block 20: blocks 1-19 from disk, the rest computed, the answer "
          "the same (cached_tokens %s)" % cached)
    check(m.get("mhla_state_disk_corrupt_files_total") == 1, "the bad file is counted")
    s.stop()


try:
    d = os.path.join(a.work, "tier")
    s = Server("write", d)
    want = pace.measure("answer", 1, lambda: s.answer(LONG))[0]
    check(s.wait_metric("mhla_state_disk_writes_total", 62), "the 62 blocks were written")
    s.stop()
    mine = glob.glob(os.path.join(d, "*.kvp"))  # the long prompt's files, nothing else yet
    drop_page_cache(d)
    stepping_case(d, want)
    bad_block_case(d, want, mine)
finally:
    for p in PROCS:
        if p.poll() is None:
            p.kill()
            p.wait()
sys.exit(finish())
