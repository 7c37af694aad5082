#!/usr/bin/python3
"""The accuracy cost of the weight formats (--weights f32 | bf16 | q8), measured with
mhla-generate:

  - perplexity on a token-id file (--ids, e.g. train/val_excerpt.ids for models/brown-mhla),
    per format, with mhla-generate --perplexity;
  - greedy agreement (--tokens N, e.g. 1000): N tokens generated greedily (--ignore-eos) from
    the same prompt in each format, compared with the f32 run: tokens until the first
    divergence and the fraction of positions holding the same token.

usage: bench/weights_accuracy.py --bin build/bin --model DIR [--ids FILE] [--tokens N]
       [--prompt-ids 1,2,3] [--threads N] [--weights f32,bf16,q8]
"""
import argparse
import os
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
    ap.add_argument("--prompt-ids", default="1,450,3186,310,263,1243")
    ap.add_argument("--threads", default="")
    ap.add_argument("--weights", default="f32,bf16,q8")
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
