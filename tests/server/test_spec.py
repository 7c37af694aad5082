#!/usr/bin/python3
"""Prompt-lookup speculation (--speculate ngram) answers exactly as plain decoding.

Two servers on the demo model, one with --speculate ngram and one with --speculate off
(same --cpu-isa path, same state pool), get the same requests; every answer must be the
same: text, finish_reason, usage, and every token's logprob and top list. The prompts
are copy-heavy (a ~1,000-token text, 400 on the portable path, then its start again), so
the ngram server drafts and verifies many tokens, and spans cross block (= page)
boundaries (blocks of 64):
  1. greedy with logprobs;
  2. seeded temperature 0.7 with top_p, the three penalties and a logit bias, logprobs;
     n = 2 seeded choices;
  3. stop strings taken from the middle of plain decoding's output (so that they fall
     inside a verified span), and max_tokens that ends inside one;
  4. streamed: the events' text is the non-streamed text;
  5. a mixed batch of 6 different requests at once on the ngram server, each equal to
     the off server's answer alone;
  6. the prefix cache: the same request again is served from it and answers the same;
  7. cancellation: a streamed request is dropped (in the stress part below: while it
     drafts); the server then has nothing running and answers the next request exactly;
  8. a structured output (response_format json_object) drafts nothing and is exact;
  9. /metrics: drafted and accepted tokens counted under mode="ngram" (accepted > 0: the test exercised
     verification), the acceptance rate;
 11. stress: a random checkpoint with blocks of 8 tokens, --draft-min 7 (drafts wherever
     lookup finds any, mostly wrong): greedy and seeded sampled answers with logprobs,
     alone and 6 at once, equal plain decoding's, and /metrics counts drafts taken back
     to before a block start they had crossed (the test fails if there were none);
 10. --speculate draft without --draft-model is refused with a message that says so
     (the draft-model mode has its own test, test_spec_draft.py);
 12. a --cpu-isa path this build lacks is refused with the message the skips below key on.
Exit 77 when this CPU cannot run the --cpu-isa path.

usage: test_spec.py --bin BUILD/bin --work DIR [--cpu-isa P]
"""
import argparse
import http.client
import json
import os
import platform
import random
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
import gen_checkpoint  # noqa: E402
import pace  # noqa: E402
import server_metrics  # noqa: E402
import server_proc  # noqa: E402

PACE = pace.Pace()
FAILURES = []
MODEL = os.path.join(ROOT, "models", "brown-mhla")


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILURES.append(what)
    return cond


