#!/usr/bin/python3
"""The C engine's perplexity (mhla-generate --perplexity) of the shipped trained model on a
validation excerpt (train/val_excerpt.ids, 1,000 tokens of the Brown validation split)
equals the PyTorch evaluation (train/eval.py's perplexity()) within 0.5%.

Also checks the model is a trained one: its perplexity on the excerpt must be below the
excerpt's unigram perplexity, 897.5 (add-one-smoothed token frequencies of the training split,
computed by train/eval.py --unigram when the model was made); an untrained model scores
about the vocabulary size (4,096).

Exit 77 (ctest: skipped) with a message when PyTorch is not installed.
"""
import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
UNIGRAM_EXCERPT_PPL = 897.5
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "tools"))
sys.path.insert(0, os.path.join(ROOT, "train"))

from torch_or_skip import torch  # noqa: E402

import eval as ev  # noqa: E402
import mhla_torch as mt  # noqa: E402
from train import perplexity  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--ids", required=True)
    a = ap.parse_args()
    torch.set_num_threads(1)
    p = subprocess.run([os.path.join(a.bin, "mhla-generate"), "--model", a.model, "--perplexity", a.ids,
                        "--threads", "2"], capture_output=True, text=True, timeout=300)
    print(p.stderr.strip())
    if p.returncode != 0:
        print("FAIL: mhla-generate --perplexity exited %d" % p.returncode)
        return 1
    f = p.stdout.split()
    if len(f) != 6 or f[0] != "perplexity" or f[2] != "tokens" or f[4] != "nll":
        print("FAIL: unexpected output %r" % p.stdout)
        return 1
    c_ppl, c_n = float(f[1]), int(f[3])
    model = mt.load_checkpoint(a.model, torch.float64)
    ids = torch.from_numpy(ev.read_ids(a.ids))
    ctx = model.cfg.mhla_num_blocks * model.cfg.mhla_chunk_size
    t_ppl, t_n, _ = perplexity(model, ids, ctx, batch=1)
    rel = abs(c_ppl - t_ppl) / t_ppl
    print("C engine: perplexity %.4f over %d tokens; PyTorch: %.4f over %d tokens; relative difference %.2e"
          % (c_ppl, c_n, t_ppl, t_n, rel))
    failures = []
    if c_n != t_n:
        failures.append("token counts differ: %d vs %d" % (c_n, t_n))
    if not rel <= 0.005:
        failures.append("perplexities differ by %.3f%% (> 0.5%%)" % (100 * rel))
    if not t_ppl < UNIGRAM_EXCERPT_PPL:
        failures.append("perplexity %.1f is not below the unigram baseline %.1f: not a trained model"
                        % (t_ppl, UNIGRAM_EXCERPT_PPL))
    for m in failures:
        print("FAIL: " + m)
    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
