#!/usr/bin/python3
"""The accuracy cost of the weight formats (--weights f32 | bf16 | bf16dot | q8 | q4), measured with
mhla-generate:

  - perplexity on a token-id file (--ids, e.g. train/val_excerpt.ids for models/brown-mhla),
    per format, with mhla-generate --perplexity;
  - greedy agreement (--tokens N, e.g. 1000): N tokens generated greedily (--ignore-eos) from
    the same prompt in each format, compared with the f32 run: tokens until the first
    divergence and the fraction of positions holding the same token;
  - next-token agreement (--logits-tokens N): the logits of every position of the first N
    tokens of --ids (N random tokens, seeded, without --ids) in each format, against f32: the fraction of positions with the same
    argmax, the mean and worst logit error relative to the rms of its row, and the mean KL
    divergence of the softmax from f32's. (A random checkpoint tends to repeat one token when
    it generates, so its greedy agreement says little; this measure does not depend on that.)

usage: bench/weights_accuracy.py --bin build/bin --model DIR [--ids FILE] [--tokens N]
       [--logits-tokens N] [--prompt-ids 1,2,3] [--threads N] [--weights f32,bf16,q8,q4]
"""
import argparse
import json
import os
import random
import subprocess
import sys
import time


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("FAIL: %s: %s" % (" ".join(cmd), r.stderr.strip()[-1000:]))
    return r.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--ids", default="")
    ap.add_argument("--tokens", type=int, default=0)
    ap.add_argument("--logits-tokens", type=int, default=0)
    ap.add_argument("--work", default="/tmp/weights_accuracy", help="scratch dir for logits")
    ap.add_argument("--prompt-ids", default="1,450,3186,310,263,1243")
    ap.add_argument("--threads", default="")
    ap.add_argument("--weights", default="f32,bf16,q8,q4")
    a = ap.parse_args()
    gen = os.path.join(a.bin, "mhla-generate")
    formats = a.weights.split(",")
    common = ["--model", a.model] + (["--threads", a.threads] if a.threads else [])
    if a.ids:
        print("perplexity on %s:" % a.ids)
        base = None
        for w in formats:
            out = run([gen] + common + ["--perplexity", a.ids, "--weights", w]).split()
            ppl = float(out[1])
            base = ppl if base is None else base
            print("  %-5s perplexity %.4f (%+.3f%% of %s), %s tokens" % (w, ppl,
                  100 * (ppl / base - 1), formats[0], out[3]))
    if a.tokens > 0:
        print("greedy agreement, %d tokens from prompt %s:" % (a.tokens, a.prompt_ids))
        seqs = {}
        for w in formats:
            t0 = time.time()
            out = run([gen] + common + ["--prompt-ids", a.prompt_ids, "--max-tokens", str(a.tokens),
                                        "--temperature", "0", "--ignore-eos", "--print-ids",
                                        "--weights", w])
            seqs[w] = [int(x) for x in out.replace(",", " ").split()]
            print("  %-5s %d tokens in %.1f s" % (w, len(seqs[w]), time.time() - t0))
        ref = seqs[formats[0]]
        for w in formats[1:]:
            s = seqs[w]
            n = min(len(s), len(ref))
            first = next((i for i in range(n) if s[i] != ref[i]), n)
            same = sum(1 for i in range(n) if s[i] == ref[i])
            print("  %-5s vs %s: first divergence at token %d of %d; %.1f%% of positions equal"
                  % (w, formats[0], first, n, 100.0 * same / max(n, 1)))
    if a.logits_tokens > 0:
        import numpy as np
        V = json.load(open(os.path.join(a.model, "config.json")))["vocab_size"]
        if a.ids:  # the first N ids of the evaluation text
            ids = ",".join(open(a.ids).read().replace(",", " ").split()[:a.logits_tokens])
            what = "the first %d tokens of %s" % (a.logits_tokens, a.ids)
        else:
            rng = random.Random(11)
            ids = ",".join(str(rng.randrange(V)) for _ in range(a.logits_tokens))
            what = "a random prompt of %d tokens" % a.logits_tokens
        os.makedirs(a.work, exist_ok=True)
        print("next-token agreement over the positions of %s:" % what)
        lg = {}
        for w in formats:
            out = os.path.join(a.work, "logits.%s" % w)
            run([gen] + common + ["--prompt-ids", ids, "--max-tokens", "0", "--weights", w,
                                  "--logits-out", out])
            lg[w] = np.fromfile(out, dtype=np.float32).reshape(-1, V).astype(np.float64)
        ref = lg[formats[0]]
        rms = np.sqrt(np.mean(ref * ref, axis=1, keepdims=True))
        pr = np.exp(ref - ref.max(1, keepdims=True))
        pr /= pr.sum(1, keepdims=True)
        for w in formats[1:]:
            x = lg[w]
            rel = np.abs(x - ref) / rms
            px = x - x.max(1, keepdims=True)
            lpx = px - np.log(np.exp(px).sum(1, keepdims=True))
            kl = np.sum(pr * (np.log(np.maximum(pr, 1e-300)) - lpx), axis=1)
            same = np.mean(np.argmax(x, 1) == np.argmax(ref, 1))
            print("  %-5s vs %s: argmax equal at %.1f%% of positions; logit error / row rms: mean "
                  "%.2e, worst %.2e; mean KL %.2e nats" % (w, formats[0], 100 * same, rel.mean(),
                                                          rel.max(), kl.mean()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
