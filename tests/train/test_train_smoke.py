#!/usr/bin/python3
"""train/train.py end to end on a tiny model (D=32, 2 layers, C=8, 8 blocks) and tiny data
(the committed validation excerpt as both splits):

  * run A: 30 steps straight; run B: the same command stopped at step 15 (--stop-at), then
    the same command again, which resumes: B's exported model.safetensors is byte-identical
    to A's (checkpoint + resume restore model, optimiser, step and data RNG);
  * progress lines carry loss, tokens/s and ETA; the resumed run says so;
  * the training loss and the validation perplexity go down (first vs last logged);
  * the export has config.json (model_type gla, attn_extends mhla, mhla_chunk_size 8),
    model.safetensors, tokenizer.json; every layer's mixing matrix is [8, 8, 1, 1, 1, 1],
    lower triangle in [1e-5, 1] (clamped after every step), upper triangle zero;
  * mhla-generate --perplexity on the export equals the last validation perplexity the
    training logged within 0.5% (f16 export vs the f32 training weights).
Exit 77 (ctest: skipped) with a message when PyTorch is not installed.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "tools"))

import torch_or_skip  # noqa: E402,F401

import safetensors_np as st  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--tokenizer", required=True, help="a tokenizer.json to ship with the export")
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    data = os.path.join(a.work, "data")
    os.makedirs(data)
    ids = np.array(open(os.path.join(ROOT, "train", "val_excerpt.ids")).read().split(), dtype=np.int64)
    V = 4096
    assert ids.max() < V
    ids.astype("<u2").tofile(os.path.join(data, "train.ids"))
    ids[:400].astype("<u2").tofile(os.path.join(data, "val.ids"))
    shutil.copyfile(a.tokenizer, os.path.join(data, "tokenizer.json"))
    json.dump({"vocab_size": V}, open(os.path.join(data, "stats.json"), "w"))
    failures = []

    def check(ok, msg):
        print(("ok    " if ok else "FAIL  ") + msg, flush=True)
        if not ok:
            failures.append(msg)

    def train(run, out, extra=()):
        cmd = [sys.executable, os.path.join(ROOT, "train", "train.py"), "--data", data, "--run", run, "--out", out,
               "--hidden", "32", "--layers", "2", "--heads", "2", "--chunk", "8", "--blocks", "8",
               "--seq-len", "64", "--batch", "2", "--steps", "30", "--warmup", "3", "--lr", "1e-2",
               "--log-every", "5", "--eval-every", "10", "--threads", "1", "--seed", "7"] + list(extra)
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        print(p.stdout + p.stderr, flush=True)
        if p.returncode != 0:
            raise SystemExit("FAIL: train.py exited %d" % p.returncode)
        return p.stdout

    outA, outB = os.path.join(a.work, "exportA"), os.path.join(a.work, "exportB")
    logA = train(os.path.join(a.work, "runA"), outA)
    logB1 = train(os.path.join(a.work, "runB"), outB, ["--stop-at", "15"])
    logB2 = train(os.path.join(a.work, "runB"), outB)
    check("stopped at step 15" in logB1 and "resumed from" in logB2 and "at step 15" in logB2,
          "--stop-at 15 stops, the same command resumes at step 15")
    same = open(os.path.join(outA, "model.safetensors"), "rb").read() == \
        open(os.path.join(outB, "model.safetensors"), "rb").read()
    check(same, "stopped + resumed run exports the same bytes as the uninterrupted run")
    prog = [l for l in logA.splitlines() if l.startswith("step ") and "tokens/s" in l]
    check(len(prog) == 6 and all("loss" in l and "ETA" in l for l in prog),
          "progress lines with loss, tokens/s and ETA every 5 steps (%d lines)" % len(prog))
    recs = [json.loads(l) for l in open(os.path.join(a.work, "runA", "log.jsonl"))]
    losses = [r["loss"] for r in recs if "loss" in r]
    ppls = [r["val_ppl"] for r in recs if "val_ppl" in r]
    check(len(losses) == 6 and losses[-1] < losses[0] - 0.5,
          "training loss goes down: %s" % ", ".join("%.3f" % x for x in losses))
    check(len(ppls) == 3 and ppls[-1] < ppls[0], "validation perplexity goes down: %s"
          % ", ".join("%.1f" % x for x in ppls))

    cfg = json.load(open(os.path.join(outA, "config.json")))
    check(cfg.get("model_type") == "gla" and cfg.get("attn_extends") == "mhla" and cfg.get("mhla_chunk_size") == 8
          and cfg.get("vocab_size") == V and os.path.exists(os.path.join(outA, "tokenizer.json")),
          "export: config.json fields and tokenizer.json")
    w = st.load_checkpoint(outA)
    mm_ok = True
    for l in range(2):
        mm = w.get("model.layers.%d.attn.mixing_matrix" % l)
        if mm is None or mm.shape != (8, 8, 1, 1, 1, 1):
            mm_ok = False
            continue
        m = mm.reshape(8, 8).astype(np.float64)
        low = np.tril(np.ones((8, 8), bool))
        mm_ok &= bool(m[low].min() >= np.float32(1e-5) and m[low].max() <= 1.0 and (m[~low] == 0).all())
        mm_ok &= bool(not np.allclose(m[low], (np.tril(np.ones((8, 8))) / np.arange(1, 9)[:, None])[low]))
    check(mm_ok, "mixing matrices [8,8,1,1,1,1], trained (not the init), lower triangle in [1e-5, 1], upper 0")

    p = subprocess.run([os.path.join(a.bin, "mhla-generate"), "--model", outA, "--perplexity",
                        write_text_ids(a.work, ids[:400]),
                        "--threads", "1"], capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        check(False, "mhla-generate --perplexity on the export: %s" % p.stderr.strip())
    else:
        c_ppl = float(p.stdout.split()[1])
        rel = abs(c_ppl - ppls[-1]) / ppls[-1]
        check(rel <= 0.005, "C engine perplexity %.3f vs training's last val ppl %.3f (rel %.1e <= 5e-3)"
              % (c_ppl, ppls[-1], rel))
    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


def write_text_ids(work, ids):
    path = os.path.join(work, "val_ids.txt")
    with open(path, "w") as f:
        f.write(" ".join(map(str, ids)) + "\n")
    return path


if __name__ == "__main__":
    sys.exit(main())
