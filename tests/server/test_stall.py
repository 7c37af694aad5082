#!/usr/bin/python3
"""A long prompt arriving while a stream decodes must not stall the stream.

The server learns its step costs (fixed, per decode row, per prefill token) and sizes each
step's prompt chunk to --itl-target-ms. This test

  1. starts mhla-server with --itl-target-ms 0 (the token budget alone, one whole-prompt
     chunk per step) on a random checkpoint, feeds one long prompt alone and lets one
     stream decode, and reads the learned costs from /metrics;
  2. picks the target from them: 4 decode steps, at least 25 ms, and checks that one
     whole-prompt chunk costs over 10 targets (else the model is too fast here to tell);
  3. runs the scenario -- a stream decodes, the long prompt arrives, the stream reads on
     until the long prompt has its first token -- on a server with that target, and
     checks that the stream's largest inter-token gap stays under
         bound = 3 x max(target, 1.25 x the decode step's learned cost) + 2 x noise
     where the decode cost is read from /metrics after the run (a busy machine's slower
     steps widen the bound, as they lengthen the steps) and noise is the stream's largest
     gap over the 100 tokens it decoded alone before the long prompt arrived (what the
     machine's preemptions add to any gap, measured in the same run);
  4. runs the same scenario with --itl-target-ms 0 and checks that its largest gap is
     over the bound: the check can fail, and fails without the time budget.

--target-ms N runs step 3 with N instead (0 shows the failure). Limits on waits derive from
the measured pace (tests/tools/pace.py); the bound derives from the learned costs.

usage: test_stall.py --bin BUILD/bin --work DIR [--target-ms N]
"""
import argparse
import http.client
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import gen_checkpoint  # noqa: E402
import pace  # noqa: E402
import server_metrics  # noqa: E402
import server_proc  # noqa: E402

PACE = pace.Pace()
FAILURES = []
PROMPT = 2000  # the long prompt's tokens
CAP = 2048  # --max-batch-tokens: the whole prompt fits one step without a time budget


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILURES.append(what)
    return cond