class Server:
    def __init__(self, bin_dir, work, mode, isa, model=MODEL, extra=(), name=""):
        self.log_path = os.path.join(work, "server_%s%s.log" % (mode, name))
        argv = [os.path.join(bin_dir, "mhla-server"), "--model", model, "--port", "0",
                "--device", "cpu", "--speculate", mode, "--state-memory", "256", *extra]
        if isa:
            argv += ["--cpu-isa", isa]
        self.proc = server_proc.start_logged(argv, self.log_path)
        self.port, why = server_proc.listening_port(self.proc, self.log_path,
                                                    PACE.limit("load", 1, 60))
        if self.port is None:
            server_proc.stop(self.proc, 5)
            if isa and server_proc.isa_refused(why):
                print("skipped: this CPU cannot run the %s path" % isa)
                sys.exit(77)
            raise RuntimeError("server did not start: %s" % why)

    def post(self, body, timeout):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        c.request("POST", "/v1/completions", json.dumps(body),
                  {"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        c.close()
        if r.status != 200:
            raise RuntimeError("HTTP %d: %s" % (r.status, data[:300]))
        return json.loads(data)

    def stream(self, body, timeout, stop_after=None):
        """Streamed text and the number of events; with stop_after, drops the connection
        after that many events."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        c.request("POST", "/v1/completions", json.dumps(dict(body, stream=True)),
                  {"Content-Type": "application/json"})
        r = c.getresponse()
        text, events = "", 0
        for line in r:
            line = line.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            ev = json.loads(line[6:])
            for ch in ev.get("choices", []):
                text += ch.get("text", "")
            events += 1
            if stop_after is not None and events >= stop_after:
                c.sock.close()
                break
        c.close()
        return text, events

    def metrics(self):
        return server_metrics.fetch(self.port, PACE.limit("req", 1, 30))

    def stop(self):
        server_proc.stop(self.proc, 10)


def answer(resp):
    """What must match: per choice the text, finish reason, tokens' logprobs; the usage
    (but for the cached prompt tokens, which depend on what each server saw before)."""
    usage = {k: v for k, v in resp["usage"].items() if k != "prompt_tokens_details"}
    return ([(c["index"], c["text"], c["finish_reason"], c.get("logprobs"))
             for c in resp["choices"]], usage)


# How much text the cases copy, and which seeds take the long sampled runs. The portable
# path is the scalar reference, several times slower than the vector paths, and runs the
# same speculation code in the server: its leg takes the same cases over copy prompts of
# 400 tokens (432 with the start again: still past 6 blocks of 64) and one long sampled run
# instead of three.
SIZE = {"copy": 1000, "long_seeds": (1, 2, 3)}


def size_for(isa):
    if isa == "portable":
        SIZE.update(copy=400, long_seeds=(1,))


def copy_prompt(shift=0):
    vocab = json.load(open(os.path.join(MODEL, "config.json")))["vocab_size"]
    ids = [int(x) % vocab for x in open(os.path.join(ROOT, "train", "val_excerpt.ids")).read()
           .split()]
    ids = (ids[shift:] + ids[:shift])[:SIZE["copy"]]
    return ids + ids[:32]


SAMPLED = {"temperature": 0.7, "top_p": 0.9, "seed": 11, "presence_penalty": 0.4,
           "frequency_penalty": 0.3, "repetition_penalty": 1.1,
           "logit_bias": {"17": 2.5, "42": -3}, "logprobs": 2}


def same(spec, off, body, what):
    t = PACE.limit("req", body.get("max_tokens", 16), 120)
    a, b = spec.post(body, t), off.post(body, t)
    return check(answer(a) == answer(b), what), a, b


def exact_cases(spec, off):
    p = copy_prompt()
    PACE.measure("req", 150, lambda: off.post({"prompt": p, "max_tokens": 150,
                                               "temperature": 0}, 600))
    _, a, plain = same(spec, off, {"prompt": p, "max_tokens": 150, "temperature": 0,
                                   "logprobs": 3}, "greedy with logprobs, 150 tokens")
    same(spec, off, dict(SAMPLED, prompt=p, max_tokens=150),
         "seeded temperature 0.7, top_p, penalties, logit_bias, logprobs")
    same(spec, off, dict(SAMPLED, prompt=copy_prompt(300), max_tokens=120, n=2),
         "n = 2 seeded choices")
    for seed in SIZE["long_seeds"]:  # long and sampled: drafts missed at many block starts
        same(spec, off, dict(SAMPLED, prompt=copy_prompt(37 * seed), max_tokens=400, seed=seed,
                             temperature=0.9), "400 tokens at temperature 0.9, seed %d" % seed)
    text = plain["choices"][0]["text"]
    for lo in (40, 90, 161):
        stop = text[lo:lo + 6]
        if len(stop.strip()) < 3:
            continue
        ok, a, _ = same(spec, off, {"prompt": p, "max_tokens": 150, "temperature": 0,
                                    "stop": [stop], "logprobs": 1},
                        "stop string %r from the middle of the output" % stop)
        check(a["choices"][0]["finish_reason"] == "stop", "the stop string %r ends it" % stop)
    for mt in (37, 64, 101):
        _, a, _ = same(spec, off, {"prompt": p, "max_tokens": mt, "temperature": 0},
                       "max_tokens %d" % mt)
        check(a["usage"]["completion_tokens"] == mt, "max_tokens %d: that many tokens" % mt)
    st, events = spec.stream({"prompt": p, "max_tokens": 150, "temperature": 0},
                             PACE.limit("req", 150, 120))
    check(st == text, "streamed text equals the non-streamed text (%d events)" % events)


def all_at_once(server, bodies, tokens):
    """The answers to bodies sent at once, each on its own connection (a time limit
    for up to tokens tokens each)."""
    got = [None] * len(bodies)

    def one(i):
        got[i] = answer(server.post(bodies[i], PACE.limit("req", tokens, 300)))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(bodies))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return got


def mixed_batch(spec, off):
    bodies = [{"prompt": copy_prompt(0), "max_tokens": 90, "temperature": 0},
              dict(SAMPLED, prompt=copy_prompt(100), max_tokens=80),
              {"prompt": copy_prompt(200), "max_tokens": 70, "temperature": 0, "logprobs": 2,
               "stop": ["the"]},
              {"prompt": "The jury said", "max_tokens": 60, "temperature": 1.0, "seed": 5},
              dict(SAMPLED, prompt=copy_prompt(400), max_tokens=100, n=2),
              {"prompt": copy_prompt(500), "max_tokens": 50, "temperature": 0}]
    want = [answer(off.post(b, PACE.limit("req", 100, 120))) for b in bodies]
    got = all_at_once(spec, bodies, 600)
    for i in range(len(bodies)):
        check(got[i] == want[i], "mixed batch: request %d equals plain decoding alone" % i)


def cache_and_cancel(spec, off):
    body = {"prompt": copy_prompt(700), "max_tokens": 120, "temperature": 0, "logprobs": 1}
    first = answer(spec.post(body, PACE.limit("req", 120, 120)))
    again = spec.post(body, PACE.limit("req", 120, 120))
    check(answer(again) == first and answer(again) == answer(off.post(body, 600)),
          "the same request again (prefix cache) answers the same")
    check(again["usage"].get("prompt_tokens_details", {}).get("cached_tokens", 0) > 0,
          "the second request was served from the prefix cache")
    cancel(spec, off, {"prompt": copy_prompt(800), "max_tokens": 400, "temperature": 0},
           {"prompt": copy_prompt(900), "max_tokens": 80, "temperature": 0}, 0)


def cancel(spec, off, body, after, must_draft):
    """A stream dropped after a few events: nothing runs any more, and (must_draft) it had
    drafted before; the next request is exact."""
    before = spec.metrics().get('mhla_spec_draft_tokens_total{mode="ngram"}', 0)
    spec.stream(body, PACE.limit("req", 400, 120), stop_after=3)
    deadline = time.time() + PACE.limit("req", 400, 60)
    m = spec.metrics()
    while m.get("mhla_requests_running", 1) > 0 and time.time() < deadline:
        time.sleep(0.05)
        m = spec.metrics()
    check(m.get("mhla_requests_running", 1) == 0, "the dropped stream no longer runs")
    if must_draft:
        check(m.get('mhla_spec_draft_tokens_total{mode="ngram"}', 0) > before, "the dropped stream had drafted")
    same(spec, off, after, "after the cancellation: exact")


def structured(spec, off):
    before = spec.metrics().get('mhla_spec_draft_tokens_total{mode="ngram"}', 0)
    same(spec, off, {"prompt": copy_prompt(50) + [10], "max_tokens": 40, "temperature": 0,
                     "response_format": {"type": "json_object"}},
         "response_format json_object: exact")
    check(spec.metrics().get('mhla_spec_draft_tokens_total{mode="ngram"}', 0) == before,
          "a row under a grammar drafts nothing")


def stress(args):
    model = os.path.join(args.work, "small_chunk")
    gen_checkpoint.main(["--out", model, "--vocab", "128", "--hidden", "64", "--layers", "2",
                         "--heads", "4", "--kv-heads", "2", "--chunk", "8", "--blocks", "64",
                         "--seed", "5"])
    spec = Server(args.bin, args.work, "ngram", args.cpu_isa, model, ["--draft-min", "7"],
                  "_stress")
    off = None
    try:
        off = Server(args.bin, args.work, "off", args.cpu_isa, model, [], "_stress")
        rng = random.Random(7)
        bodies = []
        for i in range(3):
            p = [rng.randrange(128) for _ in range(40)]
            p += p[:10]
            # ignore_eos: a random model's greedy first token may be its end of sequence
            bodies.append({"prompt": p, "max_tokens": 300, "temperature": 0, "logprobs": 2,
                           "ignore_eos": True})
            bodies.append(dict(SAMPLED, prompt=p, max_tokens=300, seed=i, ignore_eos=True))
        want = []
        for i, b in enumerate(bodies):
            ok, _, o = same(spec, off, b, "stress: request %d alone" % i)
            want.append(answer(o))
        got = all_at_once(spec, bodies, 1800)
        for i in range(len(bodies)):
            check(got[i] == want[i], "stress: request %d in a batch of 6 equals plain" % i)
        cancel(spec, off, dict(bodies[0], max_tokens=400), bodies[1], 1)
        m = spec.metrics()
        check(m.get("mhla_spec_block_restores_total", 0) > 0,
              "stress: drafts taken back to before a block start they had crossed (%d times)" %
              m.get("mhla_spec_block_restores_total", 0))
    finally:
        spec.stop()
        if off:
            off.stop()


def refuse_draft(bin_dir):
    r = subprocess.run([os.path.join(bin_dir, "mhla-server"), "--model", MODEL,
                        "--speculate", "draft", "--port", "0"], capture_output=True, text=True,
                       timeout=PACE.limit("load", 1, 60))
    check(r.returncode != 0 and "needs --draft-model" in r.stderr,
          "--speculate draft without a draft model is refused (%r)" % r.stderr.strip()[-120:])


def refuse_foreign_isa(bin_dir):
    """A path this build lacks is refused with the words server_proc.isa_refused looks for:
    the legs of every path skip on a CPU without theirs by that message, so a change to it
    must fail here, on every machine, not turn those skips into failures elsewhere."""
    isa = "neon" if platform.machine() in ("x86_64", "AMD64") else "avx512"
    r = subprocess.run([os.path.join(bin_dir, "mhla-server"), "--model", MODEL, "--port", "0",
                        "--cpu-isa", isa], capture_output=True, text=True,
                       timeout=PACE.limit("load", 1, 60))
    check(r.returncode != 0 and server_proc.isa_refused(r.stderr),
          "--cpu-isa %s is refused as a path that cannot run here (%r)"
          % (isa, r.stderr.strip()[-120:]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--cpu-isa", default="")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    size_for(args.cpu_isa)
    # --draft-min 2: every path drafts wherever lookup finds a match, so the answers below
    # compare verified drafts with plain decoding whether or not drafting pays on this
    # path (on the compute-bound portable path the cost rule alone may draft nothing)
    spec = Server(args.bin, args.work, "ngram", args.cpu_isa, extra=["--draft-min", "2"])
    off = None
    try:
        off = Server(args.bin, args.work, "off", args.cpu_isa)
        exact_cases(spec, off)
        mixed_batch(spec, off)
        cache_and_cancel(spec, off)
        structured(spec, off)
        m = spec.metrics()
        drafted = m.get('mhla_spec_draft_tokens_total{mode="ngram"}', 0)
        accepted = m.get('mhla_spec_accepted_tokens_total{mode="ngram"}', 0)
        check(drafted > 0 and accepted > 0,
              "drafts verified and accepted (%d of %d, rate %.3f)" % (
                  accepted, drafted, m.get('mhla_spec_acceptance_rate{mode="ngram"}', 0)))
        check(off.metrics().get('mhla_spec_draft_tokens_total{mode="ngram"}', -1) == 0,
              "--speculate off drafts nothing")
    finally:
        spec.stop()
        if off:
            off.stop()
    stress(args)
    refuse_draft(args.bin)
    refuse_foreign_isa(args.bin)
    if FAILURES:
        print("%d checks failed" % len(FAILURES))
        return 1
    print("server.spec: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
