#!/usr/bin/python3
"""Drafts from a draft model (--speculate draft --draft-model DIR) answer exactly as plain
decoding, and a draft model with another tokenizer is refused.

The model is the demo model; its draft is a copy of it with noise on every weight matrix
(so that it agrees with the model on part of the tokens: drafts are accepted, and taken
back after partial accepts, all the time). Two servers, one drafting with it (--draft-min
2: drafts on every path, whether or not the cost rule would) and one with --speculate off,
get the requests of
test_spec.py (server.spec), whose every answer must be the same: text, finish_reason,
usage, each token's logprob and top list:
  1. greedy with logprobs; seeded temperature 0.7 / 0.9 with top_p, the three penalties and
     a logit bias; n = 2 seeded choices; stop strings from the middle of the output (inside
     a verified span); max_tokens ending inside one; streamed;
  2. a mixed batch of 6 different requests at once;
  3. the prefix cache (the same request again), cancellation of a streamed request;
  4. a structured output (a grammar row drafts nothing);
  5. /metrics: draft-model tokens drafted and accepted under mode="draft" (0 < accepted <
     drafted: verification took some and refused some), none under mode="ngram";
  6. stress: a random checkpoint with blocks of 8 tokens and its draft (the same weights
     with noise, in blocks of 16), --draft-min 7: the draft's proposals stop at its block
     ends and its state goes back after every partial accept; greedy and sampled answers
     alone and 6 at once equal plain decoding's, a dropped stream leaves nothing running,
     and the model's verify steps took drafts back across block starts;
  7. refused at start, with a message naming the cause: a draft model whose vocabulary
     differs, one whose tokenizer.json differs, --speculate draft without --draft-model,
     --draft-model without --speculate draft.
Exit 77 when this CPU cannot run the --cpu-isa path.

usage: test_spec_draft.py --bin BUILD/bin --work DIR [--cpu-isa P]
"""
import argparse
import json
import os
import random
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
sys.path.insert(0, HERE)
import gen_checkpoint  # noqa: E402
import numpy as np  # noqa: E402
import safetensors_np as st  # noqa: E402
import test_spec as ts  # noqa: E402
from test_spec import PACE, check  # noqa: E402

MODEL = ts.MODEL


def noisy_copy(src, out, eps, seed):
    """src's weights (as f32) with eps * std(w) of Gaussian noise on every matrix; the
    same config and tokenizer."""
    t = st.load_checkpoint(src, as_float64=False)
    rng = np.random.default_rng(seed)
    for k, v in t.items():
        v = v.astype(np.float32)
        if v.ndim == 2:
            v = v + np.float32(eps) * v.std() * rng.standard_normal(v.shape).astype(np.float32)
        t[k] = v
    os.makedirs(out, exist_ok=True)
    st.write_file(os.path.join(out, "model.safetensors"), t, "F32")
    cfg = st.load_config(src)
    cfg["torch_dtype"] = "float32"
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f)
    if os.path.exists(os.path.join(src, "tokenizer.json")):
        shutil.copy(os.path.join(src, "tokenizer.json"), out)
    return out


def spec_metrics(server, mode):
    m = server.metrics()
    return {k: m.get('mhla_spec_%s{mode="%s"}' % (k, mode), -1)
            for k in ("draft_tokens_total", "accepted_tokens_total", "acceptance_rate")}


def main_cases(args):
    draft = noisy_copy(MODEL, os.path.join(args.work, "draft_noisy"), 0.6, 1)
    spec = ts.Server(args.bin, args.work, "draft", args.cpu_isa,
                     extra=["--draft-model", draft, "--draft-min", "2"])
    off = None
    try:
        off = ts.Server(args.bin, args.work, "off", args.cpu_isa)
        ts.exact_cases(spec, off)
        ts.mixed_batch(spec, off)
        ts.cache_and_cancel(spec, off)
        ts.structured(spec, off)
        d, n = spec_metrics(spec, "draft"), spec_metrics(spec, "ngram")
        check(0 < d["accepted_tokens_total"] < d["draft_tokens_total"],
              "draft model: drafts verified, some accepted, some refused (%d of %d, rate %.3f)"
              % (d["accepted_tokens_total"], d["draft_tokens_total"], d["acceptance_rate"]))
        check(n["draft_tokens_total"] == 0, "nothing counted under mode=\"ngram\"")
    finally:
        spec.stop()
        if off:
            off.stop()