class Server:
    def __init__(self, bin_dir, model, work, name, target_ms):
        self.log_path = os.path.join(work, name + ".log")
        self.proc = server_proc.start_logged(
            [os.path.join(bin_dir, "mhla-server"), "--model", model, "--port", "0", "--device",
             "cpu", "--threads", "1", "--max-batch-tokens", CAP, "--itl-target-ms", target_ms,
             "--state-memory", "0"], self.log_path)
        self.port, why = server_proc.listening_port(self.proc, self.log_path,
                                                    PACE.limit("load", 1, 30))
        if self.port is None:
            server_proc.stop(self.proc, 5)
            raise RuntimeError("server did not start: " + why)

    def conn(self, timeout):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def complete(self, body, timeout):
        c = self.conn(timeout)
        c.request("POST", "/v1/completions", json.dumps(body),
                  {"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, json.loads(data)

    def costs(self):
        m = server_metrics.fetch(self.port, PACE.limit("token", 100, 10))
        part = lambda p: m['mhla_step_cost_seconds{part="%s"}' % p]  # noqa: E731
        close = m.get('mhla_step_cost_seconds{part="per_block_close"}', -1)
        check(close >= 0, "/metrics gives the learned cost of a block's close (%g s)" % close)
        return part("fixed"), part("per_decode_row"), part("per_prefill_token")

    def stop(self):
        server_proc.stop(self.proc, 30)


def stream_gaps(s, until, limit_s):
    """Streams one choice (one token per event) until until() holds after a token; returns
    the arrival time of every token event."""
    c = s.conn(limit_s)
    # printable ASCII only: every token is a byte of text of its own, so every token is
    # one event (the byte-level codec holds back bytes that may start a UTF-8 character)
    body = {"prompt": [1, 2, 3, 4], "max_tokens": 3000, "ignore_eos": True, "stream": True,
            "logit_bias": {str(i): 100 for i in range(32, 127)}}
    c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    times = []
    t_end = time.time() + limit_s
    while time.time() < t_end:
        line = r.fp.readline()
        if not line or line.startswith(b"data: [DONE]"):
            break
        if line.startswith(b"data: "):
            times.append(time.time())
            if until():
                break
    c.close()  # the server cancels the rest
    return times


BASELINE = 100  # stream tokens before the long prompt arrives: the machine's own noise


def scenario(s, long_prompt, limit_s):
    """A stream decodes; after BASELINE of its tokens the long prompt arrives; the stream
    reads on until the long prompt's first token. Returns the stream's largest gap while
    the long prompt prefilled, its largest gap before (decode alone: what a busy machine's
    preemptions add to any gap), the long prompt's status and the gaps counted."""
    state = {"t_submit": None, "t_done": None, "status": None}

    def long_request():
        state["t_submit"] = time.time()
        state["status"], _ = s.complete({"prompt": long_prompt, "max_tokens": 1}, limit_s)
        state["t_done"] = time.time()

    th = threading.Thread(target=long_request)
    seen = [0]

    def until():
        seen[0] += 1
        if seen[0] == BASELINE:
            th.start()
        return state["t_done"] is not None

    times = stream_gaps(s, until, limit_s)
    if seen[0] >= BASELINE:
        th.join(limit_s)
    t0 = state["t_submit"] or times[-1]
    gaps = [(b - a, b >= t0) for a, b in zip(times, times[1:])]
    window = [g for g, during in gaps if during]
    before = [g for g, during in gaps[1:] if not during]  # the first follows the prefill
    return max(window, default=0.0), max(before, default=0.0), state["status"], len(window)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--target-ms", type=int, default=None,
                    help="run the scenario with this target (0: show the failure)")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    model = os.path.join(a.work, "model")
    gen_checkpoint.main(["--out", model, "--vocab", "512", "--hidden", "512", "--layers", "4",
                         "--heads", "4", "--chunk", "64", "--blocks", "80", "--seed", "16"])
    long_prompt = [5 + (7 * i) % 500 for i in range(PROMPT)]

    # 1. the costs, learned by a server without a time budget
    PACE.measure("load", 1, lambda: None)
    s = Server(a.bin, model, a.work, "calibrate", 0)
    try:
        PACE.measure("token", PROMPT, lambda: s.complete({"prompt": long_prompt, "max_tokens": 1},
                                                          600))
        n = [0]
        stream_gaps(s, lambda: n.__setitem__(0, n[0] + 1) or n[0] >= 40,
                    PACE.limit("token", PROMPT, 60))
        fixed, per_row, per_token = s.costs()
    finally:
        s.stop()
    decode = fixed + per_row
    chunk = fixed + per_token * PROMPT
    target_ms = max(25, int(4000 * decode) + 1)
    print("learned: decode step %.2f ms, a %d-token chunk %.1f ms; target %d ms" %
          (decode * 1e3, PROMPT, chunk * 1e3, target_ms))
    if not check(chunk > 10 * target_ms / 1e3,
                 "one whole-prompt chunk costs over 10 targets (%.1f ms vs %d ms)" %
                 (chunk * 1e3, target_ms)):
        return 1
    limit = PACE.limit("token", 4 * PROMPT, 120)
    runs = [("budget", target_ms if a.target_ms is None else a.target_ms)]
    if a.target_ms is None:
        runs.append(("before", 0))
    for name, t in runs:
        s = Server(a.bin, model, a.work, name, t)
        try:
            gap, noise, status, n_gaps = scenario(s, long_prompt, limit)
            fixed, per_row, _ = s.costs()
        finally:
            s.stop()
        bound = 3 * max(target_ms / 1e3, 1.25 * (fixed + per_row)) + 2 * noise
        print("%s (--itl-target-ms %d): largest gap %.1f ms over %d tokens; bound %.1f ms "
              "(decode step %.2f ms, largest gap of decode alone %.1f ms)" %
              (name, t, gap * 1e3, n_gaps, bound * 1e3, (fixed + per_row) * 1e3, noise * 1e3))
        check(status == 200, "%s: the long prompt completed" % name)
        if name == "budget":
            check(gap <= bound, "the stream's largest gap (%.1f ms) stays under the bound "
                  "(%.1f ms) while the long prompt prefills" % (gap * 1e3, bound * 1e3))
        else:
            check(gap > bound, "without a time budget the largest gap (%.1f ms) is over the "
                  "bound (%.1f ms): the check can fail" % (gap * 1e3, bound * 1e3))
    print("FAILED: %d" % len(FAILURES) if FAILURES else "all passed")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
