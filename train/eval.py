#!/usr/bin/python3
"""Validation perplexity of a checkpoint with the PyTorch model, and the unigram baseline.

    /usr/bin/python3 train/eval.py --model models/brown-mhla --ids train/val_excerpt.ids
    /usr/bin/python3 train/eval.py --model models/brown-mhla --ids train/data/val.ids --unigram train/data/train.ids

--ids: whitespace/comma-separated token ids (text), or a .ids file of uint16 ids when it is
not text (what prepare_data.py writes). Windows of the model's context (Lm*C); in each window
every token but the first is predicted (same definition as mhla-generate --perplexity).
Prints 'perplexity P tokens N nll S' like mhla-generate, computed in float64.
--unigram TRAIN_IDS also prints the add-one-smoothed unigram perplexity of the same tokens.
"""
import argparse
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mhla_torch as mt  # noqa: E402
from train import perplexity  # noqa: E402


def read_ids(path):
    raw = open(path, "rb").read()
    try:
        txt = raw.decode("ascii")
        if txt.strip() and all(c.isdigit() or c in " ,\t\r\n" for c in txt):
            return np.array(txt.replace(",", " ").split(), dtype=np.int64)
    except UnicodeDecodeError:
        pass
    return np.frombuffer(raw, dtype="<u2").astype(np.int64)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--ids", required=True)
    ap.add_argument("--dtype", choices=["f32", "f64"], default="f64")
    ap.add_argument("--unigram", help="train ids for the unigram baseline")
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    model = mt.load_checkpoint(a.model, torch.float64 if a.dtype == "f64" else torch.float32)
    ids = torch.from_numpy(read_ids(a.ids))
    ctx = model.cfg.mhla_num_blocks * model.cfg.mhla_chunk_size
    ppl, n, nll = perplexity(model, ids, ctx, batch=1)
    print("perplexity %.6f tokens %d nll %.6f" % (ppl, n, nll))
    if a.unigram:
        V = model.cfg.vocab_size
        counts = np.bincount(read_ids(a.unigram), minlength=V).astype(np.float64)
        p = (counts + 1.0) / (counts.sum() + V)
        x = ids.numpy()
        tgt = np.concatenate([x[s + 1:s + ctx] for s in range(0, len(x), ctx)])
        print("unigram perplexity %.6f tokens %d" % (math.exp(-np.log(p[tgt]).mean()), len(tgt)))


if __name__ == "__main__":
    main()