def stress(args):
    model = os.path.join(args.work, "small_chunk")
    gen_checkpoint.main(["--out", model, "--vocab", "128", "--hidden", "64", "--layers", "2",
                         "--heads", "4", "--kv-heads", "2", "--chunk", "8", "--blocks", "64",
                         "--seed", "5"])
    # the draft: the same weights with noise, in blocks of 16 (its proposals stop at its
    # own block ends, so only a draft with longer blocks makes the model's verified spans
    # cross the model's block starts)
    same_weights = os.path.join(args.work, "chunk16")
    gen_checkpoint.main(["--out", same_weights, "--vocab", "128", "--hidden", "64", "--layers",
                         "2", "--heads", "4", "--kv-heads", "2", "--chunk", "16", "--blocks",
                         "32", "--seed", "5"])
    draft = noisy_copy(same_weights, os.path.join(args.work, "small_chunk_draft"), 0.1, 2)
    spec = ts.Server(args.bin, args.work, "draft", args.cpu_isa, model,
                     ["--draft-model", draft, "--draft-min", "7"], "_stress")
    off = None
    try:
        off = ts.Server(args.bin, args.work, "off", args.cpu_isa, model, [], "_stress")
        rng = random.Random(7)
        bodies = []
        for i in range(3):
            p = [rng.randrange(128) for _ in range(40)]
            bodies.append({"prompt": p, "max_tokens": 300, "temperature": 0, "logprobs": 2,
                           "ignore_eos": True})
            bodies.append(dict(ts.SAMPLED, prompt=p, max_tokens=300, seed=i, ignore_eos=True))
        want = []
        for i, b in enumerate(bodies):
            _, _, o = ts.same(spec, off, b, "stress: request %d alone" % i)
            want.append(ts.answer(o))
        got = ts.all_at_once(spec, bodies, 1800)
        for i in range(len(bodies)):
            check(got[i] == want[i], "stress: request %d in a batch of 6 equals plain" % i)
        ts.cancel(spec, off, dict(bodies[0], max_tokens=400), bodies[1], 0)
        d = spec_metrics(spec, "draft")
        check(0 < d["accepted_tokens_total"] < d["draft_tokens_total"],
              "stress: drafts accepted and refused (%d of %d)"
              % (d["accepted_tokens_total"], d["draft_tokens_total"]))
        m = spec.metrics()
        check(m.get("mhla_spec_block_restores_total", 0) > 0,
              "stress: verify steps took drafts back across a block start (%d times)"
              % m.get("mhla_spec_block_restores_total", 0))
    finally:
        spec.stop()
        if off:
            off.stop()


def refused(bin_dir, extra, want, what):
    r = subprocess.run([os.path.join(bin_dir, "mhla-server"), "--model", MODEL, "--port", "0",
                        "--device", "cpu", *extra], capture_output=True, text=True,
                       timeout=PACE.limit("load", 1, 60))
    check(r.returncode != 0 and want in r.stderr,
          "%s is refused: %r" % (what, r.stderr.strip()[-160:]))


def refusals(args):
    other_vocab = os.path.join(args.work, "vocab128")
    gen_checkpoint.main(["--out", other_vocab, "--vocab", "128", "--hidden", "32", "--layers",
                         "1", "--heads", "2", "--seed", "3"])
    shutil.copy(os.path.join(MODEL, "tokenizer.json"), other_vocab)
    refused(args.bin, ["--speculate", "draft", "--draft-model", other_vocab],
            "its vocabulary has 128 tokens, the model's 4096",
            "a draft model with another vocabulary")
    other_tok = os.path.join(args.work, "other_tokenizer")
    shutil.rmtree(other_tok, ignore_errors=True)
    shutil.copytree(MODEL, other_tok)
    with open(os.path.join(other_tok, "tokenizer.json")) as f:
        tok = json.load(f)
    vocab = tok["model"]["vocab"]
    a, b = sorted(vocab, key=vocab.get)[300:302]  # two ids swapped: same size, other ids
    vocab[a], vocab[b] = vocab[b], vocab[a]
    with open(os.path.join(other_tok, "tokenizer.json"), "w") as f:
        json.dump(tok, f)
    refused(args.bin, ["--speculate", "draft", "--draft-model", other_tok],
            "tokenizer.json differs from the model's", "a draft model with another tokenizer")
    refused(args.bin, ["--speculate", "draft"], "needs --draft-model",
            "--speculate draft without --draft-model")
    refused(args.bin, ["--draft-model", MODEL], "give both",
            "--draft-model without --speculate draft")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--cpu-isa", default="")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    ts.size_for(args.cpu_isa)
    refusals(args)
    main_cases(args)
    stress(args)
    if ts.FAILURES:
        print("%d checks failed" % len(ts.FAILURES))
        return 1
    print("server.spec_draft: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
